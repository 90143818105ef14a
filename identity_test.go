package casleader_test

import (
	"context"
	"log/slog"
	"sync"
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

// TestRowEditedToNameAnotherCandidateGivesItNoTerm: the row of a live leader is
// edited to name another live candidate, keeping the leader's term. That
// candidate never won the term: it must not act in it (it used to adopt it, and
// both acted with one token until the old leader's next renewal).
func TestRowEditedToNameAnotherCandidateGivesItNoTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newElector(t, st, cfg("a"))
		stopA := running(t, a)
		synctest.Wait()
		require.True(t, a.IsLeader())
		b := newElector(t, st, cfg("b"))
		stopB := running(t, b)
		synctest.Wait()
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		stolen := rec.Term
		st.Put(store.Record{Key: "k", Version: rec.Version + 1, LeaderID: "b", Term: stolen})

		for end := time.Now().Add(3 * lease); time.Now().Before(end); time.Sleep(time.Millisecond) {
			synctest.Wait()
			if b.IsLeader() {
				require.NotEqual(t, stolen, b.Token(), "b acts in a term it never won")
			}
			require.False(t, a.IsLeader() && b.IsLeader(), "two leaders")
		}
		assert.True(t, a.IsLeader() || b.IsLeader(), "the edited lease expired and a new term was won")
		require.NoError(t, stopA())
		require.NoError(t, stopB(), "an edited row that nobody renews is no duplicate ID")
	})
}

// TestTwoProcessesWithOneIDNeverShareATerm: a second process started with the ID
// of the live leader must not adopt the leader's term; it reports the clash,
// naming the ID, within about one lease, and stops.
func TestTwoProcessesWithOneIDNeverShareATerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		first := newElector(t, st, cfg("a"))
		stopFirst := running(t, first)
		synctest.Wait()
		require.True(t, first.IsLeader())
		token := first.Token()

		second := newElector(t, st, cfg("a"))
		done := make(chan error, 1)
		go func() { done <- second.Run(t.Context()) }()
		start := time.Now()
		var err error
		for err == nil {
			select {
			case err = <-done:
			case <-time.After(time.Millisecond):
				require.False(t, second.IsLeader(), "the second process acts in the first's term")
				require.Less(t, time.Since(start), lease+2*poll, "the duplicate ID was not reported within about one lease")
			}
		}
		require.ErrorIs(t, err, casleader.ErrDuplicateID)
		assert.Contains(t, err.Error(), `ID "a"`)
		t.Logf("duplicate ID reported %v after the second process started (lease %v, poll %v)", time.Since(start), lease, poll)
		assert.True(t, first.IsLeader(), "the first process leads on")
		assert.Equal(t, token, first.Token())
		require.NoError(t, stopFirst())
	})
}

