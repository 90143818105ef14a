// Package healthz is a health check for processes that lead casleader elections,
// in the spirit of client-go's leaderelection.HealthzAdaptor: a process that
// believes it leads a key but has not renewed its lease for longer than it may is
// unhealthy, so that a supervisor (a Kubernetes liveness probe, a Docker
// healthcheck) restarts it. Followers are healthy.
//
// "Believes it leads" is the lead phase: from the start of a term until its end
// is complete ([casleader.Hooks] Started to Stopped). A candidate that works stops trusting its leadership at the
// renew deadline and ends the lead phase at most DrainTimeout later (plus the
// release write, after a resign). A lead phase that outlives the renew deadline by
// more than the tolerance means that the candidate's goroutine is stuck, or that
// OnStartedLeading ignores its context: work may still be running as leader after
// another candidate took over. The time of the last renewal is the candidate's
// own: the Renewed hook reports every extension of its trust.
//
// The rule holds per key: a casleader.Group with the Checker's hooks is unhealthy when
// any key it leads breaks it, and the answer names each such key.
//
//	hc := healthz.New(0)
//	cfg.Hooks = append(cfg.Hooks, hc.Hooks()) // casleader.Config or casleader.GroupConfig
//	el, err := casleader.New(sqlStore, cfg)
//	...
//	http.Handle("/healthz", hc)
//
// The package does not depend on Prometheus; its hooks compose with those of
// package metrics and the user's own, in any order, and the store is not wrapped,
// so its guards work as without the check. The Checker keeps a few words of state
// per key and candidate; with the query parameter "verbose" it lists them all, one
// line per key.
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

// ErrUnhealthy is returned by [Checker.Check] when a key's lead phase has
// outlived its renew deadline by more than the tolerance.
var ErrUnhealthy = errors.New("healthz: leading without a renewal")

// Checker checks the elections that its hooks report, per key and candidate. It
// is an [http.Handler]: 200 "ok" when every one is healthy, 500 with the reasons
// otherwise. Its methods are safe for concurrent use.
type Checker struct {
	tolerance time.Duration

	mu        sync.Mutex
	elections map[election]*state
	order     []election // in the order of their first event
}

// election names one candidate in one election.
type election struct{ key, id string }

// state is what the Checker knows of one election of one candidate, guarded by
// Checker.mu.
type state struct {
	election
	renewDeadline time.Duration
	tolerance     time.Duration

	leading bool      // in the lead phase: Started seen, Stopped not yet
	token   int64     // the term of the lead phase
	since   time.Time // when the lead phase started
	until   time.Time // the last trust deadline reported by Renewed
	leader  string    // the leader as last observed
}

// New returns a Checker that reports a key unhealthy when its candidate is in the
// lead phase and its last successful renewal was sent more than RenewDeadline +
// tolerance ago. tolerance <= 0 means the candidate's LeaseDuration -
// RenewDeadline: unhealthy once the lead phase outlives the lease, when another
// candidate may already lead. A tolerance shorter than the candidate's DrainTimeout
// also reports OnStartedLeading functions that are slow to return once their
// context is cancelled.
func New(tolerance time.Duration) *Checker {
	return &Checker{tolerance: max(tolerance, 0), elections: map[election]*state{}}
}

// Hooks returns the hooks that let the Checker follow a candidate: put them in
// [casleader.Config.Hooks] or a Group's GroupConfig.Hooks, beside any others
// (metrics', your own), in any order. The Checker covers every key of every
// candidate created with them, from its first event on (before it, a key is
// healthy: it does not lead).
func (c *Checker) Hooks() casleader.Hooks {
	return casleader.Hooks{
		Started: func(ev casleader.Event) {
			c.update(ev, func(s *state) {
				s.leading, s.token, s.since, s.until = true, ev.Token, time.Now(), time.Time{}
			})
		},
		Renewed: func(ev casleader.Event) {
			c.update(ev, func(s *state) { s.until = ev.Until })
		},
		Stopped: func(ev casleader.Event) {
			c.update(ev, func(s *state) {
				s.leading, s.token, s.since = false, 0, time.Time{}
			})
		},
		Leader: func(ev casleader.Event) {
			c.update(ev, func(s *state) { s.leader = ev.Leader })
		},
	}
}

// update applies change to the state of the election of ev, created at its first
// event.
func (c *Checker) update(ev casleader.Event, change func(*state)) {
	tol := c.tolerance
	if tol == 0 {
		tol = max(ev.LeaseDuration-ev.RenewDeadline, 0)
	}
	el := election{key: ev.Key, id: ev.ID}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.elections[el]
	if s == nil {
		s = &state{election: el}
		c.elections[el] = s
		c.order = append(c.order, el)
	}
	s.renewDeadline, s.tolerance = ev.RenewDeadline, tol
	change(s)
}

// Check returns nil when every key of every candidate is healthy, else an error
// that wraps [ErrUnhealthy] and says, for each unhealthy one, how long ago it
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

func (c *Checker) snapshots() []state {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]state, len(c.order))
	for i, el := range c.order {
		out[i] = *c.elections[el]
	}
	return out
}

func check(s state, now time.Time) error {
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
// key's state.
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

// describe says what the candidate of a healthy key is doing.
func describe(s state, now time.Time) string {
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
