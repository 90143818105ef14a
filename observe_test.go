package casleader_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/healthz"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/metrics"
)

// events records what hooks report, one line per event.
type events struct {
	mu    sync.Mutex
	lines []string
}

func (ev *events) add(format string, args ...any) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.lines = append(ev.lines, fmt.Sprintf(format, args...))
}

func (ev *events) all() []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]string(nil), ev.lines...)
}

// hooks records every event except renewals, which depend on timing.
func (ev *events) hooks(renewDeadline time.Duration) casleader.Hooks {
	var sent time.Time // of the last write that won, to check Renewed's deadline
	return casleader.Hooks{
		Attach: func(e *casleader.Elector) { ev.add("attach %s", e.ID()) },
		Call: func(e *casleader.Elector, c casleader.Call) {
			if c.Swapped {
				sent = c.Sent
			}
			if c.Op == casleader.OpRenew {
				return
			}
			ev.add("call %s found=%v swapped=%v term=%d err=%v", c.Op, c.Found, c.Swapped, c.Term, c.Err)
		},
		Started: func(e *casleader.Elector, token int64) {
			ev.add("started %d leader=%v", token, e.IsLeader())
		},
		Renewed: func(e *casleader.Elector, token int64, until time.Time) {
			if until.Sub(sent) != renewDeadline {
				ev.add("renewed %d until %v after the write, want %v", token, until.Sub(sent), renewDeadline)
			}
		},
		Stopped: func(e *casleader.Elector, token int64) {
			ev.add("stopped %d leader=%v", token, e.IsLeader())
		},
		Leader: func(e *casleader.Elector, id string) { ev.add("leader %q", id) },
	}
}

func TestHooksSeeEveryStoreCallAndTermInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var ev events
		var renewals, cancelled int
		c := cfg("a")
		c.Hooks = []casleader.Hooks{ev.hooks(renewDL), {
			Call: func(_ *casleader.Elector, c casleader.Call) {
				if c.Op == casleader.OpRenew && c.Swapped && c.Err == nil {
					renewals++
				}
				if c.Cancelled {
					cancelled++
				}
			},
		}}
		c.OnStoppedLeading = func() { ev.add("OnStoppedLeading") }
		el := newElector(t, st, c)
		assert.Equal(t, []string{"attach a"}, ev.all(), "New attaches the elector")
		stop := running(t, el)
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		token := el.Token()
		time.Sleep(5 * heartbeat)
		require.NoError(t, stop())
		assert.Equal(t, []string{
			"attach a",
			"call observe found=false swapped=false term=0 err=<nil>",
			fmt.Sprintf("call insert found=false swapped=true term=%d err=<nil>", token),
			fmt.Sprintf("started %d leader=true", token),
			`leader "a"`,
			"call release found=false swapped=true term=0 err=<nil>",
			`leader ""`,
			fmt.Sprintf("stopped %d leader=false", token),
			"OnStoppedLeading",
		}, ev.all())
		assert.Equal(t, 5, renewals, "one renewal per heartbeat")
		assert.Zero(t, cancelled, "no call was cancelled")
	})
}

// The regression of the issue: with metrics and healthz plugged in, the elector's
// store is still the dialect's, so the guard fences the leader's transaction; and
// both observers are fed.
func TestGuardWorksWithMetricsAndHealthzPluggedIn(t *testing.T) {
	for _, d := range guardDBs() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db, _, actions := openGuardDB(t, d.open)
			ctx := t.Context()
			reg := prometheus.NewPedanticRegistry()
			m, err := metrics.New(reg)
			require.NoError(t, err)
			hc := healthz.New(0)
			tokens := make(chan int64, 1)
			c := casleader.Config{
				Key: "k", ID: "a",
				LeaseDuration: gLease, RenewDeadline: gRenew, HeartbeatInterval: gBeat, PollInterval: gPoll,
				Hooks: []casleader.Hooks{m.Hooks(), hc.Hooks()},
				OnStartedLeading: func(ctx context.Context, token int64) {
					tokens <- token
					<-ctx.Done()
				},
			}
			el, err := casleader.New(db.st, c)
			require.NoError(t, err)
			rctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- el.Run(rctx) }()
			defer func() { cancel(); require.NoError(t, <-done) }()
			var token int64
			select {
			case token = <-tokens:
			case <-time.After(30 * time.Second):
				t.Fatal("a did not become leader within 30s")
			}

			require.NoError(t, guardedWrite(ctx, db, el, token, actions), "the guard passes for the leader")
			require.ErrorIs(t, guardedWrite(ctx, db, el, token-1, actions), casleader.ErrNotLeader, "a stale token is fenced")

			for deadline := time.Now().Add(30 * time.Second); sample(t, reg, "casleader_renewal_duration_seconds") == 0; {
				require.True(t, time.Now().Before(deadline), "no renewal timed within 30s")
				time.Sleep(gBeat)
			}
			assert.Equal(t, 1.0, sample(t, reg, "casleader_leadership_transitions_total", "transition", "started"))
			if el.IsLeader() && el.Token() == token {
				assert.Equal(t, 1.0, sample(t, reg, "casleader_is_leader"))
				assert.Equal(t, float64(token), sample(t, reg, "casleader_token"))
			}
			rec := httptest.NewRecorder()
			hc.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz?verbose", nil))
			assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			if el.IsLeader() && el.Token() == token { // still the same term after the probe
				assert.Contains(t, rec.Body.String(), fmt.Sprintf(`candidate "a": leading (term %d)`, token))
			}
		})
	}
}

// sample returns the value of the series name{key="k", labels...} gathered from g:
// a gauge's or counter's value, a histogram's sample count; 0 when absent.
func sample(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	want := map[string]string{"key": "k"}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}
