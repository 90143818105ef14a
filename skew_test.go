package casleader_test

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// TestCandidateOnAServerAheadDoesNotTakeOverALiveLease: the leader renews through
// one database server; a candidate starts on another whose clock runs 2 s ahead
// (five leases), where every read shows the lease expired and an election would
// win. It never leads while the leader does, and takes over only after the leader
// is gone and its lease has run out; a candidate on a server 2 s behind waits for
// its own server's clock. Both report the skew, with its sign, and warn.
func TestCandidateOnAServerAheadDoesNotTakeOverALiveLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const skew = 2 * time.Second
		node0 := memstore.New()
		var logs syncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))

		a := cfg("a")
		a.KeepLeaseOnExit = true // killed below: its lease stays until it expires
		elA := newElector(t, node0, a)
		stopA := running(t, elA)
		time.Sleep(time.Millisecond)
		require.True(t, elA.IsLeader())

		b, c := cfg("b"), cfg("c")
		b.Logger, c.Logger = logger, logger
		elB := newElector(t, node0.Node(skew), b)
		elC := newElector(t, node0.Node(-skew), c)
		stopB, stopC := running(t, elB), running(t, elC)

		both := func() bool {
			n := 0
			for _, el := range []*casleader.Elector{elA, elB, elC} {
				if el.IsLeader() {
					n++
				}
			}
			return n > 1
		}
		for range int(10 * lease / time.Millisecond) {
			time.Sleep(time.Millisecond)
			require.False(t, both(), "two leaders at once")
			require.True(t, elA.IsLeader(), "the leader renews: nobody takes over")
		}
		assert.InDelta(t, skew, elB.ClockSkew(), float64(poll+heartbeat), "b's server runs ahead: %v", elB.ClockSkew())
		assert.LessOrEqual(t, elB.ClockSkew(), skew, "a lower bound")
		assert.InDelta(t, -skew, elC.ClockSkew(), float64(heartbeat), "c's server runs behind: %v", elC.ClockSkew())
		assert.GreaterOrEqual(t, elC.ClockSkew(), -skew, "a lower bound")
		assert.Contains(t, logs.String(), "clocks of the database servers disagree")

		// The leader dies; its lease stays. Its last renewal was at most a heartbeat
		// before.
		require.NoError(t, stopA())
		died := time.Now()
		for !elB.IsLeader() && !elC.IsLeader() {
			time.Sleep(time.Millisecond)
			require.Less(t, time.Since(died), 10*lease, "nobody took over")
		}
		took := time.Since(died)
		assert.GreaterOrEqual(t, took, lease-heartbeat, "taken over %v after the leader died", took)
		assert.True(t, elB.IsLeader(), "b takes over: c's server judges the lease 2 s later")
		for range int(lease / time.Millisecond) {
			time.Sleep(time.Millisecond)
			require.False(t, both(), "two leaders at once")
		}
		require.NoError(t, stopB())
		require.NoError(t, stopC())
		warnings := 0
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "disagree") && strings.Contains(line, "id=b") {
				warnings++
			}
		}
		assert.Equal(t, 1, warnings, "one warning per 10 s:\n%s", logs.String())
	})
}
