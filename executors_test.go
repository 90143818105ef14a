package casleader_test

import (
	"context"
	"fmt"
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

// A key of a group can gate work like an Elector (contrib/gocron takes either).
// gated is what the executors' tests read of an elector or a group's Lease.
type gated interface {
	IsLeader() bool
	Token() int64
	Leader() string
}

var (
	_ gated = (*casleader.Elector)(nil)
	_ gated = (*casleader.Lease)(nil)
)

// faultStore is the in-memory store with faults that hit the single-key and the
// batched renewal alike, so that one scenario drives the Elector and a Group.
type faultStore struct {
	*memstore.Store
	lateBy    atomic.Int64 // the next renewal commits and answers this late (when > 0)
	hang      atomic.Bool  // the next renewal commits, then waits for its context
	committed chan struct{}
}

func (s *faultStore) renewal(ctx context.Context, renew func(context.Context) error) error {
	if d := time.Duration(s.lateBy.Swap(0)); d > 0 {
		err := renew(context.WithoutCancel(ctx))
		time.Sleep(d)
		return err
	}
	if s.hang.Swap(false) {
		if err := renew(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		close(s.committed)
		<-ctx.Done()
		return fmt.Errorf("%w: renewal: %w", store.ErrTransient, ctx.Err())
	}
	return renew(ctx)
}

func (s *faultStore) Renew(ctx context.Context, key, id string, version int64) (ok bool, err error) {
	err = s.renewal(ctx, func(ctx context.Context) (err error) {
		ok, err = s.Store.Renew(ctx, key, id, version)
		return err
	})
	return ok, err
}

func (s *faultStore) RenewMany(ctx context.Context, id string, held []store.KeyVersion) (won []store.Won, err error) {
	err = s.renewal(ctx, func(ctx context.Context) (err error) {
		won, err = s.Store.RenewMany(ctx, id, held)
		return err
	})
	return won, err
}

// executor is candidate "a" on key "k", as run by one executor of the per-key rules.
type executor struct {
	gated
	pause func()
	stop  func() error // ends Run, returns its error
	done  <-chan error // Run's error, when Run ends by itself (then do not call stop)
	ends  func() int   // how many terms' ends were reported
	work  *termWork    // the leader's work on "k", term by term
}

// termWork records the leadership contexts that the leader's callback for key "k"
// gets; the callback runs until its context ends.
type termWork struct {
	mu   sync.Mutex
	ctxs []context.Context
}

func (w *termWork) run(ctx context.Context) {
	w.mu.Lock()
	w.ctxs = append(w.ctxs, ctx)
	w.mu.Unlock()
	<-ctx.Done()
}

func (w *termWork) terms() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ctxs)
}

func (w *termWork) last() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ctxs[len(w.ctxs)-1]
}

// runUntil runs run until stop is called, and returns stop and Run's result.
func runUntil(t *testing.T, run func(context.Context) error) (stop func() error, done <-chan error) {
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan error, 1)
	go func() { ch <- run(ctx) }()
	return func() error { cancel(); return <-ch }, ch
}

// executors start candidate "a" on key "k": an Elector, and a Group that holds "k"
// among other keys. Both take the same timings.
var executors = []struct {
	name  string
	start func(t *testing.T, st *faultStore) executor
}{
	{"Elector", func(t *testing.T, st *faultStore) executor {
		var ends atomic.Int64
		w := &termWork{}
		c := cfg("a")
		c.Hooks = []casleader.Hooks{{Stopped: func(casleader.Event) { ends.Add(1) }}}
		c.OnStartedLeading = func(ctx context.Context, _ int64) { w.run(ctx) }
		el := newElector(t, st, c)
		stop, done := runUntil(t, el.Run)
		return executor{gated: el, pause: el.Pause, stop: stop, done: done, ends: func() int { return int(ends.Load()) }, work: w}
	}},
	{"Group", func(t *testing.T, st *faultStore) executor {
		var ends atomic.Int64
		w := &termWork{}
		g, err := casleader.NewGroup(st, casleader.GroupConfig{
			ID: "a", Keys: []string{"j", "k", "l"},
			LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll,
			OnChange: func(key string, leading bool, _ int64) {
				if key == "k" && !leading {
					ends.Add(1)
				}
			},
			OnStartedLeading: func(ctx context.Context, key string, _ int64) {
				if key == "k" {
					w.run(ctx)
					return
				}
				<-ctx.Done()
			},
		})
		require.NoError(t, err)
		stop, done := runUntil(t, g.Run)
		return executor{gated: g.Lease("k"), pause: g.Pause, stop: stop, done: done, ends: func() int { return int(ends.Load()) }, work: w}
	}},
}

// runEnds waits at most within for Run to end by itself, and returns its error.
func runEnds(t *testing.T, c executor, within time.Duration) error {
	t.Helper()
	select {
	case err := <-c.done:
		return err
	case <-time.After(within):
		t.Fatalf("Run went on for %v", within)
		return nil
	}
}

