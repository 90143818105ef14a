package coalesce

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

const wait = 10 * time.Millisecond

// held puts n rows led by "a" at version 5 and returns their keys.
func held(st *memstore.Store, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%03d", i)
		st.Put(store.Record{Key: keys[i], Version: 5, Term: 5, LeaderID: "a", Lease: time.Hour, Incarnation: "a1"})
	}
	return keys
}

// joined returns n handles on st that have joined, and leaves them at the test's end.
func joined(t *testing.T, st store.Driver, n int) []*Store {
	hs := make([]*Store, n)
	for i := range hs {
		hs[i] = New(st, wait, 10*wait)
		t.Cleanup(hs[i].Join())
	}
	return hs
}

func TestALoneCallIsTheSingleKeyStatement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		keys := held(st, 1)
		h := joined(t, st, 1)[0]
		for v := int64(5); v < 8; v++ {
			ok, err := h.Renew(t.Context(), keys[0], "a", v)
			require.NoError(t, err)
			require.True(t, ok, "renewal from version %d", v)
			time.Sleep(time.Second) // a heartbeat: the queue is quiet again
		}
		assert.Equal(t, 3, st.Calls(memstore.OpRenew))
		assert.Zero(t, st.Calls(memstore.OpRenewMany))
	})
}

// TestConcurrentRenewalsShareStatementsWithExactOutcomes renews 200 keys at once
// from 200 handles, a quarter of them from a version the rows are not at: each
// gets its own compare-and-set's outcome, and the statements are batches.
func TestConcurrentRenewalsShareStatementsWithExactOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		keys := held(st, 200)
		hs := joined(t, st, len(keys))
		got := make([]bool, len(keys))
		var wg sync.WaitGroup
		for i, h := range hs {
			wg.Go(func() {
				v := int64(5)
				if i%4 == 0 {
					v = 4 // stale: must lose
				}
				ok, err := h.Renew(t.Context(), keys[i], "a", v)
				assert.NoError(t, err)
				got[i] = ok
			})
		}
		wg.Wait()
		for i, k := range keys {
			rec, _, err := st.Observe(t.Context(), k)
			require.NoError(t, err)
			assert.Equal(t, i%4 != 0, got[i], "key %s", k)
			assert.Equal(t, map[bool]int64{true: 6, false: 5}[i%4 != 0], rec.Version, "key %s", k)
		}
		singles, batches := st.Calls(memstore.OpRenew), st.Calls(memstore.OpRenewMany)
		t.Logf("%d single statements, %d batches for %d renewals", singles, batches, len(keys))
		assert.LessOrEqual(t, singles+batches, 6, "four at once (the burst), then batches")
		assert.Positive(t, batches)
	})
}

// TestABatchNeverHoldsAKeyTwice: two renewals of one key from one version, sent
// together, are two compare-and-sets: one wins.
func TestABatchNeverHoldsAKeyTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		keys := held(st, 10)
		hs := joined(t, st, 12)
		for i := range 4 { // spend the burst
			_, err := hs[0].Renew(t.Context(), keys[i], "a", 5)
			require.NoError(t, err)
		}
		won := make([]bool, 8)
		var wg sync.WaitGroup
		for i := range won {
			wg.Go(func() {
				// keys 4..7 each twice, from the same version
				ok, err := hs[i].Renew(t.Context(), keys[4+i%4], "a", 5)
				assert.NoError(t, err)
				won[i] = ok
			})
		}
		wg.Wait()
		for i := range 4 {
			assert.True(t, won[i] != won[i+4], "key %s: exactly one of its two renewals wins", keys[4+i])
		}
		assert.Positive(t, st.Calls(memstore.OpRenewMany))
	})
}

