// Package healthz is a health check for processes that lead casleader elections,
// in the spirit of client-go's leaderelection.HealthzAdaptor: a process that
// believes it leads but has not renewed its lease for longer than it may is
// unhealthy, so that a supervisor (a Kubernetes liveness probe, a Docker
// healthcheck) restarts it. Followers are healthy.
//
// "Believes it leads" is the lead phase: from OnStartedLeading until
// OnStoppedLeading. An elector that works stops trusting its leadership at the
// renew deadline and ends the lead phase at most DrainTimeout later (plus the
// release write, after a resign). A lead phase that outlives the renew deadline by
// more than the tolerance means that the elector's goroutine is stuck, or that
// OnStartedLeading ignores its context: work may still be running as leader after
// another candidate took over. The time of the last renewal comes from a store
// decorator that sees every successful compare-and-set.
//
//	hc := healthz.New(0)
//	st := hc.Instrument(sqlStore, &cfg)
//	el, err := casleader.New(st, cfg)
//	...
//	http.Handle("/healthz", hc)
//
// The package does not depend on Prometheus; it composes with package metrics
// (instrument with both, in either order).
package healthz

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/tap"
)

// ErrUnhealthy is returned by [Checker.Check] when an elector's lead phase has
// outlived its renew deadline by more than the tolerance.
var ErrUnhealthy = errors.New("healthz: leading without a renewal")

// Checker checks the electors it instrumented. It is an [http.Handler]: 200 "ok"
// when every elector is healthy, 500 with the reasons otherwise. Its methods are
// safe for concurrent use.
type Checker struct {
	tolerance time.Duration

	mu       sync.Mutex
	electors []*elector
}

type elector struct {
	state     *tap.State
	tolerance time.Duration
}

// New returns a Checker that reports an elector unhealthy when it is in its lead
// phase and its last successful renewal was sent more than RenewDeadline +
// tolerance ago. tolerance <= 0 means each elector's LeaseDuration - RenewDeadline:
// unhealthy once the lead phase outlives the lease, when another candidate may
// already lead. A tolerance shorter than the elector's DrainTimeout also reports
// OnStartedLeading functions that are slow to return once their context is
// cancelled.
func New(tolerance time.Duration) *Checker {
	return &Checker{tolerance: max(tolerance, 0)}
}

// Instrument returns st wrapped so that the Checker sees every renewal, and chains
// cfg's callbacks so that it sees the lead phase; the callbacks cfg had are still
// called. Call it after setting cfg's callbacks: a callback set afterwards replaces
// the instrumentation. It gives cfg an ID (casleader.DefaultID) when it has none.
// Pass the returned store and cfg to casleader.New.
func (c *Checker) Instrument(st casleader.Store, cfg *casleader.Config) casleader.Store {
	wrapped, state := tap.Instrument(st, cfg, tap.Hooks{})
	tol := c.tolerance
	if tol == 0 {
		snap := state.Snapshot()
		tol = max(snap.LeaseDuration-snap.RenewDeadline, 0)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.electors = append(c.electors, &elector{state: state, tolerance: tol})
	return wrapped
}

// Check returns nil when every instrumented elector is healthy, else an error
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

type snapshot struct {
	tap.Snapshot
	tolerance time.Duration
}

func (c *Checker) snapshots() []snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]snapshot, len(c.electors))
	for i, e := range c.electors {
		out[i] = snapshot{Snapshot: e.state.Snapshot(), tolerance: e.tolerance}
	}
	return out
}

func check(s snapshot, now time.Time) error {
	if !s.Leading {
		return nil
	}
	last := s.LastRenewal
	if last.IsZero() {
		last = s.LeadingSince // no renewal seen: count from the start of the term
	}
	limit := s.RenewDeadline + s.tolerance
	if age := now.Sub(last); age > limit {
		return fmt.Errorf("%w: election %q, candidate %q: leading (term %d) but the last renewal was sent %v ago, more than the renew deadline %v plus the tolerance %v",
			ErrUnhealthy, s.Key, s.ID, s.Token, age.Round(time.Millisecond), s.RenewDeadline, s.tolerance)
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
func describe(s snapshot, now time.Time) string {
	who := fmt.Sprintf("election %q, candidate %q: ", s.Key, s.ID)
	if !s.Leading {
		leader := "none known"
		if s.Leader != "" {
			leader = fmt.Sprintf("%q", s.Leader)
		}
		return who + "following, leader " + leader
	}
	return who + fmt.Sprintf("leading (term %d), last renewal sent %v ago", s.Token, now.Sub(s.LastRenewal).Round(time.Millisecond))
}
