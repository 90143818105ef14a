// Package tap follows an elector from the outside, so that packages metrics and
// healthz need no hook in the core: [Instrument] wraps the elector's store with a
// decorator that times and reports every call, and chains the Config callbacks.
//
// The [State] it returns keeps what an observer can know about the elector:
// whether it is in its lead phase (between OnStartedLeading and OnStoppedLeading),
// the term's fencing token, and the send time of the last evidence that the lease
// was live (a compare-and-set that won, or a read of this candidate's own row). The
// elector trusts its leadership RenewDeadline after that evidence, by the same
// monotonic clock, so [State.Snapshot] can tell when the lead phase outlives it.
package tap

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store"
)

// Operation names reported in [Call.Op]: the store methods of [casleader.Store],
// named as the SQL stores name them in their errors.
const (
	OpObserve  = "observe"
	OpInsert   = "insert"
	OpElect    = "elect"
	OpRenew    = "renew"
	OpRelease  = "release"
	OpHandover = "handover"
)

// Call is one store call as the decorator saw it.
type Call struct {
	Op       string        // one of the Op constants
	Key      string        // the election key
	Sent     time.Time     // when the call was made (with a monotonic reading)
	Duration time.Duration // how long it took
	Err      error         // the store's error, if any
	// Swapped reports that a write won its compare-and-set (for insert: the row
	// was created). Always false for observe.
	Swapped bool
	// Term is the term that a won insert, election or handover started.
	Term int64
	// Record and Found are the result of an observe.
	Record store.Record
	Found  bool
	// Cancelled reports that the caller cancelled the call's context (the elector
	// stopped a renewal to resign, pause or exit): not a failure of the database.
	// A context that reached its deadline is a timeout, not a cancellation.
	Cancelled bool
}

// Hooks receive an elector's events. Any field may be nil.
type Hooks struct {
	// Call is called after every store call, from the goroutine that made it.
	Call func(Call)
	// Started is called when a term starts, before Config.OnStartedLeading and in
	// its goroutine, only while the term's context is live.
	Started func(token int64)
	// Stopped is called when a term has ended, before Config.OnStoppedLeading,
	// only for a term that Started saw.
	Stopped func()
	// NewLeader is called before Config.OnNewLeader.
	NewLeader func(id string)
}

// Instrument returns st wrapped so that every call is reported to the returned
// State and to h.Call, and chains cfg's callbacks so that they are reported too. It
// gives cfg an ID (casleader.DefaultID) when it has none, so that the State knows
// the candidate. Pass the returned store and cfg to casleader.New.
func Instrument(st casleader.Store, cfg *casleader.Config, h Hooks) (casleader.Store, *State) {
	if cfg.ID == "" {
		cfg.ID = casleader.DefaultID()
	}
	s := &State{
		key:   cfg.Key,
		id:    cfg.ID,
		renew: cmp.Or(cfg.RenewDeadline, casleader.DefaultRenewDeadline),
		lease: cmp.Or(cfg.LeaseDuration, casleader.DefaultLeaseDuration),
	}
	started, stopped, newLeader := cfg.OnStartedLeading, cfg.OnStoppedLeading, cfg.OnNewLeader
	cfg.OnStartedLeading = func(ctx context.Context, token int64) {
		if s.started(ctx, token) && h.Started != nil {
			h.Started(token)
		}
		if started != nil {
			started(ctx, token)
		}
	}
	cfg.OnStoppedLeading = func() {
		if s.stopped() && h.Stopped != nil {
			h.Stopped()
		}
		if stopped != nil {
			stopped()
		}
	}
	cfg.OnNewLeader = func(id string) {
		s.newLeader(id)
		if h.NewLeader != nil {
			h.NewLeader(id)
		}
		if newLeader != nil {
			newLeader(id)
		}
	}
	return &Store{inner: st, state: s, hook: h.Call}, s
}

// State is what an observer knows about one elector. Its methods are safe for
// concurrent use.
type State struct {
	key, id      string
	renew, lease time.Duration

	mu      sync.Mutex
	leading bool      // in the lead phase: OnStartedLeading called, OnStoppedLeading not yet
	since   time.Time // when the lead phase started
	token   int64
	last    time.Time // send time of the last evidence of a live lease of this candidate
	leader  string
}

// Snapshot is a consistent view of a [State].
type Snapshot struct {
	Key, ID       string
	RenewDeadline time.Duration
	LeaseDuration time.Duration
	// Leading reports the lead phase: OnStartedLeading was called and
	// OnStoppedLeading was not yet. The elector may already have stopped trusting
	// its leadership (it does so at the trust deadline, before it drains).
	Leading bool
	// Token is the fencing token of the term in its lead phase, else 0.
	Token int64
	// LastRenewal is the send time of the last evidence that this candidate's
	// lease was live: a write that won its compare-and-set, or a read of its own
	// row (minus the row's age). Zero before the first.
	LastRenewal time.Time
	// Leader is the leader as last observed through OnNewLeader.
	Leader string
	// LeadingSince is when the lead phase started; zero when not leading.
	LeadingSince time.Time
}