// TestACallerThatStopsWaitingLeavesTheOthers: a caller whose context ends gets a
// transient error; the batch goes on for the others.
func TestACallerThatStopsWaitingLeavesTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		keys := held(st, 8)
		hs := joined(t, st, 8)
		for i := range 4 {
			_, err := hs[0].Renew(t.Context(), keys[i], "a", 5)
			require.NoError(t, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), wait/2)
		defer cancel()
		var wg sync.WaitGroup
		var gone error
		wg.Go(func() { _, gone = hs[4].Renew(ctx, keys[4], "a", 5) })
		got := make([]bool, 3)
		for i := range got {
			wg.Go(func() {
				ok, err := hs[5+i].Renew(t.Context(), keys[5+i], "a", 5)
				assert.NoError(t, err)
				got[i] = ok
			})
		}
		wg.Wait()
		assert.ErrorIs(t, gone, store.ErrTransient)
		assert.ErrorIs(t, gone, context.DeadlineExceeded)
		assert.Equal(t, []bool{true, true, true}, got)
		rec, _, err := st.Observe(t.Context(), keys[4])
		require.NoError(t, err)
		assert.Equal(t, int64(5), rec.Version, "the call that stopped waiting before its batch left was not sent")
	})
}

// TestReadsAndReleasesShareStatements covers the other election calls.
func TestReadsAndReleasesShareStatements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		keys := held(st, 50)
		hs := joined(t, st, len(keys))
		var wg sync.WaitGroup
		for i, h := range hs {
			wg.Go(func() {
				rec, found, err := h.Observe(t.Context(), keys[i])
				assert.NoError(t, err)
				assert.True(t, found)
				assert.Equal(t, keys[i], rec.Key)
				_, found, err = h.Observe(t.Context(), "missing-"+keys[i])
				assert.NoError(t, err)
				assert.False(t, found)
				ok, err := h.Release(t.Context(), keys[i], "a", 5)
				assert.NoError(t, err)
				assert.True(t, ok)
			})
		}
		wg.Wait()
		assert.Positive(t, st.Calls(memstore.OpObserveMany))
		assert.Positive(t, st.Calls(memstore.OpReleaseMany))
		assert.Less(t, st.Calls(memstore.OpObserve)+st.Calls(memstore.OpObserveMany), 2*len(keys)/4)
		for _, k := range keys {
			rec, _, err := st.Observe(t.Context(), k)
			require.NoError(t, err)
			assert.Empty(t, rec.LeaderID, "key %s released", k)
		}
	})
}

// TestAnErrorReachesEveryCallOfItsBatch: a batch that fails fails each call in it,
// and the store's classification is kept.
func TestAnErrorReachesEveryCallOfItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		keys := held(st, 10)
		hs := joined(t, st, 10)
		for i := range 4 {
			_, err := hs[0].Renew(t.Context(), keys[i], "a", 5)
			require.NoError(t, err)
		}
		down := fmt.Errorf("%w: connection refused", store.ErrTransient)
		st.FailNext(memstore.OpRenewMany, down)
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Go(func() { _, errs[i] = hs[4+i].Renew(t.Context(), keys[4+i], "a", 5) })
		}
		wg.Wait()
		for i, err := range errs {
			assert.True(t, errors.Is(err, store.ErrTransient), "call %d: %v", i, err)
		}
	})
}

func TestHandlesLeaveTheRegistry(t *testing.T) {
	st := memstore.New()
	a, b := New(st, wait, wait), New(st, wait, wait)
	leaveA, leaveB := a.Join(), b.Join()
	assert.Same(t, a.hub.Load(), b.hub.Load(), "handles on one store share one hub")
	leaveA()
	assert.Nil(t, a.hub.Load())
	leaveB()
	registry.mu.Lock()
	defer registry.mu.Unlock()
	assert.NotContains(t, registry.hubs, store.Driver(st))
}

// unhashable is a decorator whose value cannot be a map key.
type unhashable struct {
	store.Driver
	//lint:ignore U1000 never read: a slice field is what makes the value unhashable
	tags []string
}

func TestAStoreThatCannotBeAMapKeyIsNotShared(t *testing.T) {
	h := New(unhashable{Driver: memstore.New()}, wait, wait)
	leave := h.Join()
	defer leave()
	assert.Nil(t, h.hub.Load())
}

// TestReadsOfOneKeyShareABatch: the followers of one key on one store read its
// row together, in one statement, not one after another.
func TestReadsOfOneKeyShareABatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		keys := held(st, 1)
		hs := joined(t, st, 50)
		for range 4 { // spend the burst
			_, _, err := hs[0].Observe(t.Context(), keys[0])
			require.NoError(t, err)
		}
		var wg sync.WaitGroup
		for _, h := range hs {
			wg.Go(func() {
				rec, found, err := h.Observe(t.Context(), keys[0])
				assert.NoError(t, err)
				assert.True(t, found)
				assert.Equal(t, int64(5), rec.Version)
			})
		}
		wg.Wait()
		assert.Equal(t, 4, st.Calls(memstore.OpObserve))
		assert.Equal(t, 1, st.Calls(memstore.OpObserveMany))
	})
}