// TestRestartWithAStableID: a process that kept its lease on exit restarts with
// the same ID. It does not adopt the old lease unless told which term to resume.
func TestRestartWithAStableID(t *testing.T) {
	// leadThenExit runs a leader that keeps its lease on exit and returns its token.
	leadThenExit := func(t *testing.T, st *memstore.Store) int64 {
		c := cfg("a")
		c.KeepLeaseOnExit = true
		el := newElector(t, st, c)
		stop := running(t, el)
		synctest.Wait()
		require.True(t, el.IsLeader())
		token := el.Token()
		require.NoError(t, stop())
		return token
	}
	t.Run("WithoutResumeTermTheOldLeaseExpiresFirst", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := memstore.New()
			old := leadThenExit(t, st)
			rec, _, err := st.Observe(t.Context(), "k")
			require.NoError(t, err)
			expires := time.Now().Add(lease - rec.Age)

			el := newElector(t, st, cfg("a"))
			stop := running(t, el)
			time.Sleep(time.Until(expires) - time.Millisecond)
			assert.False(t, el.IsLeader(), "the restarted process adopted a term it did not win")
			time.Sleep(poll + poll/10)
			require.True(t, el.IsLeader(), "it leads once the old lease expired")
			assert.Greater(t, el.Token(), old, "in a new term")
			require.NoError(t, stop(), "an earlier run's lease is no duplicate ID")
		})
	})
	t.Run("ResumeTermResumesWithARenewal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := memstore.New()
			old := leadThenExit(t, st)
			c := cfg("a")
			c.ResumeTerm = old
			el := newElector(t, st, c)
			stop := running(t, el)
			synctest.Wait()
			require.True(t, el.IsLeader(), "the resumed term is adopted at once")
			assert.Equal(t, old, el.Token())
			time.Sleep(3 * lease)
			assert.True(t, el.IsLeader(), "and renewed")
			require.NoError(t, stop())
		})
	})
	t.Run("ResumeTermIsLedOnlyOnceARenewalWon", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := memstore.New()
			old := leadThenExit(t, st)
			rec, _, err := st.Observe(t.Context(), "k")
			require.NoError(t, err)
			// The earlier run's release was still on its way when it ended: it
			// executes after the restarted run's read, before its renewal.
			late := &lateRelease{Driver: st, version: rec.Version}
			var mu sync.Mutex
			var led []int64
			c := cfg("a")
			c.ResumeTerm = old
			c.OnStartedLeading = func(ctx context.Context, token int64) {
				mu.Lock()
				led = append(led, token)
				mu.Unlock()
				<-ctx.Done()
			}
			el := newElector(t, late, c)
			stop := running(t, el)
			time.Sleep(lease)
			require.True(t, late.done.Load(), "the earlier run's release executed")
			time.Sleep(lease)
			require.True(t, el.IsLeader(), "the released lease is won again")
			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, led)
			assert.NotContains(t, led, old, "the released term was never led again")
			assert.Greater(t, el.Token(), old)
			require.NoError(t, stop())
		})
	})
	t.Run("NegativeResumeTermIsRefused", func(t *testing.T) {
		c := cfg("a")
		c.ResumeTerm = -1
		_, err := casleader.New(memstore.New(), c)
		require.ErrorIs(t, err, casleader.ErrInvalidConfig)
		assert.Contains(t, err.Error(), "ResumeTerm")
	})
}

// TestOutsideWriteToTheLeadersTermIsNoDuplicate: something that is not a
// candidate (a script, an operator) bumps the version of the leader's term. The
// leader's next renewal loses its compare-and-set with no error of its own to
// explain it, and the row still shows its ID, its term and its incarnation: no
// other process leads a term it did not start, so this is an outside write, not a
// duplicate ID. The leader steps down, says what it saw, and campaigns again: once
// the lease expires it leads in a new term.
func TestOutsideWriteToTheLeadersTermIsNoDuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var logs syncBuffer
		c := cfg("a")
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		el := newElector(t, st, c)
		done := make(chan error, 1)
		go func() { done <- el.Run(t.Context()) }()
		synctest.Wait()
		require.True(t, el.IsLeader())
		old := el.Token()
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		ok, err := st.Renew(t.Context(), "k", "a", rec.Version) // the outside write
		require.NoError(t, err)
		require.True(t, ok)

		time.Sleep(2 * heartbeat)
		select {
		case err := <-done:
			t.Fatalf("Run ended on an outside write: %v", err)
		default:
		}
		assert.False(t, el.IsLeader(), "stepped down")
		assert.Contains(t, logs.String(), "written by something other than its leader")
		assert.NotContains(t, logs.String(), "duplicate")
		time.Sleep(lease + 2*poll)
		require.True(t, el.IsLeader(), "campaigns again")
		assert.Greater(t, el.Token(), old, "in a new term")
		require.NoError(t, el.Stop(t.Context()))
		require.NoError(t, <-done)
	})
}

// lateRelease executes the release of the earlier run of "a" from version just
// before the first renewal of the restarted run: a statement of a crashed run
// that reached the database late.
type lateRelease struct {
	store.Driver
	version int64
	done    atomic.Bool
}

func (l *lateRelease) before(ctx context.Context) {
	if l.done.CompareAndSwap(false, true) {
		_, _ = l.Driver.Release(ctx, "k", "a", l.version)
	}
}

func (l *lateRelease) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	l.before(ctx)
	return l.Driver.Renew(ctx, key, id, version)
}

func (l *lateRelease) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	l.before(ctx)
	return l.Driver.RenewMany(ctx, id, held)
}