// Trusted reports whether, at now, the elector is in its lead phase and within its
// renew deadline of the last renewal: what [casleader.Elector.IsLeader] says,
// except that the elector may have stepped down earlier on a lost renewal.
func (s Snapshot) Trusted(now time.Time) bool {
	return s.Leading && now.Before(s.LastRenewal.Add(s.RenewDeadline))
}

// Snapshot returns the current state.
func (s *State) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{
		Key: s.key, ID: s.id, RenewDeadline: s.renew, LeaseDuration: s.lease,
		Leading: s.leading, LastRenewal: s.last, Leader: s.leader,
	}
	if s.leading {
		snap.Token, snap.LeadingSince = s.token, s.since
	}
	return snap
}

// Key returns the election key.
func (s *State) Key() string { return s.key }

// ID returns the candidate's ID.
func (s *State) ID() string { return s.id }

// started records the start of a term and reports whether it did: a term whose
// context has ended (the goroutine ran late) is not recorded. The check and the
// update share the lock with stopped, and the elector cancels the context before it
// calls OnStoppedLeading, so a late start can never follow its own stop.
func (s *State) started(ctx context.Context, token int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	s.leading, s.token, s.since = true, token, time.Now()
	return true
}

// stopped records the end of the lead phase and reports whether one was recorded.
func (s *State) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.leading
	s.leading, s.token, s.since = false, 0, time.Time{}
	return was
}

func (s *State) newLeader(id string) {
	s.mu.Lock()
	s.leader = id
	s.mu.Unlock()
}

// renewed records evidence, sent at t, that this candidate's lease was live.
func (s *State) renewed(t time.Time) {
	s.mu.Lock()
	if t.After(s.last) {
		s.last = t
	}
	s.mu.Unlock()
}

// Store is the decorator returned by [Instrument]. It implements
// [casleader.Store] by calling the store it wraps.
type Store struct {
	inner casleader.Store
	state *State
	hook  func(Call)
}

var _ casleader.Store = (*Store)(nil)

// Unwrap returns the wrapped store, for code that looks for optional methods.
func (s *Store) Unwrap() casleader.Store { return s.inner }

func (s *Store) report(ctx context.Context, c Call, id string) {
	c.Duration = time.Since(c.Sent)
	c.Cancelled = c.Err != nil && errors.Is(ctx.Err(), context.Canceled)
	if c.Err == nil {
		switch {
		case c.Swapped && id == s.state.id:
			s.state.renewed(c.Sent)
		case c.Op == OpObserve && c.Found && c.Record.LeaderID == s.state.id:
			// The row is ours: it was written Age ago by the database clock. The
			// elector extends its trust from the same point (Sent - Age).
			s.state.renewed(c.Sent.Add(-c.Record.Age))
		}
	}
	if s.hook != nil {
		s.hook(c)
	}
}

// Observe calls the wrapped store's Observe and reports it.
func (s *Store) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	c := Call{Op: OpObserve, Key: key, Sent: time.Now()}
	c.Record, c.Found, c.Err = s.inner.Observe(ctx, key)
	s.report(ctx, c, "")
	return c.Record, c.Found, c.Err
}

// Insert calls the wrapped store's Insert and reports it.
func (s *Store) Insert(ctx context.Context, key, id string) (int64, bool, error) {
	c := Call{Op: OpInsert, Key: key, Sent: time.Now()}
	c.Term, c.Swapped, c.Err = s.inner.Insert(ctx, key, id)
	s.report(ctx, c, id)
	return c.Term, c.Swapped, c.Err
}

// Elect calls the wrapped store's Elect and reports it.
func (s *Store) Elect(ctx context.Context, key, id string, version int64, lease time.Duration) (int64, bool, error) {
	c := Call{Op: OpElect, Key: key, Sent: time.Now()}
	c.Term, c.Swapped, c.Err = s.inner.Elect(ctx, key, id, version, lease)
	s.report(ctx, c, id)
	return c.Term, c.Swapped, c.Err
}

// Renew calls the wrapped store's Renew and reports it.
func (s *Store) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	c := Call{Op: OpRenew, Key: key, Sent: time.Now()}
	c.Swapped, c.Err = s.inner.Renew(ctx, key, id, version)
	s.report(ctx, c, id)
	return c.Swapped, c.Err
}

// Release calls the wrapped store's Release and reports it.
func (s *Store) Release(ctx context.Context, key, id string, version int64) (bool, error) {
	c := Call{Op: OpRelease, Key: key, Sent: time.Now()}
	c.Swapped, c.Err = s.inner.Release(ctx, key, id, version)
	s.report(ctx, c, "") // a release is no evidence of a live lease
	return c.Swapped, c.Err
}

// Handover calls the wrapped store's Handover and reports it.
func (s *Store) Handover(ctx context.Context, key, id string, version int64, to string) (int64, bool, error) {
	c := Call{Op: OpHandover, Key: key, Sent: time.Now()}
	c.Term, c.Swapped, c.Err = s.inner.Handover(ctx, key, id, version, to)
	s.report(ctx, c, "") // the lease is now to's: no evidence for this candidate
	return c.Term, c.Swapped, c.Err
}