// TestPrunesAreSharedAndSpaced: the handles' prunes of the members table are one
// statement per tenth of the age they prune at, whatever the number of handles.
func TestPrunesAreSharedAndSpaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &pruneCounter{Driver: memstore.New()}
		hs := joined(t, st, 100)
		const age = 10 * time.Second
		for range 3 { // 900 ms, each handle pruning every 300 ms
			var wg sync.WaitGroup
			for _, h := range hs {
				wg.Go(func() {
					_, err := h.PruneMembers(t.Context(), age)
					assert.NoError(t, err)
				})
			}
			wg.Wait()
			time.Sleep(300 * time.Millisecond)
		}
		assert.Equal(t, int64(1), st.n.Load(), "one prune per age/10 (1 s): the later rounds come within it")
		time.Sleep(100 * time.Millisecond) // 1 s since the first
		_, err := hs[0].PruneMembers(t.Context(), age)
		require.NoError(t, err)
		assert.Equal(t, int64(2), st.n.Load())
	})
}

type pruneCounter struct {
	store.Driver
	n atomic.Int64
}

func (p *pruneCounter) PruneMembers(ctx context.Context, olderThan time.Duration) (int64, error) {
	p.n.Add(1)
	return p.Driver.PruneMembers(ctx, olderThan)
}

// slowInserts counts the inserts in flight, each taking a second.
type slowInserts struct {
	store.Driver
	now, most atomic.Int64
}

func (s *slowInserts) Insert(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(time.Second)
	return s.Driver.Insert(ctx, key, cand)
}

// TestElectionsWaitForASlot: twenty electors starting at once send at most
// electSlots elections at a time, each its own statement; one that cannot get a
// slot before its deadline is not sent.
func TestElectionsWaitForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowInserts{Driver: memstore.New()}
		hs := joined(t, st, 21)
		var wg sync.WaitGroup
		for i, h := range hs[:20] {
			wg.Go(func() {
				term, ok, err := h.Insert(t.Context(), fmt.Sprintf("k%02d", i), store.Candidate{ID: "a", Incarnation: fmt.Sprint(i), Lease: time.Hour})
				assert.NoError(t, err)
				assert.True(t, ok)
				assert.Positive(t, term)
			})
		}
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, _, err := hs[20].Insert(ctx, "late", store.Candidate{ID: "a", Incarnation: "late", Lease: time.Hour})
		assert.ErrorIs(t, err, store.ErrTransient)
		wg.Wait()
		assert.Equal(t, int64(electSlots), st.most.Load())
		_, found, err := st.Observe(t.Context(), "late")
		require.NoError(t, err)
		assert.False(t, found, "an election that never had a slot is not sent")
	})
}

// A queue waiting for a token re-arms its timer for the instant the token is
// there. Rounded down, that instant was now for a limiter a few nanoseconds
// short of a token: the timer fired at once, found no token and was armed for
// now again, without end (in a synctest bubble, time never moved on, and an
// elector's renewal waited for ever).
func TestATokenIsWaitedForUntilItIsThere(t *testing.T) {
	for _, every := range []time.Duration{time.Millisecond, 3 * time.Millisecond, wait, 100 * time.Millisecond} {
		lim := rate.NewLimiter(rate.Every(every), 4)
		start := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
		require.True(t, lim.AllowN(start, 4))
		long := 0
		for i := range 20000 {
			now := start.Add(time.Duration(i) * every / 20000)
			if lim.TokensAt(now) >= 1 {
				continue
			}
			d := untilToken(lim, now)
			require.Positive(t, d, "every %v, %v after the burst", every, now.Sub(start))
			require.GreaterOrEqual(t, lim.TokensAt(now.Add(d)), 1.0, "every %v, %v after the burst", every, now.Sub(start))
			if d > every {
				long++
			}
		}
		assert.Zero(t, long, "every %v: the wait is never longer than one token's time", every)
	}
}
