package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/metrics"
	"github.com/casleader/casleader/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ prometheus.Collector = (*metrics.Metrics)(nil)

const (
	lease     = 400 * time.Millisecond
	renewDL   = 250 * time.Millisecond
	heartbeat = 60 * time.Millisecond
	poll      = 100 * time.Millisecond
)

func cfg(id string) casleader.Config {
	return casleader.Config{
		Key: "k", ID: id,
		LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll,
	}
}

// observed is one process: an elector on st with its own registry.
type observed struct {
	reg *prometheus.Registry
	m   *metrics.Metrics
	el  *casleader.Elector
}

func newObserved(t *testing.T, st store.Driver, c casleader.Config) *observed {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	c.Hooks = append(c.Hooks, m.Hooks())
	el, err := casleader.New(st, c)
	require.NoError(t, err)
	return &observed{reg: reg, m: m, el: el}
}

// run starts Run and returns a function that ends it and returns its error.
func (p *observed) run(t *testing.T) (stop func() error) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.el.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// find returns the series name{labels} gathered from g, or nil.
func find(t *testing.T, g prometheus.Gatherer, name string, labels ...string) *dto.Metric {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return s
		}
	}
	return nil
}

// value returns the value of a gauge or counter series; a missing series fails t.
func value(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	s := find(t, g, name, labels...)
	require.NotNil(t, s, "no series %s%v", name, labels)
	switch {
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Counter != nil:
		return s.Counter.GetValue()
	}
	t.Fatalf("%s%v is neither a gauge nor a counter", name, labels)
	return 0
}

func renewals(t *testing.T, g prometheus.Gatherer) uint64 {
	t.Helper()
	s := find(t, g, "casleader_renewal_duration_seconds")
	if s == nil {
		return 0
	}
	return s.GetHistogram().GetSampleCount()
}

func failures(t *testing.T, g prometheus.Gatherer, kind string) float64 {
	t.Helper()
	return value(t, g, "casleader_renewal_failures_total", "key", "k", "kind", kind)
}

func totalFailures(t *testing.T, g prometheus.Gatherer) float64 {
	t.Helper()
	sum := 0.0
	for _, k := range []string{metrics.KindLost, metrics.KindTransient, metrics.KindNotWritable,
		metrics.KindDeployment, metrics.KindInvalidRow, metrics.KindInvalidArgument, metrics.KindOther} {
		sum += failures(t, g, k)
	}
	return sum
}

func TestLeadershipIsCountedAndGaugedFromElectionToResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		c := cfg("a")
		var userStarted, userStopped atomic.Int64
		c.OnStartedLeading = func(ctx context.Context, token int64) { userStarted.Store(token) }
		c.Hooks = []casleader.Hooks{{Stopped: func(casleader.Event) { userStopped.Add(1) }}}
		p := newObserved(t, st, c)

		assert.Nil(t, find(t, p.reg, "casleader_is_leader", "key", "k"), "no series before the key's first event")

		stop := p.run(t)
		time.Sleep(time.Millisecond)
		require.True(t, p.el.IsLeader())
		synctest.Wait()
		assert.Zero(t, value(t, p.reg, "casleader_renewal_failures_total", "key", "k", "kind", metrics.KindLost), "the counters start at zero")
		assert.Equal(t, 1.0, value(t, p.reg, "casleader_is_leader", "key", "k"))
		assert.Equal(t, float64(p.el.Token()), value(t, p.reg, "casleader_token", "key", "k"))
		assert.Equal(t, 1.0, value(t, p.reg, "casleader_leadership_transitions_total", "key", "k", "transition", "started"))
		assert.Equal(t, p.el.Token(), userStarted.Load(), "the user's OnStartedLeading is still called")

		time.Sleep(5 * heartbeat)
		assert.GreaterOrEqual(t, renewals(t, p.reg), uint64(4), "every renewal is timed")
		assert.Zero(t, totalFailures(t, p.reg))

		require.NoError(t, stop())
		assert.Zero(t, value(t, p.reg, "casleader_is_leader", "key", "k"))
		assert.Zero(t, value(t, p.reg, "casleader_token", "key", "k"))
		assert.Equal(t, 1.0, value(t, p.reg, "casleader_leadership_transitions_total", "key", "k", "transition", "stopped"))
		assert.Equal(t, int64(1), userStopped.Load(), "the user's own Stopped hook is still called")
		assert.Zero(t, totalFailures(t, p.reg))
	})
}

func TestRenewalFailuresAreCountedByKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		p := newObserved(t, st, cfg("a"))
		stop := p.run(t)
		time.Sleep(time.Millisecond)
		require.True(t, p.el.IsLeader())
		token := p.el.Token()

		for _, tc := range []struct {
			kind string
			err  error
		}{
			{metrics.KindTransient, fmt.Errorf("%w: connection reset", store.ErrTransient)},
			{metrics.KindNotWritable, fmt.Errorf("%w: read-only", store.ErrNotWritable)},
			{metrics.KindOther, errors.New("something unclassified")},
		} {
			st.FailNext(memstore.OpRenew, tc.err)
			time.Sleep(heartbeat)
			synctest.Wait()
			assert.Equal(t, 1.0, failures(t, p.reg, tc.kind), tc.kind)
			assert.Equal(t, 1.0, value(t, p.reg, "casleader_store_errors_total", "key", "k", "op", "renew", "kind", tc.kind), tc.kind)
			require.True(t, p.el.IsLeader(), "one failed renewal does not end leadership")
		}

		// A renewal commits but its reply is lost (a transient failure): its retry
		// loses its compare-and-set, and one read shows the lease is still its own.
		// (A version bumped by a write the leader did not make, with its ID and term
		// kept, is another process with its ID: Run would stop.)
		synctest.Wait()
		st.CommitThenFail(memstore.OpRenew, fmt.Errorf("%w: connection reset", store.ErrTransient))
		time.Sleep(heartbeat)
		synctest.Wait()
		assert.Equal(t, 1.0, failures(t, p.reg, metrics.KindLost))
		assert.Equal(t, 2.0, failures(t, p.reg, metrics.KindTransient))
		require.True(t, p.el.IsLeader())
		assert.Equal(t, token, p.el.Token())

		st.FailNext(memstore.OpRenew, fmt.Errorf("%w: table is gone", store.ErrDeployment))
		time.Sleep(heartbeat)
		synctest.Wait()
		assert.Equal(t, 1.0, failures(t, p.reg, metrics.KindDeployment))
		assert.Equal(t, 1.0, value(t, p.reg, "casleader_store_errors_total", "key", "k", "op", "renew", "kind", metrics.KindDeployment))
		assert.Zero(t, value(t, p.reg, "casleader_is_leader", "key", "k"))
		require.ErrorIs(t, stop(), store.ErrDeployment)
		assert.Equal(t, 6.0, totalFailures(t, p.reg))
	})
}

func TestRenewalInFlightAtResignCompletesAndIsNotAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		p := newObserved(t, st, cfg("a"))
		stop := p.run(t)
		time.Sleep(time.Millisecond)
		require.True(t, p.el.IsLeader())
		st.SetDelay(memstore.OpRenew, 20*time.Millisecond)
		time.Sleep(heartbeat + time.Millisecond) // a renewal is in flight
		synctest.Wait()
		before := renewals(t, p.reg)
		// Resign does not interrupt the renewal (it may commit): it waits for it,
		// then releases from the version it wrote.
		require.NoError(t, p.el.Resign(t.Context()))
		assert.False(t, p.el.IsLeader())
		synctest.Wait()
		assert.Zero(t, totalFailures(t, p.reg))
		assert.Nil(t, find(t, p.reg, "casleader_store_errors_total"), "no store error at all")
		assert.Equal(t, before+1, renewals(t, p.reg), "the renewal in flight completed and was timed")
		require.NoError(t, stop())
	})
}

