package casleader_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store"
)

// endCounter counts the writes that end a leader's term and win their
// compare-and-set (a write that failed may be sent again): releases and handovers.
// It embeds the store, so an elector on it keeps the store's wake-ups and members.
type endCounter struct {
	store.Driver
	releases, handovers atomic.Int64 // those that won their compare-and-set
	handedTo            atomic.Pointer[store.Candidate]
	handedTerm          atomic.Int64 // the term the last handover started
	// follower, when not nil, counts the elections of the handover's target;
	// electionsAtSend is its count when the last handover was sent.
	follower        *callCounter
	electionsAtSend atomic.Int64
}

func (c *endCounter) Release(ctx context.Context, key, id string, v int64) (bool, error) {
	ok, err := c.Driver.Release(ctx, key, id, v)
	if ok {
		c.releases.Add(1)
	}
	return ok, err
}

func (c *endCounter) Handover(ctx context.Context, key, id string, v int64, to store.Candidate) (int64, bool, error) {
	if c.follower != nil {
		c.electionsAtSend.Store(c.follower.elections.Load())
	}
	term, ok, err := c.Driver.Handover(ctx, key, id, v, to)
	if ok {
		c.handovers.Add(1)
		c.handedTo.Store(&to)
		c.handedTerm.Store(term)
	}
	return term, ok, err
}

// knowsSuccessor reports whether log shows that its elector's members reads have
// named id the successor of its key: a graceful end of its term now hands the
// lease to id.
func knowsSuccessor(log *lockedBuffer, id string) bool {
	for _, l := range log.Lines() {
		if strings.Contains(l, "a graceful end of the term hands the key to this successor") && strings.Trim(attr(l, "successor"), `"`) == id {
			return true
		}
	}
	return false
}

// exitCfg are membersCfg's timings doubled: a members write or read has half a
// lease (2 s) before it times out, which a loaded machine needs.
func exitCfg(id string) casleader.Config {
	c := membersCfg(id)
	c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval = 4*time.Second, 2400*time.Millisecond, 200*time.Millisecond, time.Second
	return c
}

// debugLogger logs at Debug level into log.
func debugLogger(log *lockedBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestGracefulExitHandsTheLeaseToTheLiveFollower: once a leader's members reads
// show a live follower, each graceful end of its term (Resign, the end of Run) is
// one compare-and-set that names that follower and its process (a handover, no
// release), and the follower leads the term that handover started from a read,
// with no election write; its reads never named an observer or a paused candidate.
func TestGracefulExitHandsTheLeaseToTheLiveFollower(t *testing.T) {
	t.Parallel()
	for _, d := range guardDBs() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db, _ := membersDB(t, d.open)
			for _, end := range []string{"Resign", "Stop"} {
				var log lockedBuffer
				ca := exitCfg("a")
				ca.Key, ca.Logger = "k"+end, debugLogger(&log)
				sb := &callCounter{Driver: db.st}
				sa := &endCounter{Driver: db.st, follower: sb}
				a := newElector(t, sa, ca)
				stopA := running(t, a)
				require.Eventually(t, a.IsLeader, settle, 10*time.Millisecond)
				started := func(id string, f func(*casleader.Elector)) *casleader.Elector {
					c := exitCfg(id)
					c.Key = ca.Key
					el := newElector(t, sb, c)
					f(el)
					stop := running(t, el)
					t.Cleanup(func() { _ = stop() })
					return el
				}
				started("0paused", func(el *casleader.Elector) { el.Pause() }) // lower IDs: ties would pick them
				ob := exitCfg("0observer")
				ob.Key, ob.Observer = ca.Key, true
				stopO := running(t, newElector(t, db.st, ob))
				t.Cleanup(func() { _ = stopO() })
				b := started("b", func(*casleader.Elector) {})
				if !assert.Eventually(t, func() bool { return knowsSuccessor(&log, "b") }, 2*settle, 10*time.Millisecond,
					"a's members reads name b its successor") {
					t.Fatal(log.String())
				}

				if end == "Resign" {
					require.NoError(t, a.Resign(t.Context()))
				} else {
					require.NoError(t, stopA())
				}
				require.Eventually(t, b.IsLeader, settle, time.Millisecond, "b leads the handed term")
				// Counted from the handover's send: before it, a wake-up without a
				// version (the listener reconnected, as on a loaded machine) sends
				// an ElectReleased that loses to a's lease, as it should.
				assert.Equal(t, sa.electionsAtSend.Load(), sb.elections.Load(), "%s: b led the handed term from a read, with no election", end)
				assert.Equal(t, sa.handedTerm.Load(), b.Token(), "%s: b leads the term the handover started", end)
				assert.Zero(t, sa.releases.Load(), "%s released the row instead of handing it to b", end)
				if !assert.Equal(t, int64(1), sa.handovers.Load(), "%s: one handover won", end) {
					t.Log(log.String())
				}
				to := sa.handedTo.Load()
				assert.Equal(t, "b", to.ID, "the handover names b, not the paused candidate nor the observer")
				assert.NotEmpty(t, to.Incarnation, "the handover names b's process, as its members row shows it")
				if end == "Resign" {
					require.NoError(t, stopA())
				}
			}
		})
	}
}

// TestGracefulExitReleasesWhenNoLiveCandidateIsKnown: a leader whose members reads
// show no other live candidate (its follower writes no members rows) releases the
// row when it resigns, as before, and the follower elects the released row.
func TestGracefulExitReleasesWhenNoLiveCandidateIsKnown(t *testing.T) {
	t.Parallel()
	for _, d := range guardDBs() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db, _ := membersDB(t, d.open)
			var log lockedBuffer
			ca := exitCfg("a")
			ca.Logger = debugLogger(&log)
			sa := &endCounter{Driver: db.st}
			a := newElector(t, sa, ca)
			stopA := running(t, a)
			defer func() { require.NoError(t, stopA()) }()
			require.Eventually(t, a.IsLeader, settle, 10*time.Millisecond)
			b := newElector(t, &hiddenMember{Driver: db.st}, exitCfg("b"))
			stopB := running(t, b)
			defer func() { require.NoError(t, stopB()) }()
			require.Eventually(t, func() bool { return b.Leader() == "a" && knowsSuccessor(&log, "") }, 2*settle, 10*time.Millisecond,
				"b follows a, and a's members reads show no successor")

			require.NoError(t, a.Resign(t.Context()))
			require.Eventually(t, b.IsLeader, settle, time.Millisecond)
			assert.Equal(t, int64(1), sa.releases.Load(), "a released the row")
			assert.Zero(t, sa.handovers.Load(), "no handover to a candidate nobody saw")
		})
	}
}

// hiddenMember is a store on which a candidate takes part in the election but
// writes no members rows: no other candidate knows it is there.
type hiddenMember struct{ store.Driver }

func (hiddenMember) PutMembers(context.Context, []store.Member) error { return nil }
