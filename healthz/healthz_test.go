package healthz_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/healthz"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ http.Handler = (*healthz.Checker)(nil)

const (
	lease     = 400 * time.Millisecond
	renewDL   = 250 * time.Millisecond
	heartbeat = 60 * time.Millisecond
	poll      = 100 * time.Millisecond
	tolerance = 50 * time.Millisecond // less than DrainTimeout (lease - renewDL)
)

func cfg(id string) casleader.Config {
	return casleader.Config{
		Key: "k", ID: id,
		LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll,
	}
}

// candidate is one process: an elector whose health hc checks.
type candidate struct {
	hc *healthz.Checker
	el *casleader.Elector
}

func newCandidate(t *testing.T, st store.Driver, c casleader.Config, tol time.Duration) *candidate {
	t.Helper()
	hc := healthz.New(tol)
	c.Hooks = append(c.Hooks, hc.Hooks())
	el, err := casleader.New(st, c)
	require.NoError(t, err)
	return &candidate{hc: hc, el: el}
}

func (c *candidate) run(t *testing.T) (stop func() error) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.el.Run(ctx) }()
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

// probe asks h over its ServeHTTP (inside a synctest bubble, where no real network
// may be used) and returns the status and body.
func probe(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec.Code, rec.Body.String()
}

func TestLeaderThatRenewsAndFollowerAreHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newCandidate(t, st, cfg("a"), tolerance)
		a.run(t)
		time.Sleep(time.Millisecond)
		require.True(t, a.el.IsLeader())
		token := a.el.Token()
		require.Positive(t, token)
		b := newCandidate(t, st, cfg("b"), tolerance)
		b.run(t)
		for range 20 {
			time.Sleep(heartbeat / 2)
			require.True(t, a.el.IsLeader())
			require.Equal(t, token, a.el.Token(), "one term all along")
			assert.NoError(t, a.hc.Check())
			assert.NoError(t, b.hc.Check())
			code, body := probe(t, a.hc, "/healthz")
			assert.Equal(t, http.StatusOK, code)
			assert.Equal(t, "ok\n", body)
		}
		_, body := probe(t, b.hc, "/healthz?verbose")
		assert.Contains(t, body, `[+] election "k", candidate "b": following, leader "a"`)
		_, body = probe(t, a.hc, "/healthz?verbose")
		assert.Contains(t, body, fmt.Sprintf(`[+] election "k", candidate "a": leading (term %d)`, token))
	})
}

func TestLeaderWithFailingRenewalsIsHealthyUntilItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newCandidate(t, st, cfg("a"), tolerance)
		stop := a.run(t)
		time.Sleep(time.Millisecond)
		require.True(t, a.el.IsLeader())
		st.Fail(memstore.AnyOp, context.DeadlineExceeded) // the database is unreachable
		// It steps down at its deadline and drains at once (no work): a follower,
		// healthy all along.
		for range 20 {
			time.Sleep(heartbeat / 2)
			assert.NoError(t, a.hc.Check())
		}
		assert.False(t, a.el.IsLeader())
		require.NoError(t, stop())
	})
}

// A renewal that never returns, even after its context ends (a driver that ignores
// the context): the elector stops trusting its lease at the deadline, but its
// goroutine is stuck and never ends the lead phase. The work keeps running as
// leader while another candidate may take over: restart the process.
func TestLeaderStuckInARenewalIsUnhealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &stuckRenewals{Store: memstore.New(), release: make(chan struct{})}
		a := newCandidate(t, st, cfg("a"), tolerance)
		stop := a.run(t)
		start := time.Now()
		time.Sleep(time.Millisecond)
		require.True(t, a.el.IsLeader())
		token := a.el.Token()
		require.Positive(t, token)
		st.stick()

		time.Sleep(renewDL + tolerance - time.Since(start))
		assert.NoError(t, a.hc.Check(), "healthy up to the deadline plus the tolerance")
		assert.False(t, a.el.IsLeader())
		time.Sleep(time.Millisecond)
		err := a.hc.Check()
		require.ErrorIs(t, err, healthz.ErrUnhealthy)
		assert.Contains(t, err.Error(), fmt.Sprintf(`election "k", candidate "a": leading (term %d)`, token))
		code, body := probe(t, a.hc, "/healthz")
		assert.Equal(t, http.StatusInternalServerError, code)
		assert.Contains(t, body, "[-] healthz: leading without a renewal")
		assert.Contains(t, body, "unhealthy\n")

		close(st.release) // the driver returns at last
		require.NoError(t, stop())
		assert.NoError(t, a.hc.Check())
	})
}