func TestIsLeaderGaugeTurnsZeroAtTheDeadlineWithoutAnyEvent(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stall makes leadership end at the renew deadline with no event before
		// the check; release undoes it.
		stall func(st *memstore.Store, c *casleader.Config) (d store.Driver, release func())
	}{
		{
			// The elector's goroutine blocks right after it became leader: no
			// renewal, no callback, like a frozen process. Only IsLeader knows.
			// (User callbacks never run on that goroutine; the notifier does.)
			name: "FrozenElector",
			stall: func(st *memstore.Store, c *casleader.Config) (store.Driver, func()) {
				frozen := make(chan struct{})
				return &freezingNotifier{Driver: st, frozen: frozen}, func() { close(frozen) }
			},
		},
		{
			// Renewals hang until the deadline, and the work ignores its context,
			// so the term's end is reported only after DrainTimeout.
			name: "HangingRenewals", stall: func(st *memstore.Store, c *casleader.Config) (store.Driver, func()) {
				return st, hangRenewals(st, c)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				c := cfg("a")
				d, release := tc.stall(st, &c)
				p := newObserved(t, d, c)
				stop := p.run(t)
				start := time.Now()
				time.Sleep(time.Millisecond)
				synctest.Wait()
				require.True(t, p.el.IsLeader())
				assert.Equal(t, 1.0, value(t, p.reg, "casleader_is_leader", "key", "k"))
				time.Sleep(renewDL - time.Since(start))
				synctest.Wait()
				require.False(t, p.el.IsLeader())
				assert.Zero(t, value(t, p.reg, "casleader_is_leader", "key", "k"), "the gauge must follow IsLeader")
				assert.Zero(t, value(t, p.reg, "casleader_token", "key", "k"))
				assert.Zero(t, value(t, p.reg, "casleader_leadership_transitions_total", "key", "k", "transition", "stopped"),
					"the term's end is not reported before its work returned")
				release()
				require.NoError(t, stop())
			})
		})
	}
}

// hangRenewals makes every renewal after the election hang and OnStartedLeading
// ignore its context until released.
func hangRenewals(st *memstore.Store, c *casleader.Config) func() {
	st.SetDelay(memstore.OpRenew, time.Hour)
	done := make(chan struct{})
	c.OnStartedLeading = func(context.Context, int64) { <-done }
	return func() { close(done) }
}

func TestObservedLeaderChangesAreCountedAndTheUsersHooksStillCalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var seenA, seenB atomic.Int64
		ca, cb := cfg("a"), cfg("b")
		ca.Hooks = []casleader.Hooks{{Leader: func(casleader.Event) { seenA.Add(1) }}}
		cb.Hooks = []casleader.Hooks{{Leader: func(casleader.Event) { seenB.Add(1) }}}
		a := newObserved(t, st, ca)
		stopA := a.run(t)
		time.Sleep(time.Millisecond)
		require.True(t, a.el.IsLeader())
		b := newObserved(t, st, cb)
		b.run(t)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.Equal(t, "a", b.el.Leader())
		assert.Equal(t, 1.0, value(t, b.reg, "casleader_leader_changes_total", "key", "k"))

		require.NoError(t, stopA()) // a resigns; b takes over
		for !b.el.IsLeader() {
			time.Sleep(poll)
		}
		synctest.Wait()
		assert.GreaterOrEqual(t, seenB.Load(), int64(2))
		assert.Equal(t, float64(seenB.Load()), value(t, b.reg, "casleader_leader_changes_total", "key", "k"),
			"every change the elector reported is counted")
		assert.Equal(t, float64(seenA.Load()), value(t, a.reg, "casleader_leader_changes_total", "key", "k"))
		assert.Equal(t, 1.0, value(t, b.reg, "casleader_is_leader", "key", "k"))
		assert.Zero(t, value(t, a.reg, "casleader_is_leader", "key", "k"))
	})
}

func TestElectorsWithOneKeyShareTheirSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg)
		require.NoError(t, err)
		var els []*casleader.Elector
		for _, id := range []string{"a", "b"} {
			c := cfg(id)
			c.Hooks = []casleader.Hooks{m.Hooks()}
			el, err := casleader.New(st, c)
			require.NoError(t, err)
			els = append(els, el)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- el.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		require.True(t, els[0].IsLeader())
		assert.Equal(t, 1.0, value(t, reg, "casleader_is_leader", "key", "k"), "one of them leads")
		assert.Equal(t, float64(els[0].Token()), value(t, reg, "casleader_token", "key", "k"))
		problems, err := testutil.GatherAndLint(reg)
		require.NoError(t, err)
		assert.Empty(t, problems)
	})
}

func TestNewReportsADuplicateRegistrationInsteadOfPanicking(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := metrics.New(reg)
	require.NoError(t, err)
	_, err = metrics.New(reg)
	var are prometheus.AlreadyRegisteredError
	assert.ErrorAs(t, err, &are)

	m, err := metrics.New(nil)
	require.NoError(t, err)
	require.NoError(t, prometheus.NewRegistry().Register(m), "a Metrics from New(nil) can be registered by the caller")
}

func TestMetricsPassTheLinter(t *testing.T) {
	m, err := metrics.New(nil)
	require.NoError(t, err)
	h := m.Hooks()
	ev := casleader.Event{Key: "k", ID: "a", Token: 7, Until: time.Now().Add(time.Minute)}
	h.Call(casleader.Call{Key: "k", ID: "a", Keys: 1, Op: "renew", Duration: time.Millisecond, Swapped: true})
	h.Call(casleader.Call{Key: "k", ID: "a", Keys: 1, Op: "observe", Err: store.ErrTransient})
	h.Started(ev)
	h.Renewed(ev)
	problems, err := testutil.CollectAndLint(m)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// The hooks go into the Config in any order, beside others: the elector's store
// is the one given to New, so its optional methods (the guard, the members view)
// are found as without metrics.
func TestHooksComposeInAnyOrderWithoutWrappingTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m, err := metrics.New(nil)
		require.NoError(t, err)
		var mine []string
		user := casleader.Hooks{
			Started: func(ev casleader.Event) { mine = append(mine, fmt.Sprint("started ", ev.Token)) },
			Stopped: func(ev casleader.Event) { mine = append(mine, fmt.Sprint("stopped ", ev.Token)) },
		}
		for i, hooks := range [][]casleader.Hooks{{m.Hooks(), user}, {user, m.Hooks()}} {
			c := cfg("a")
			c.Hooks = hooks
			el, err := casleader.New(st, c)
			require.NoError(t, err)
			p := &observed{m: m, el: el}
			stop := p.run(t)
			time.Sleep(time.Millisecond)
			require.True(t, el.IsLeader())
			token := el.Token()
			require.NoError(t, stop())
			reg := prometheus.NewPedanticRegistry()
			require.NoError(t, reg.Register(m))
			assert.Equal(t, float64(i+1), value(t, reg, "casleader_leadership_transitions_total", "key", "k", "transition", "stopped"), "order %d", i)
			assert.Equal(t, []string{fmt.Sprint("started ", token), fmt.Sprint("stopped ", token)}, mine[2*i:], "order %d", i)
		}
	})
}

func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("renew: %w", store.ErrTransient), metrics.KindTransient},
		{fmt.Errorf("renew: %w", context.DeadlineExceeded), metrics.KindTransient},
		{fmt.Errorf("renew: %w", store.ErrNotWritable), metrics.KindNotWritable},
		{fmt.Errorf("renew: %w", store.ErrDeployment), metrics.KindDeployment},
		{fmt.Errorf("observe: %w", store.ErrInvalidRow), metrics.KindInvalidRow},
		{fmt.Errorf("renew: %w", store.ErrInvalidArgument), metrics.KindInvalidArgument},
		{errors.New("driver: bad things"), metrics.KindOther},
		// A deployment error wins over the transient marker of its cause.
		{fmt.Errorf("%w: %w", store.ErrDeployment, store.ErrTransient), metrics.KindDeployment},
	} {
		assert.Equal(t, tc.want, metrics.ErrorKind(tc.err), "%v", tc.err)
	}
}

