package group_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/term"
	"github.com/casleader/casleader/store"
)

// works records the leadership contexts handed to OnStartedLeading, per key, and
// runs each callback as behave says (by default: until its context ends).
type works struct {
	mu     sync.Mutex
	ctxs   map[string][]context.Context
	behave func(ctx context.Context, key string)
}

func newWorks() *works { return &works{ctxs: map[string][]context.Context{}} }

func (w *works) run(ctx context.Context, key string, token int64) {
	w.mu.Lock()
	w.ctxs[key] = append(w.ctxs[key], ctx)
	behave := w.behave
	w.mu.Unlock()
	if behave != nil {
		behave(ctx, key)
		return
	}
	<-ctx.Done()
}

// last returns the leadership context of key's last term, nil when none started.
func (w *works) last(key string) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.ctxs[key]; len(c) > 0 {
		return c[len(c)-1]
	}
	return nil
}

func (w *works) terms(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ctxs[key])
}

func done(ctx context.Context) bool { return ctx.Err() != nil }

func withWorks(w *works) func(*casleader.GroupConfig) {
	return func(c *casleader.GroupConfig) { c.OnStartedLeading = w.run }
}

func row(t *testing.T, st *memstore.Store, key string) store.Record {
	t.Helper()
	rec, found, err := st.Observe(t.Context(), key)
	require.NoError(t, err)
	require.True(t, found)
	return rec
}

// A key's leadership context carries its term and ends with that key's term, not
// with the group's.
func TestKeysContextEndsWithItsTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		w := newWorks()
		ks := keys(3)
		g := newGroup(t, st, "a", ks, withWorks(w))
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		for _, k := range ks {
			ctx := w.last(k)
			require.NotNil(t, ctx, "no work started for %s", k)
			tm := term.From(ctx)
			require.NotNil(t, tm, "the context carries the term")
			assert.Equal(t, k, tm.Key())
			assert.Equal(t, g.Token(k), tm.Token())
			assert.True(t, tm.IsLeader())
		}
		ok, err := st.RequestStepDown(t.Context(), ks[0], row(t, st, ks[0]).Version, "")
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(heartbeat + time.Millisecond)
		assert.True(t, done(w.last(ks[0])), "the released key's context ends")
		assert.False(t, term.From(w.last(ks[0])).IsLeader())
		for _, k := range ks[1:] {
			assert.False(t, done(w.last(k)), "another key's context ended with it")
			assert.True(t, term.From(w.last(k)).IsLeader())
		}
		stop()
		for _, k := range ks {
			assert.True(t, done(w.last(k)), "Run's end ends every term")
		}
	})
}

// A key's leadership context ends at its trust deadline even while Run's goroutine
// is held up in a renewal that hangs.
func TestKeysContextEndsAtTheTrustDeadlineWhileRenewalsHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		w := newWorks()
		ks := keys(3)
		g := newGroup(t, st, "a", ks, withWorks(w))
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		start := time.Now()
		st.SetDelay(memstore.OpRenewMany, time.Hour)
		ctx := w.last(ks[1])
		require.NotNil(t, ctx)
		<-ctx.Done()
		assert.LessOrEqual(t, time.Since(start), renewDL, "the context outlived the trust deadline")
		assert.False(t, g.IsLeader(ks[1]))
		st.SetDelay(memstore.OpRenewMany, 0)
		stop()
	})
}

// The term handle's Resign, called from the key's own callback, returns at once;
// the key is released once the callback has returned, and is not taken back
// during the cool-down, so that another candidate leads it.
func TestTermResignFromTheCallbackReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		w := newWorks()
		resigned := make(chan error, 1)
		w.behave = func(ctx context.Context, key string) {
			if key == "k" && len(resigned) == 0 && w.terms("k") == 1 {
				start := time.Now()
				resigned <- term.From(ctx).Resign()
				assert.Zero(t, time.Since(start), "Resign waited")
			}
			<-ctx.Done()
		}
		a := newGroup(t, st, "a", []string{"j", "k"}, withWorks(w))
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		require.NoError(t, <-resigned)
		first := term.From(w.last("k"))
		assert.True(t, done(w.last("k")))
		assert.True(t, row(t, st, "k").Released(), "released after the callback returned")
		assert.True(t, a.IsLeader("j"), "the other key is not affected")
		require.ErrorIs(t, first.Resign(), term.ErrNotLeader, "an ended term cannot resign")

		b := newGroup(t, st, "b", []string{"k"}, nil)
		stopB := running(t, b)
		time.Sleep(poll + time.Millisecond)
		assert.True(t, b.IsLeader("k"), "another candidate takes the resigned key")
		assert.Equal(t, 1, w.terms("k"), "the resigned key was taken back during its cool-down")
		stopB()
		stopA()
	})
}

// A key whose callback does not return within DrainTimeout after its term ended is
// not released: its lease expires by itself, and the key takes no new term while
// that callback runs.
func TestUndrainedWorkLeavesTheLeaseToExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		w := newWorks()
		release := make(chan struct{})
		w.behave = func(ctx context.Context, key string) {
			if key == "k" && w.terms("k") == 1 {
				<-release // ignores its context
				return
			}
			<-ctx.Done()
		}
		const drain = 50 * time.Millisecond
		a := newGroup(t, st, "a", []string{"j", "k"}, func(c *casleader.GroupConfig) {
			withWorks(w)(c)
			c.DrainTimeout = drain
		})
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		old := row(t, st, "k")
		require.Equal(t, "a", old.LeaderID)
		require.NoError(t, term.From(w.last("k")).Resign())
		time.Sleep(drain + time.Millisecond)
		assert.False(t, a.IsLeader("k"))
		after := row(t, st, "k")
		assert.Equal(t, "a", after.LeaderID, "released while the work may still act")
		assert.Equal(t, old.Term, after.Term)
		time.Sleep(2 * lease)
		assert.False(t, a.IsLeader("k"), "led again beside the work of the earlier term")
		assert.Equal(t, 1, w.terms("k"))
		assert.True(t, a.IsLeader("j"))

		close(release)
		time.Sleep(poll + time.Millisecond)
		assert.True(t, a.IsLeader("k"), "takes part again once the work returned")
		assert.Greater(t, a.Token("k"), old.Term)
		stopA()
	})
}

// Run's end cancels every key's context, waits for the callbacks, then releases.
func TestRunReleasesOnlyAfterTheWorkReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		w := newWorks()
		var releasedBefore []bool
		var mu sync.Mutex
		w.behave = func(ctx context.Context, key string) {
			<-ctx.Done()
			time.Sleep(20 * time.Millisecond) // cleaning up
			rec, _, err := st.Observe(context.Background(), key)
			mu.Lock()
			releasedBefore = append(releasedBefore, err != nil || rec.Released())
			mu.Unlock()
		}
		ks := keys(3)
		g := newGroup(t, st, "a", ks, withWorks(w))
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		stop()
		assert.Equal(t, []bool{false, false, false}, releasedBefore, "a key was released while its work ran")
		for _, k := range ks {
			assert.True(t, row(t, st, k).Released())
		}
	})
}

func TestNegativeDrainTimeoutIsRefused(t *testing.T) {
	_, err := casleader.NewGroup(memstore.New(), casleader.GroupConfig{ID: "a", DrainTimeout: -time.Second})
	require.ErrorIs(t, err, casleader.ErrInvalidConfig)
}
