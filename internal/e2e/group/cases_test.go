package group_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
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

// changes records OnChange calls as "key leading token".
type changes struct {
	mu  sync.Mutex
	all []string
}

func (c *changes) record(key string, leading bool, token int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, fmt.Sprint(key, " ", leading, " ", token))
}

func (c *changes) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.all...)
}

// lateStore commits the next armed RenewMany at once and hands its reply back only
// delay later, whatever the context says: a reply held up in the network.
type lateStore struct {
	*memstore.Store
	delay atomic.Int64 // armed when positive
}

func (s *lateStore) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	d := time.Duration(s.delay.Swap(0))
	won, err := s.Store.RenewMany(context.WithoutCancel(ctx), id, held)
	time.Sleep(d)
	return won, err
}

// Renew is RenewMany for one key, as the group sends it for a batch of one.
func (s *lateStore) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	won, err := s.RenewMany(ctx, id, []store.KeyVersion{{Key: key, Version: version}})
	return len(won) == 1, err
}

// Case 1: a renewal that commits but whose reply arrives after the renew deadline
// must not revive the term: IsLeader turned false at the deadline and stays false
// for that term, and OnChange reports the end of the term.
func TestLateRenewalReplyNeverRevivesTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &lateStore{Store: memstore.New()}
		var ch changes
		g := newGroup(t, st, "a", []string{"k"}, func(c *casleader.GroupConfig) { c.OnChange = ch.record })
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		old := g.Token("k")
		require.Positive(t, old)

		// Renewals are sent every heartbeat, each trusted until its send time plus
		// the renew deadline. The next one commits at once, but its reply comes 10 ms
		// after the deadline that the previous renewal set.
		st.delay.Store(int64(renewDL - heartbeat + 10*time.Millisecond))
		ended := fmt.Sprint("k false ", old)
		wasFalse, revived := false, false
		for range lease / time.Millisecond {
			switch {
			case !g.IsLeader("k"):
				wasFalse = true
			case wasFalse && g.Token("k") == old && !slices.Contains(ch.list(), ended):
				revived = true
			}
			time.Sleep(time.Millisecond)
		}
		require.True(t, wasFalse, "the test did not make the reply late")
		assert.False(t, revived, "term %d trusted again after its deadline without its end reported", old)
		assert.Contains(t, ch.list(), ended, "the end of the term was not reported")
		assert.Equal(t, int64(1), g.Stats().LostLeases)
		stop()
	})
}

// Case 2: a step-down request naming a target (casleader handover --to b) hands the
// key over to the target, it does not release it.
func TestStepDownRequestNamingATargetHandsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var ch changes
		g := newGroup(t, st, "a", []string{"k", "other"}, func(c *casleader.GroupConfig) { c.OnChange = ch.record })
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		old := g.Token("k")
		require.Positive(t, old)
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		ok, err := st.RequestStepDown(t.Context(), "k", rec.Version, "b")
		require.NoError(t, err)
		require.True(t, ok)

		time.Sleep(heartbeat + time.Millisecond)
		rec, _, err = st.Observe(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, "b", rec.LeaderID, "the key was not handed to the named target")
		assert.Greater(t, rec.Term, old, "the handover starts a new term")
		assert.False(t, rec.Expired(lease))
		assert.False(t, g.IsLeader("k"))
		assert.Equal(t, "b", g.Leader("k"))
		assert.Contains(t, ch.list(), fmt.Sprint("k false ", old))
		assert.True(t, g.IsLeader("other"), "the other key is untouched")
		assert.Zero(t, g.Stats().LostLeases, "a handover is not a lost lease")

		// The group cools down: it does not take the key back while b's lease lives,
		// nor right after it lapses, which leaves b (or anybody) time to take it.
		time.Sleep(lease - 10*time.Millisecond)
		assert.False(t, g.IsLeader("k"))
		stop()
	})
}

// commitThenWait commits the next armed RenewMany, says so on committed, and then
// waits for the context to end before it reports an error: the reply is lost.
type commitThenWait struct {
	*memstore.Store
	armed     atomic.Bool
	committed chan struct{}
}