// scraped returns the value of the sample named series (name and labels) in the text
// exposition body, as an integer.
func scraped(t *testing.T, body, series string) int64 {
	t.Helper()
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, "sample %q", line)
			require.Equal(t, math.Trunc(f), f, "sample %q is not an integer", line)
			return int64(f)
		}
	}
	require.Failf(t, "sample missing", "no sample %s in:\n%s", series, body)
	return 0
}

// The endpoint a process serves: a real HTTP round trip through promhttp.
func TestMetricsAreServedOverHTTP(t *testing.T) {
	st := memstore.New()
	c := casleader.Config{Key: "served", ID: "a", LeaseDuration: 2 * time.Second, RenewDeadline: time.Second,
		HeartbeatInterval: 100 * time.Millisecond, PollInterval: 200 * time.Millisecond}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	c.Hooks = []casleader.Hooks{m.Hooks()}
	el, err := casleader.New(st, c)
	require.NoError(t, err)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	get := func() string {
		resp, err := srv.Client().Get(srv.URL)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	assert.NotContains(t, get(), `casleader_is_leader{key="served"}`, "no series before the key's first event")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	require.Eventually(t, el.IsLeader, 10*time.Second, 5*time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); renewals(t, reg) == 0; {
		require.True(t, time.Now().Before(deadline), "no renewal timed within 10s")
		time.Sleep(5 * time.Millisecond)
	}
	token := el.Token()
	body := get()
	if el.IsLeader() && el.Token() == token { // still the same term after the scrape
		assert.Contains(t, body, `casleader_is_leader{key="served"} 1`)
		assert.Equal(t, token, scraped(t, body, `casleader_token{key="served"}`), "the token gauge holds the term exactly")
		assert.Contains(t, body, `casleader_leadership_transitions_total{key="served",transition="started"} 1`)
	}
	cancel()
	require.NoError(t, <-done)
	body = get()
	assert.Contains(t, body, `casleader_is_leader{key="served"} 0`)
	assert.Contains(t, body, `casleader_leadership_transitions_total{key="served",transition="stopped"} 1`)
	assert.Contains(t, body, `# TYPE casleader_renewal_duration_seconds histogram`)
}

// freezingNotifier is a store decorator that blocks the elector's goroutine when
// it starts leading (its Leading wake-up event), until frozen is closed.
type freezingNotifier struct {
	store.Driver
	once   sync.Once
	frozen chan struct{}
}

func (f *freezingNotifier) Leading(_ string, _ int64, leading bool) {
	if leading {
		f.once.Do(func() { <-f.frozen })
	}
}

// TestClockSkewGaugeShowsTheSkewBetweenDatabaseServers: an elector reading
// from a server whose clock runs 2 s behind the leader's reports -2 s (within a
// heartbeat: the freshest tick it read); one on the leader's server reports 0.
func TestClockSkewGaugeShowsTheSkewBetweenDatabaseServers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		leader := newObserved(t, st, cfg("a"))
		leader.run(t)
		time.Sleep(time.Millisecond)
		require.True(t, leader.el.IsLeader())
		behind := newObserved(t, st.Node(-2*time.Second), cfg("b"))
		same := newObserved(t, st, cfg("c"))
		behind.run(t)
		same.run(t)
		time.Sleep(5 * poll)
		got := value(t, behind.reg, "casleader_clock_skew_seconds", "key", "k")
		assert.InDelta(t, -2.0, got, heartbeat.Seconds(), "gauge %v", got)
		assert.InDelta(t, behind.el.ClockSkew().Seconds(), got, 1e-9, "the gauge reads ClockSkew")
		assert.Zero(t, value(t, same.reg, "casleader_clock_skew_seconds", "key", "k"))
		problems, err := testutil.GatherAndLint(behind.reg)
		require.NoError(t, err)
		assert.Empty(t, problems)
	})
}
