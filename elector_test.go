package casleader_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/store"
)

var _ store.Driver = (*memstore.Store)(nil)

func cfg(id string) casleader.Config {
	return casleader.Config{
		Key: "k", ID: id,
		LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll,
	}
}

// running starts Run in the bubble and returns a stop function that ends it and
// returns Run's error.
func running(t *testing.T, el *casleader.Elector) (stop func() error) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

func newElector(t *testing.T, st store.Driver, c casleader.Config) *casleader.Elector {
	t.Helper()
	el, err := casleader.New(st, c)
	require.NoError(t, err)
	return el
}

func TestIsLeaderTurnsFalseAtTheDeadlineEvenIfNothingRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		frozen := make(chan struct{})
		// The elector's own goroutine blocks in its first renewal, whatever its
		// context says: no renewal returns, like a frozen process.
		st := &frozenStore{Store: memstore.New(), frozen: frozen}
		el := newElector(t, st, cfg("a"))
		stop := running(t, el)
		start := time.Now()
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		time.Sleep(renewDL - time.Since(start) - time.Nanosecond)
		assert.True(t, el.IsLeader(), "trusted until the deadline")
		time.Sleep(time.Nanosecond)
		assert.False(t, el.IsLeader(), "IsLeader must be false at the deadline with the elector frozen")
		assert.Zero(t, el.Token())
		close(frozen)
		require.NoError(t, stop())
	})
}

func TestLeaderContextIsCancelledAtTheDeadlineWhileARenewalHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		c := cfg("a")
		started := make(chan time.Time, 1)
		cancelled := make(chan time.Time, 1)
		c.OnStartedLeading = func(ctx context.Context, token int64) {
			started <- time.Now()
			<-ctx.Done()
			cancelled <- time.Now()
		}
		el := newElector(t, st, c)
		stop := running(t, el)
		t0 := <-started
		st.SetDelay(memstore.OpRenew, time.Hour) // every renewal hangs from now on
		t1 := <-cancelled
		assert.False(t, el.IsLeader())
		// The last successful write was the election at t0 (first renewal hangs).
		assert.LessOrEqual(t, t1.Sub(t0), renewDL, "leader context outlived the renew deadline")
		require.NoError(t, stop())
	})
}

func TestAmbiguousRenewalIsSettledByOneRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var stopped atomic.Int32
		c := cfg("a")
		c.Hooks = []casleader.Hooks{{Stopped: func(casleader.Event) { stopped.Add(1) }}}
		el := newElector(t, st, c)
		stop := running(t, el)
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		token := el.Token()
		reads := st.Calls(memstore.OpObserve)
		st.CommitThenFail(memstore.OpRenew, fmt.Errorf("%w: connection reset", store.ErrTransient))
		for range 10 {
			time.Sleep(heartbeat / 2)
			require.True(t, el.IsLeader(), "an ambiguous renewal must not end leadership")
		}
		assert.Equal(t, token, el.Token(), "the term is kept")
		assert.Equal(t, 1, st.Calls(memstore.OpObserve)-reads, "one read settles it")
		assert.Zero(t, stopped.Load(), "the term did not end")
		require.NoError(t, stop())
	})
}

func TestElectionWithLostReplyIsAdoptedByTheNextRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		st.CommitThenFail(memstore.OpInsert, fmt.Errorf("%w: i/o timeout", store.ErrTransient))
		el := newElector(t, st, cfg("a"))
		stop := running(t, el)
		time.Sleep(poll)
		assert.True(t, el.IsLeader())
		rec, found, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, rec.Term, el.Token(), "the committed insert's term is adopted")
		require.NoError(t, stop())
	})
}

func TestTakenOverRowStepsDownAndCampaignsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var events []string
		c := cfg("a")
		c.OnStartedLeading = func(ctx context.Context, token int64) {
			events = append(events, fmt.Sprint("start ", token))
			<-ctx.Done()
		}
		c.Hooks = []casleader.Hooks{{Stopped: func(casleader.Event) { events = append(events, "stop") }}}
		el := newElector(t, st, c)
		stop := running(t, el)
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		first := el.Token()
		// Another candidate's term, as after a takeover the leader missed.
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		st.Put(store.Record{Key: "k", Version: rec.Version + 5, LeaderID: "b", Term: rec.Version + 5})
		time.Sleep(heartbeat + time.Millisecond)
		assert.False(t, el.IsLeader())
		assert.Equal(t, "b", el.Leader())
		// b never renews: a takes over after the lease, with a larger token.
		time.Sleep(lease + poll)
		assert.True(t, el.IsLeader())
		second := el.Token()
		assert.Greater(t, second, rec.Version+5)
		require.NoError(t, stop())
		assert.Equal(t, []string{fmt.Sprint("start ", first), "stop", fmt.Sprint("start ", second), "stop"}, events)
	})
}

func TestResignDrainsThenReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &orderStore{Store: memstore.New()}
		c := cfg("a")
		c.OnStartedLeading = func(ctx context.Context, token int64) {
			<-ctx.Done()
			st.log("context cancelled")
			time.Sleep(10 * time.Millisecond) // the work takes a while to stop
			st.log("work returned")
		}
		el := newElector(t, st, c)
		stop := running(t, el)
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		require.NoError(t, el.Resign(t.Context()))
		assert.False(t, el.IsLeader())
		assert.Equal(t, []string{"context cancelled", "work returned", "release ok"}, st.events)
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		assert.True(t, rec.Released())
		// The cool-down keeps it out of the released election.
		time.Sleep(lease / 2)
		assert.False(t, el.IsLeader())
		require.NoError(t, stop())
	})
}

func TestRunReleasesOnExitUnlessKeepLeaseOnExit(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				c := cfg("a")
				c.KeepLeaseOnExit = keep
				el := newElector(t, st, c)
				stop := running(t, el)
				time.Sleep(time.Millisecond)
				require.True(t, el.IsLeader())
				require.NoError(t, stop())
				assert.False(t, el.IsLeader())
				rec, _, err := st.Observe(t.Context(), "k")
				require.NoError(t, err)
				assert.Equal(t, !keep, rec.Released())
			})
		})
	}
}

func TestStepDownRequestThroughTheRowHandsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newElector(t, st, cfg("a"))
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		require.True(t, a.IsLeader())
		b := newElector(t, st, cfg("b"))
		stopB := running(t, b)
		time.Sleep(time.Millisecond)
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		ok, err := st.RequestStepDown(t.Context(), "k", rec.Version, "b")
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(heartbeat + time.Millisecond)
		assert.False(t, a.IsLeader())
		time.Sleep(poll + poll/10) // the next read, jitter included
		assert.True(t, b.IsLeader(), "the named candidate takes the lease it was handed")
		assert.Greater(t, b.Token(), rec.Term)
		require.NoError(t, stopA())
		require.NoError(t, stopB())
	})
}

func TestHandoverToANamedCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newElector(t, st, cfg("a"))
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		b := newElector(t, st, cfg("b"))
		c := newElector(t, st, cfg("c"))
		stopB, stopC := running(t, b), running(t, c)
		synctest.Wait() // b and c follow a's lease
		require.NoError(t, a.HandoverTo(t.Context(), "c"))
		assert.False(t, a.IsLeader())
		time.Sleep(poll + poll/10) // the next read, jitter included
		assert.True(t, c.IsLeader())
		assert.False(t, b.IsLeader())
		assert.ErrorIs(t, b.HandoverTo(t.Context(), "a"), casleader.ErrNotLeader)
		for _, s := range []func() error{stopA, stopB, stopC} {
			require.NoError(t, s())
		}
	})
}

func TestDeploymentErrorWhileLeadingStepsDownAndStopsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		el := newElector(t, st, cfg("a"))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- el.Run(ctx) }()
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		denied := fmt.Errorf("%w: missing privilege on table", store.ErrDeployment)
		st.Fail(memstore.OpRenew, denied)
		err := <-done
		assert.ErrorIs(t, err, store.ErrDeployment)
		assert.False(t, el.IsLeader())
	})
}

func TestAlreadyRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		el := newElector(t, memstore.New(), cfg("a"))
		stop := running(t, el)
		time.Sleep(time.Millisecond)
		err := el.Run(t.Context())
		require.ErrorIs(t, err, casleader.ErrRunState)
		assert.Contains(t, err.Error(), "already running")
		require.NoError(t, stop())
	})
}