// Work that ignores its cancelled context holds the lead phase until DrainTimeout.
// A tolerance shorter than that reports it; the default (lease - renew deadline)
// tolerates it, since the lead phase then ends before the lease does.
func TestWorkThatIgnoresItsContextIsReportedOnlyPastTheTolerance(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tolerance time.Duration
		unhealthy bool
	}{
		{"ShortTolerance", tolerance, true},
		{"DefaultTolerance", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				c := cfg("a")
				work := make(chan struct{})
				c.OnStartedLeading = func(context.Context, int64) { <-work }
				a := newCandidate(t, st, c, tc.tolerance)
				stop := a.run(t)
				start := time.Now()
				time.Sleep(time.Millisecond)
				require.True(t, a.el.IsLeader())
				st.SetDelay(memstore.OpRenew, time.Hour) // renewals time out at the deadline

				var sawUnhealthy bool
				for time.Since(start) < lease-time.Millisecond {
					time.Sleep(10 * time.Millisecond)
					err := a.hc.Check()
					if err != nil {
						require.ErrorIs(t, err, healthz.ErrUnhealthy)
						assert.Greater(t, time.Since(start), renewDL+tc.tolerance, "unhealthy too early")
						sawUnhealthy = true
					}
				}
				assert.Equal(t, tc.unhealthy, sawUnhealthy)
				close(work)
				require.NoError(t, stop())
				assert.NoError(t, a.hc.Check(), "healthy again once the lead phase ended")
			})
		})
	}
}

func TestCheckerCoversEveryElectorItIsAttachedTo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hc := healthz.New(tolerance)
		healthy := memstore.New()
		stuck := &stuckRenewals{Store: memstore.New(), release: make(chan struct{})}
		for _, st := range []store.Driver{healthy, stuck} {
			c := cfg("a")
			if st == stuck {
				c.Key = "stuck"
			}
			c.Hooks = []casleader.Hooks{hc.Hooks()}
			el, err := casleader.New(st, c)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- el.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
		}
		time.Sleep(time.Millisecond)
		stuck.stick()
		time.Sleep(renewDL + tolerance + time.Millisecond)
		code, body := probe(t, hc, "/healthz?verbose")
		assert.Equal(t, http.StatusInternalServerError, code)
		assert.Contains(t, body, `[+] election "k", candidate "a": leading`)
		assert.Contains(t, body, `[-] healthz: leading without a renewal: election "stuck"`)
		close(stuck.release)
	})
}

// The endpoint as a probe sees it: real HTTP, real time, short timings.
func TestHealthzOverHTTP(t *testing.T) {
	st := &stuckRenewals{Store: memstore.New(), release: make(chan struct{})}
	c := casleader.Config{Key: "http", ID: "a", LeaseDuration: 400 * time.Millisecond, RenewDeadline: 200 * time.Millisecond,
		HeartbeatInterval: 20 * time.Millisecond, PollInterval: 50 * time.Millisecond}
	a := newCandidate(t, st, c, 50*time.Millisecond)
	srv := httptest.NewServer(a.hc)
	defer srv.Close()
	get := func(method string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/healthz", nil)
		require.NoError(t, err)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
		return resp.StatusCode, string(b)
	}
	code, body := get(http.MethodGet)
	assert.Equal(t, http.StatusOK, code, "an elector that has not started is healthy")
	assert.Equal(t, "ok\n", body)

	stop := a.run(t)
	require.Eventually(t, a.el.IsLeader, 10*time.Second, 5*time.Millisecond)
	st.stick()
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, body = get(http.MethodGet)
		if code != http.StatusOK {
			break
		}
		require.True(t, time.Now().Before(deadline), "still healthy 10s after renewals got stuck")
		time.Sleep(10 * time.Millisecond)
	}
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body, `election "http", candidate "a"`)
	code, body = get(http.MethodHead)
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Empty(t, body)

	close(st.release)
	require.NoError(t, stop())
	code, _ = get(http.MethodGet)
	assert.Equal(t, http.StatusOK, code)
}

func TestHooksKeepTheUsersOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		c := cfg("a")
		started := make(chan int64, 1)
		stopped := make(chan struct{}, 1)
		leaders := make(chan string, 8)
		c.OnStartedLeading = func(_ context.Context, token int64) { started <- token }
		c.Hooks = []casleader.Hooks{{
			Stopped: func(casleader.Event) { stopped <- struct{}{} },
			Leader:  func(ev casleader.Event) { leaders <- ev.Leader },
		}}
		a := newCandidate(t, st, c, 0)
		stop := a.run(t)
		token := <-started
		rec, found, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		require.True(t, found)
		assert.Positive(t, token)
		assert.Equal(t, rec.Term, token, "the user's callback gets the row's term")
		assert.Equal(t, "a", <-leaders)
		require.NoError(t, stop())
		<-stopped
		assert.Equal(t, "", <-leaders, "the release is observed")
	})
}

// stuckRenewals is a store whose renewals, once stuck, block until release is
// closed, whatever their context says: a driver that ignores cancellation.
type stuckRenewals struct {
	*memstore.Store
	release chan struct{}
	mu      sync.Mutex
	stuck   bool
}

func (s *stuckRenewals) stick() {
	s.mu.Lock()
	s.stuck = true
	s.mu.Unlock()
}

func (s *stuckRenewals) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	s.mu.Lock()
	stuck := s.stuck
	s.mu.Unlock()
	if stuck {
		<-s.release
		return false, context.DeadlineExceeded
	}
	return s.Store.Renew(ctx, key, id, version)
}
