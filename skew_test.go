package casleader_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
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

// starvedReads is a follower's store whose every other read reaches the database
// delay after it was sent (a starved process, a pool without a free connection):
// its send time is taken before the delay, the age it reads after it. After each
// read that was not held, it lets the leader's next renewal go (heldRenewal).
type starvedReads struct {
	store.Driver
	delay time.Duration
	n     atomic.Int64
	renew chan struct{}
}

func (s *starvedReads) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	held := s.n.Add(1)%2 == 0
	if held {
		time.Sleep(s.delay)
	}
	rec, found, err := s.Driver.Observe(ctx, key)
	if !held {
		select {
		case s.renew <- struct{}{}:
		default:
		}
	}
	return rec, found, err
}

// heldRenewal is the leader's store: each renewal waits for a read of the
// follower's (starvedReads) that was not held.
type heldRenewal struct {
	store.Driver
	renew chan struct{}
}

func (h *heldRenewal) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	select {
	case <-h.renew: // a signal left from before: wait for a fresh one
	default:
	}
	select {
	case <-h.renew:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return h.Driver.Renew(ctx, key, id, version)
}

// TestStarvedReadsShowNoClockSkew: a follower whose every other read reaches the
// database late, by half the margin L - R, while the leader renews right after
// the follower's prompt reads and not again before its late ones, reports no
// clock skew and logs no warning of it, on one server (one clock) and on two
// servers of a cluster whose clocks agree: a delay of its own is not a
// disagreement between clocks (as internal/e2e/group's TestStarvedReadsShowNoClockSkew).
func TestStarvedReadsShowNoClockSkew(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster bool
	}{{"OneServer", false}, {"TwoServersInStep", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				if tc.cluster {
					st.Node(0) // from now on st is a node of a multi-primary cluster
				}
				renew := make(chan struct{}, 1)
				renew <- struct{}{} // the first renewal goes
				a := cfg("a")
				a.HeartbeatInterval = renewDL / 2
				elA := newElector(t, &heldRenewal{Driver: st, renew: renew}, a)
				stopA := running(t, elA)
				time.Sleep(time.Millisecond)
				require.True(t, elA.IsLeader())
				var logs syncBuffer
				b := cfg("b")
				b.PollInterval = poll / 10
				b.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
				elB := newElector(t, &starvedReads{Driver: st, delay: (lease - renewDL) / 2, renew: renew}, b)
				stopB := running(t, elB)
				var most time.Duration
				for range 10 * int(lease/poll) {
					time.Sleep(poll)
					require.True(t, elA.IsLeader(), "the leader keeps the lease")
					s := elB.ClockSkew()
					most = max(most, s, -s)
				}
				require.NoError(t, stopB())
				require.NoError(t, stopA())
				assert.Zero(t, most, "clock skew reported by the starved follower")
				assert.False(t, strings.Contains(logs.String(), "clocks of the database servers disagree"), "the starved follower warned of clock skew:\n%s", logs.String())
			})
		})
	}
}
