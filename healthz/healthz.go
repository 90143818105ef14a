// Package healthz is a health check for processes that lead casleader elections,
// in the spirit of client-go's leaderelection.HealthzAdaptor: a process that
// believes it leads but has not renewed its lease for longer than it may is
// unhealthy, so that a supervisor (a Kubernetes liveness probe, a Docker
// healthcheck) restarts it. Followers are healthy.
//
// "Believes it leads" is the lead phase: from the start of a term until its end
// is complete ([casleader.Hooks] Started to Stopped, just before OnStoppedLeading).
// An elector that works stops trusting its leadership at the renew deadline and
// ends the lead phase at most DrainTimeout later (plus the release write, after a
// resign). A lead phase that outlives the renew deadline by more than the
// tolerance means that the elector's goroutine is stuck, or that OnStartedLeading
// ignores its context: work may still be running as leader after another
// candidate took over. The time of the last renewal is the elector's own: the
// Renewed hook reports every extension of its trust.
//
//	hc := healthz.New(0)
//	cfg.Hooks = append(cfg.Hooks, hc.Hooks())
//	el, err := casleader.New(sqlStore, cfg)
//	...
//	http.Handle("/healthz", hc)
//
// The package does not depend on Prometheus; its hooks compose with those of
// package metrics and the user's own, in any order, and the elector's store is not
// wrapped, so its guards work as without the check.
package healthz

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/casleader/casleader"
)

// ErrUnhealthy is returned by [Checker.Check] when an elector's lead phase has
// outlived its renew deadline by more than the tolerance.
var ErrUnhealthy = errors.New("healthz: leading without a renewal")

// Checker checks the electors that its hooks are attached to. It is an
// [http.Handler]: 200 "ok" when every elector is healthy, 500 with the reasons
// otherwise. Its methods are safe for concurrent use.
type Checker struct {
	tolerance time.Duration

	mu       sync.Mutex
	electors map[*casleader.Elector]*elector
	order    []*casleader.Elector // in the order they were attached
}

// elector is what the Checker knows of one elector, guarded by Checker.mu.
type elector struct {
	key, id       string
	renewDeadline time.Duration
	tolerance     time.Duration

	leading bool      // in the lead phase: Started seen, Stopped not yet
	token   int64     // the term of the lead phase
	since   time.Time // when the lead phase started
	until   time.Time // the last trust deadline reported by Renewed
	leader  string    // the leader as last observed
}

// New returns a Checker that reports an elector unhealthy when it is in its lead
// phase and its last successful renewal was sent more than RenewDeadline +
// tolerance ago. tolerance <= 0 means each elector's LeaseDuration - RenewDeadline:
// unhealthy once the lead phase outlives the lease, when another candidate may
// already lead. A tolerance shorter than the elector's DrainTimeout also reports
// OnStartedLeading functions that are slow to return once their context is
// cancelled.
func New(tolerance time.Duration) *Checker {
	return &Checker{tolerance: max(tolerance, 0), electors: map[*casleader.Elector]*elector{}}
}

// Hooks returns the hooks that let the Checker follow an elector: put them in
// [casleader.Config.Hooks], beside any others (metrics', your own), in any order.
// The Checker covers every elector created with them, from [casleader.New] on.
func (c *Checker) Hooks() casleader.Hooks {
	return casleader.Hooks{
		Attach: c.attach,
		Started: func(e *casleader.Elector, token int64) {
			c.update(e, func(s *elector) {
				s.leading, s.token, s.since = true, token, time.Now()
			})
		},
		Renewed: func(e *casleader.Elector, _ int64, until time.Time) {
			c.update(e, func(s *elector) { s.until = until })
		},
		Stopped: func(e *casleader.Elector, _ int64) {
			c.update(e, func(s *elector) {
				s.leading, s.token, s.since = false, 0, time.Time{}
			})
		},
		Leader: func(e *casleader.Elector, id string) {
			c.update(e, func(s *elector) { s.leader = id })
		},
	}
}

func (c *Checker) attach(e *casleader.Elector) {
	cfg := e.Config()
	tol := c.tolerance
	if tol == 0 {
		tol = max(cfg.LeaseDuration-cfg.RenewDeadline, 0)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.electors[e] = &elector{key: cfg.Key, id: cfg.ID, renewDeadline: cfg.RenewDeadline, tolerance: tol}
	c.order = append(c.order, e)
}

func (c *Checker) update(e *casleader.Elector, change func(*elector)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.electors[e]; s != nil {
		change(s)
	}
}

// Check returns nil when every attached elector is healthy, else an error
// that wraps [ErrUnhealthy] and says, for each unhealthy elector, how long ago it
// last renewed.
func (c *Checker) Check() error {
	var errs []error
	for _, s := range c.snapshots() {
		if err := check(s, time.Now()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Checker) snapshots() []elector {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]elector, len(c.order))
	for i, e := range c.order {
		out[i] = *c.electors[e]
	}
	return out
}

func check(s elector, now time.Time) error {
	if !s.leading {
		return nil
	}
	last := s.until.Add(-s.renewDeadline) // the send time of the last renewal
	if s.until.IsZero() {
		last = s.since // no renewal seen: count from the start of the term
	}
	limit := s.renewDeadline + s.tolerance
	if age := now.Sub(last); age > limit {
		return fmt.Errorf("%w: election %q, candidate %q: leading (term %d) but the last renewal was sent %v ago, more than the renew deadline %v plus the tolerance %v",
			ErrUnhealthy, s.key, s.id, s.token, age.Round(time.Millisecond), s.renewDeadline, s.tolerance)
	}
	return nil
}

// ServeHTTP answers 200 "ok" when [Checker.Check] returns nil, else 500 with the
// reasons, one per line. With the query parameter "verbose" it lists every
// elector's state.
func (c *Checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	var b strings.Builder
	healthy := true
	_, verbose := r.URL.Query()["verbose"]
	for _, s := range c.snapshots() {
		err := check(s, now)
		switch {
		case err != nil:
			healthy = false
			fmt.Fprintf(&b, "[-] %v\n", err)
		case verbose:
			fmt.Fprintf(&b, "[+] %s\n", describe(s, now))
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if !healthy {
		w.WriteHeader(http.StatusInternalServerError)
		b.WriteString("unhealthy\n")
	} else {
		b.WriteString("ok\n")
	}
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(b.String()))
	}
}

// describe says what a healthy elector is doing.
func describe(s elector, now time.Time) string {
	who := fmt.Sprintf("election %q, candidate %q: ", s.key, s.id)
	if !s.leading {
		leader := "none known"
		if s.leader != "" {
			leader = fmt.Sprintf("%q", s.leader)
		}
		return who + "following, leader " + leader
	}
	return who + fmt.Sprintf("leading (term %d), last renewal sent %v ago", s.token, now.Sub(s.until.Add(-s.renewDeadline)).Round(time.Millisecond))
}
