package casleader_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// TestResignAfterADrainThatTimedOutLeavesTheLeaseToExpire: a leader's work that
// ignores its context is still running when DrainTimeout has passed. Releasing the
// row then would let a follower lead beside that work; the lease must instead be
// left to expire by itself, and the resign must say so.
func TestResignAfterADrainThatTimedOutLeavesTheLeaseToExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		stuck := make(chan struct{})
		workDone := make(chan struct{})
		c := cfg("a")
		c.OnStartedLeading = func(context.Context, int64) {
			defer close(workDone)
			<-stuck // ignores its context
		}
		a := newElector(t, st, c)
		stopA := running(t, a)
		synctest.Wait()
		require.True(t, a.IsLeader())
		b := newElector(t, st, cfg("b"))
		stopB := running(t, b)
		synctest.Wait()

		err := a.Resign(t.Context())
		require.ErrorIs(t, err, casleader.ErrNotDrained)
		assert.Contains(t, err.Error(), `"k"`, "the error names the key")
		assert.False(t, a.IsLeader(), "the leader stopped acting")
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		require.Equal(t, "a", rec.LeaderID, "the row must not be released while the work runs: %+v", rec)
		expires := time.Now().Add(lease - rec.Age)

		// Nobody leads before the lease has expired by the database clock.
		time.Sleep(time.Until(expires) - time.Millisecond)
		assert.False(t, b.IsLeader(), "b leads before the lease of the undrained term expired")
		assert.False(t, a.IsLeader())
		// Then a follower takes over as usual (its next read, jitter included).
		time.Sleep(poll + poll/10)
		assert.True(t, b.IsLeader(), "b takes over once the lease has expired")

		close(stuck)
		<-workDone
		require.NoError(t, stopB())
		require.NoError(t, stopA())
	})
}

// TestUndrainedWorkKeepsItsCandidateFromLeadingAgain: while the work of an ended
// term still runs, this candidate does not lead again beside it; once the work
// returns it campaigns as usual.
func TestUndrainedWorkKeepsItsCandidateFromLeadingAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		stuck := make(chan struct{})
		var starts atomic.Int32
		c := cfg("a")
		c.OnStartedLeading = func(context.Context, int64) {
			if starts.Add(1) == 1 {
				<-stuck // the first term's work ignores its context
			}
		}
		a := newElector(t, st, c)
		stop := running(t, a)
		synctest.Wait()
		require.True(t, a.IsLeader())
		require.ErrorIs(t, a.ResignFor(t.Context(), 0), casleader.ErrNotDrained)

		// No cool-down: only the running work keeps a out, for many leases.
		time.Sleep(5 * lease)
		assert.False(t, a.IsLeader(), "a leads again while the work of its earlier term still runs")
		assert.Equal(t, int32(1), starts.Load())

		close(stuck)
		time.Sleep(poll + poll/10)
		assert.True(t, a.IsLeader(), "a campaigns again once that work returned")
		assert.Equal(t, int32(2), starts.Load())
		require.NoError(t, stop())
	})
}