func (s *commitThenWait) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	if !s.armed.Swap(false) {
		return s.Store.RenewMany(ctx, id, held)
	}
	if _, err := s.Store.RenewMany(context.WithoutCancel(ctx), id, held); err != nil {
		return nil, err
	}
	close(s.committed)
	<-ctx.Done()
	return nil, fmt.Errorf("%w: renew many: %w", store.ErrTransient, ctx.Err())
}

// Case 3: Run's context ends while a committed RenewMany waits for its reply. The
// release from the version the group knew loses its compare-and-set; it is settled
// by reading the row and sent again from the version read, so the rows no longer
// name the group when Run returns.
func TestReleaseOnExitRetriesFromTheObservedVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &commitThenWait{Store: memstore.New(), committed: make(chan struct{})}
		ks := keys(10)
		g := newGroup(t, st, "a", ks, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		time.Sleep(time.Millisecond)
		require.Equal(t, 10, count(g, ks))
		st.armed.Store(true)
		<-st.committed
		cancel()
		require.NoError(t, <-done)
		recs, err := st.ObserveMany(t.Context(), ks)
		require.NoError(t, err)
		for _, k := range ks {
			assert.Empty(t, recs[k].LeaderID, "key %q: the row still names the group after Run returned", k)
		}
		assert.Zero(t, count(g, ks))
	})
}

// Case 4: an invalid key is refused by Add with an error that names it, and never
// holds up the valid keys added with it.
func TestInvalidKeyIsRefusedAndDoesNotBlockItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		g := newGroup(t, st, "a", nil, nil)
		stop := running(t, g)
		ks := keys(5)
		err := g.Add(append([]string{"bad "}, ks...)...)
		require.ErrorIs(t, err, casleader.ErrInvalidKey)
		require.ErrorIs(t, err, store.ErrInvalidArgument)
		assert.Contains(t, err.Error(), `"bad "`)
		time.Sleep(10 * time.Millisecond)
		assert.Equal(t, 5, count(g, ks), "the valid keys of the batch lead")
		assert.False(t, g.IsLeader("bad "))
		assert.Nil(t, g.Lease("bad "))
		stop()
	})
	_, err := casleader.NewGroup(memstore.New(), casleader.GroupConfig{ID: "a", Keys: []string{"ok", "bad\x00"}})
	assert.ErrorIs(t, err, casleader.ErrInvalidConfig)
	assert.ErrorIs(t, err, casleader.ErrInvalidKey)
	_, err = casleader.NewGroup(memstore.New(), casleader.GroupConfig{ID: "a "})
	assert.ErrorIs(t, err, casleader.ErrInvalidConfig, "an ID with a trailing space")
}

func goroutineID() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	f := bytes.Fields(b)
	return string(f[1]) // "goroutine N [running]:"
}

// Case 5: OnChange is called from Run's goroutine, never from the helpers that send
// the batched statements.
func TestOnChangeIsCalledFromRunsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(50)
		var mu sync.Mutex
		callers := map[string]int{}
		g := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) {
			c.Parallel = 4
			c.OnChange = func(string, bool, int64) {
				mu.Lock()
				callers[goroutineID()]++
				mu.Unlock()
			}
		})
		ctx, cancel := context.WithCancel(t.Context())
		runner := make(chan string, 1)
		done := make(chan error, 1)
		go func() {
			runner <- goroutineID()
			done <- g.Run(ctx)
		}()
		time.Sleep(time.Millisecond)
		require.Equal(t, 50, count(g, ks))
		require.NoError(t, st.Corrupt(ks[3], "rolled_back"))
		time.Sleep(2 * heartbeat)
		cancel()
		require.NoError(t, <-done)
		mu.Lock()
		defer mu.Unlock()
		id := <-runner
		assert.Equal(t, map[string]int{id: 50 + 50 + 2}, callers, "OnChange called from other goroutines than Run's (%s)", id)
	})
}