func observe(t *testing.T, st *faultStore) store.Record {
	t.Helper()
	rec, found, err := st.Observe(t.Context(), "k")
	require.NoError(t, err)
	require.True(t, found)
	return rec
}

// TestExecutorsFollowTheSameRules runs each scenario of the per-key rules (specified
// by the tables of package cas) through a single-key Elector and through a Group,
// on the same in-memory store, and expects the same outcome.
func TestExecutorsFollowTheSameRules(t *testing.T) {
	scenarios := []struct {
		name  string
		run   func(t *testing.T, st *faultStore, c executor)
		stops bool // the scenario ends Run itself
	}{
		{"LateRenewalReplyNeverRevivesTheTerm", func(t *testing.T, st *faultStore, c executor) {
			old := c.Token()
			// Renewals go out every heartbeat; the next one commits, and its reply
			// comes 10 ms after the deadline that the previous one set.
			st.lateBy.Store(int64(renewDL - heartbeat + 10*time.Millisecond))
			wasFalse, revived := false, false
			for range lease / time.Millisecond {
				switch {
				case !c.IsLeader():
					wasFalse = true
				case wasFalse && c.Token() == old && c.ends() == 0:
					revived = true
				}
				time.Sleep(time.Millisecond)
			}
			require.True(t, wasFalse, "the reply was not late")
			assert.False(t, revived, "trusted again in term %d with no end of the term reported", old)
			assert.Equal(t, 1, c.ends())
		}, false},
		{"StepDownRequestNamingATargetHandsOver", func(t *testing.T, st *faultStore, c executor) {
			old := observe(t, st)
			ok, err := st.RequestStepDown(t.Context(), "k", old.Version, "b")
			require.NoError(t, err)
			require.True(t, ok)
			time.Sleep(heartbeat + time.Millisecond)
			rec := observe(t, st)
			assert.Equal(t, "b", rec.LeaderID)
			assert.Greater(t, rec.Term, old.Term)
			assert.False(t, c.IsLeader())
			assert.Equal(t, "b", c.Leader())
		}, false},
		{"StepDownRequestReleasesAndCoolsDown", func(t *testing.T, st *faultStore, c executor) {
			old := observe(t, st)
			ok, err := st.RequestStepDown(t.Context(), "k", old.Version, "")
			require.NoError(t, err)
			require.True(t, ok)
			time.Sleep(heartbeat + time.Millisecond)
			assert.True(t, observe(t, st).Released())
			time.Sleep(lease - heartbeat - 10*time.Millisecond)
			assert.False(t, c.IsLeader(), "took the key back while cooling down")
			assert.True(t, observe(t, st).Released())
			time.Sleep(20*time.Millisecond + poll + poll/10)
			assert.True(t, c.IsLeader(), "campaigns again after the cool-down")
		}, false},
		{"TakenOverLeaseStepsDown", func(t *testing.T, st *faultStore, c executor) {
			old := observe(t, st)
			st.Put(store.Record{Key: "k", Version: old.Version + 5, LeaderID: "b", Term: old.Version + 5})
			time.Sleep(heartbeat + time.Millisecond)
			assert.False(t, c.IsLeader())
			assert.Equal(t, "b", c.Leader())
			assert.Equal(t, 1, c.ends())
		}, false},
		{"RevivedTermOfOursIsNotAdopted", func(t *testing.T, st *faultStore, c executor) {
			lost := c.Token()
			st.Put(store.Record{Key: "k", Version: lost - 10, LeaderID: "a", Term: lost - 10})
			for range (heartbeat + 2*poll) / time.Millisecond {
				assert.NotEqual(t, lost-10, c.Token(), "led in the revived term")
				time.Sleep(time.Millisecond)
			}
		}, false},
		{"PausedLeaderReleases", func(t *testing.T, st *faultStore, c executor) {
			c.pause()
			time.Sleep(time.Millisecond)
			assert.False(t, c.IsLeader())
			assert.True(t, observe(t, st).Released())
			time.Sleep(2 * lease)
			assert.False(t, c.IsLeader(), "a paused candidate takes no lease")
		}, false},
		{"OutsideWriteToTheLeadersTermStepsDownAndCampaignsAgain", func(t *testing.T, st *faultStore, c executor) {
			// A script bumps the version of the leader's term: the leader's next
			// renewal loses with no error of its own to explain it.
			old := c.Token()
			rec := observe(t, st)
			ok, err := st.Store.Renew(t.Context(), "k", "a", rec.Version)
			require.NoError(t, err)
			require.True(t, ok)
			time.Sleep(heartbeat + time.Millisecond)
			assert.False(t, c.IsLeader(), "stepped down")
			select {
			case err := <-c.done:
				t.Fatalf("Run ended on an outside write: %v", err)
			default:
			}
			time.Sleep(lease + 2*poll)
			assert.True(t, c.IsLeader(), "campaigns again")
			assert.Greater(t, c.Token(), old, "in a new term")
		}, false},
		{"LeaderThatSeesItsIDInATermItDidNotWinStops", func(t *testing.T, st *faultStore, c executor) {
			old := observe(t, st)
			// Another process with ID "a" (an incarnation of its own) won a term.
			st.Put(store.Record{Key: "k", Version: old.Version + 5, LeaderID: "a", Term: old.Version + 5, Incarnation: "another-process"})
			err := runEnds(t, c, 2*heartbeat)
			require.ErrorIs(t, err, casleader.ErrDuplicateID)
			assert.Contains(t, err.Error(), `ID "a"`)
			assert.False(t, c.IsLeader())
			assert.NotEqual(t, old.Version+5, c.Token(), "acted in a term it did not win")
			assert.Equal(t, old.Version+5, observe(t, st).Version, "nothing written over the other term")
		}, true},
		{"FollowerThatSeesItsIDRenewedInATermItDidNotWinStops", func(t *testing.T, st *faultStore, c executor) {
			c.pause()
			time.Sleep(time.Millisecond)
			require.True(t, observe(t, st).Released())
			// Another process with ID "a" wins the key and renews it.
			v := observe(t, st).Version + 1
			st.Put(store.Record{Key: "k", Version: v, LeaderID: "a", Term: v})
			var err error
			for start := time.Now(); err == nil; {
				select {
				case err = <-c.done:
				case <-time.After(heartbeat):
					assert.NotEqual(t, v, c.Token(), "acted in the other process's term")
					require.Less(t, time.Since(start), lease+2*poll, "the duplicate ID was not reported within about one lease")
					rec := observe(t, st)
					ok, rerr := st.Store.Renew(t.Context(), "k", "a", rec.Version)
					require.NoError(t, rerr)
					require.True(t, ok)
				}
			}
			require.ErrorIs(t, err, casleader.ErrDuplicateID)
			assert.Contains(t, err.Error(), `ID "a"`)
			assert.Equal(t, v, observe(t, st).Term, "the other process's term is untouched")
		}, true},
		{"LeadersContextCarriesTheTermAndEndsWithIt", func(t *testing.T, st *faultStore, c executor) {
			ctx := c.work.last()
			tm := casleader.TermFrom(ctx)
			require.NotNil(t, tm, "the leadership context carries the term")
			assert.Equal(t, c.Token(), tm.Token())
			assert.True(t, tm.IsLeader())
			old := observe(t, st)
			st.Put(store.Record{Key: "k", Version: old.Version + 5, LeaderID: "b", Term: old.Version + 5})
			time.Sleep(heartbeat + time.Millisecond)
			assert.Error(t, ctx.Err(), "the context outlived the term")
			assert.False(t, tm.IsLeader())
			require.ErrorIs(t, tm.Resign(), casleader.ErrNotLeader, "an ended term cannot resign")
		}, false},
		{"TermResignFromTheCallbackReturnsAtOnceAndReleases", func(t *testing.T, st *faultStore, c executor) {
			tm := casleader.TermFrom(c.work.last())
			start := time.Now()
			require.NoError(t, tm.Resign())
			assert.Zero(t, time.Since(start), "Resign waited")
			time.Sleep(time.Millisecond)
			assert.Error(t, c.work.last().Err())
			assert.False(t, c.IsLeader())
			assert.True(t, observe(t, st).Released())
			time.Sleep(lease - 10*time.Millisecond)
			assert.False(t, c.IsLeader(), "took the key back while cooling down")
			assert.Equal(t, 1, c.work.terms())
		}, false},
		{"ExitWhileACommittedRenewalWaitsStillReleases", func(t *testing.T, st *faultStore, c executor) {
			st.hang.Store(true)
			<-st.committed
			require.NoError(t, c.stop())
			assert.True(t, observe(t, st).Released(), "the row still names the candidate after Run returned")
		}, true},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, ex := range executors {
				t.Run(ex.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						st := &faultStore{Store: memstore.New(), committed: make(chan struct{})}
						c := ex.start(t, st)
						time.Sleep(time.Millisecond)
						require.True(t, c.IsLeader(), "leads the free key")
						sc.run(t, st, c)
						if !sc.stops {
							require.NoError(t, c.stop())
						}
					})
				})
			}
		})
	}
}

// TestGroupObserverReportsTheLeader: a group key reports its leader like an
// Elector, and an observer group never campaigns.
func TestGroupObserverReportsTheLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		el := newElector(t, st, cfg("b"))
		stopB := running(t, el)
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		g, err := casleader.NewGroup(st, casleader.GroupConfig{ID: "a", Keys: []string{"k"}, Observer: true,
			LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { _ = g.Run(ctx) })
		time.Sleep(time.Millisecond)
		var l gated = g.Lease("k")
		assert.Equal(t, "b", l.Leader())
		require.NoError(t, stopB())
		time.Sleep(2 * lease)
		assert.False(t, l.IsLeader(), "an observer never campaigns")
		assert.Empty(t, l.Leader(), "the release was observed")
		cancel()
		wg.Wait()
	})
}