func TestConfigValidation(t *testing.T) {
	long := strings.Repeat("x", 256)
	tests := []struct {
		name  string
		mod   func(*casleader.Config)
		field string
	}{
		{"EmptyKey", func(c *casleader.Config) { c.Key = "" }, "Key"},
		{"LongKey", func(c *casleader.Config) { c.Key = long }, "Key"},
		{"InvalidUTF8Key", func(c *casleader.Config) { c.Key = "\xff" }, "Key"},
		{"LongID", func(c *casleader.Config) { c.ID = long }, "ID"},
		{"NegativeLease", func(c *casleader.Config) { c.LeaseDuration = -time.Second }, "LeaseDuration"},
		{"NegativePoll", func(c *casleader.Config) { c.PollInterval = -1 }, "PollInterval"},
		{"NegativeDrain", func(c *casleader.Config) { c.DrainTimeout = -1 }, "DrainTimeout"},
		{"RenewDeadlineEqualsLease", func(c *casleader.Config) { c.RenewDeadline = c.LeaseDuration }, "RenewDeadline"},
		{"RenewDeadlineAboveLease", func(c *casleader.Config) { c.RenewDeadline = 2 * c.LeaseDuration }, "RenewDeadline"},
		{"HeartbeatEqualsRenewDeadline", func(c *casleader.Config) { c.HeartbeatInterval = c.RenewDeadline }, "HeartbeatInterval"},
		{"RenewDeadlineAboveDefaultLease", func(c *casleader.Config) { c.LeaseDuration = 0; c.RenewDeadline = time.Minute }, "RenewDeadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg("a")
			tt.mod(&c)
			_, err := casleader.New(memstore.New(), c)
			require.ErrorIs(t, err, casleader.ErrInvalidConfig)
			var ce *casleader.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.field, ce.Field)
			assert.NotEmpty(t, ce.Rule)
			assert.Equal(t, "casleader: invalid config: "+tt.field+" "+ce.Rule, err.Error())
		})
	}
	t.Run("NilStore", func(t *testing.T) {
		_, err := casleader.New(nil, cfg("a"))
		assert.ErrorIs(t, err, casleader.ErrInvalidConfig)
		var ce *casleader.ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "Store", ce.Field)
	})
	t.Run("DefaultsAreValid", func(t *testing.T) {
		el, err := casleader.New(memstore.New(), casleader.Config{Key: "k"})
		require.NoError(t, err)
		assert.NotEmpty(t, el.ID())
		other, err := casleader.New(memstore.New(), casleader.Config{Key: "k"})
		require.NoError(t, err)
		assert.NotEqual(t, el.ID(), other.ID(), "default IDs are unique")
	})
}

// orderStore records the release among the events a test logs.
type orderStore struct {
	*memstore.Store
	mu     sync.Mutex
	events []string
}

func (o *orderStore) log(s string) {
	o.mu.Lock()
	o.events = append(o.events, s)
	o.mu.Unlock()
}

func (o *orderStore) Release(ctx context.Context, key, id string, version int64) (bool, error) {
	ok, err := o.Store.Release(ctx, key, id, version)
	if ok && err == nil {
		o.log("release ok")
	} else {
		o.log(fmt.Sprint("release ", ok, " ", errors.Join(err)))
	}
	return ok, err
}

func TestResignDuringAnInFlightRenewalStillReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		el := newElector(t, st, cfg("a"))
		stop := running(t, el)
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		st.SetDelay(memstore.OpRenew, 30*time.Millisecond)
		time.Sleep(heartbeat + 10*time.Millisecond) // a renewal is in flight and will commit
		require.NoError(t, el.Resign(t.Context()))
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		assert.True(t, rec.Released(), "the lease must be released, not left to expire: %+v", rec)
		require.NoError(t, stop())
	})
}

func TestHandoverReachesACandidateInCoolDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newElector(t, st, cfg("a"))
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		b := newElector(t, st, cfg("b"))
		stopB := running(t, b)
		synctest.Wait()                                         // b runs: a Resign before Run is refused
		require.NoError(t, b.ResignFor(t.Context(), time.Hour)) // b cools down for an hour
		// b has read a's live lease: a term then handed to b cannot be an election
		// (a candidate adopts a term it did not win only when handed so).
		synctest.Wait()
		require.NoError(t, a.HandoverTo(t.Context(), "b"))
		time.Sleep(poll + poll/10)
		require.True(t, b.IsLeader(), "a lease handed by name is taken even while cooling down")
		time.Sleep(3 * lease)
		assert.True(t, b.IsLeader(), "b renews the lease it was handed")
		assert.False(t, a.IsLeader())
		require.NoError(t, stopA())
		require.NoError(t, stopB())
	})
}

func TestConfigRefusesKeysTheStoresRefuse(t *testing.T) {
	for _, key := range []string{"trailing ", "nul\x00byte"} {
		c := cfg("a")
		c.Key = key
		_, err := casleader.New(memstore.New(), c)
		require.ErrorIs(t, err, casleader.ErrInvalidConfig, "key %q", key)
		var ce *casleader.ConfigError
		require.ErrorAs(t, err, &ce, "key %q", key)
		assert.Equal(t, "Key", ce.Field, "key %q", key)
		assert.Equal(t, rules.NameRule(key), ce.Rule, "the rule is the one the stores apply")
	}
}

// frozenStore blocks every renewal until frozen is closed, ignoring its context.
type frozenStore struct {
	*memstore.Store
	frozen chan struct{}
}

func (f *frozenStore) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	<-f.frozen
	return f.Store.Renew(ctx, key, id, version)
}
