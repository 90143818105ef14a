package casleader

import (
	"context"
	"errors"
	"time"

	"github.com/casleader/casleader/store"
)

// Op names a store call in [Call.Op]: the methods of [store.Driver], named as the SQL
// stores name them in their errors.
type Op string

// The store calls an elector makes.
const (
	OpObserve Op = "observe"
	OpInsert  Op = "insert"
	OpElect   Op = "elect"
	// OpElectReleased is [store.Driver.ElectReleased].
	OpElectReleased Op = "elect released"
	OpRenew         Op = "renew"
	OpRelease       Op = "release"
	OpHandover      Op = "handover"
)

// Call is one store call that an elector made, as [Hooks.Call] reports it.
type Call struct {
	Op       Op            // which call
	Sent     time.Time     // when it was made (with a monotonic reading)
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
	// Cancelled reports that the elector cancelled the call's context itself (to
	// resign, pause or exit): not a failure of the database. A call that reached
	// its deadline is a timeout, not a cancellation.
	Cancelled bool
}

// Hooks observe an elector from the inside, so that metrics, health checks and
// the user's own instrumentation need no decorator around the store (the store
// the elector is given stays the one [Elector.Guard] uses) and no particular order
// of set-up. [Config.Hooks] takes any number of them; packages metrics and healthz
// provide theirs. Any field may be nil. Each is given the elector the event is
// about, so that one Hooks value can serve many electors.
//
// The hooks of one elector are called synchronously, one at a time, in the order
// of the events, on the goroutine of its Run (Attach: in New), which is the
// goroutine that renews the lease. They must not block: the elector waits for
// them, and a slow hook delays renewals. Hooks shared by several electors are
// called concurrently by them. A hook must not call the elector's methods that
// wait for it (Resign, ResignFor, HandoverTo, Stop); the methods that do no I/O
// (IsLeader, Token, Leader, Key, ID, Config, TrustedUntil) are fine. Work that may
// block belongs on [Elector.Listen]'s stream or on a goroutine of the hook's own.
// A panic in a hook is not recovered: it crashes the process.
type Hooks struct {
	// Attach is called once by [New], with the elector, before New returns: an
	// observer can start following the elector (its gauges, its health) before
	// any event.
	Attach func(e *Elector)

	// Call is called after every store call the elector makes for the election
	// (not for the guards, nor the members view), on the goroutine that made it.
	Call func(e *Elector, c Call)

	// Started is called when a term starts, with its fencing token: IsLeader has
	// turned true, and OnStartedLeading is about to be called.
	Started func(e *Elector, token int64)

	// Renewed is called whenever the elector extends its trust in the term token:
	// at the term's start and after every renewal (or read of its own row) that
	// showed the lease live. until is the new trust deadline (the evidence's send
	// time + RenewDeadline, by the monotonic clock): IsLeader turns false then
	// unless Renewed is called again.
	Renewed func(e *Elector, token int64, until time.Time)

	// Stopped is called when the term token has ended: the elector stopped
	// acting, waited for OnStartedLeading to return (at most DrainTimeout) and
	// released or handed over the lease if it was to. It is called just before
	// OnStoppedLeading is posted, for every term Started saw. Between Started and
	// Stopped the process may act as leader: the lead phase.
	Stopped func(e *Elector, token int64)

	// Leader is called when the observed leader changes, with its ID ("" when the
	// lease was released), before OnNewLeader is posted.
	Leader func(e *Elector, id string)
}

// observedStore is the store through which an elector with hooks makes its
// election calls: it times each call and reports it to Hooks.Call. Guards and the
// members view use the elector's own store, never this one.
type observedStore struct {
	store.Driver // the methods not observed: the inner store's
	inner        store.Driver
	e            *Elector
}

func (s *observedStore) report(ctx context.Context, c Call) {
	c.Duration = time.Since(c.Sent)
	c.Cancelled = c.Err != nil && errors.Is(ctx.Err(), context.Canceled)
	for _, h := range s.e.cfg.Hooks {
		if h.Call != nil {
			h.Call(s.e, c)
		}
	}
}

func (s *observedStore) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	c := Call{Op: OpObserve, Sent: time.Now()}
	c.Record, c.Found, c.Err = s.inner.Observe(ctx, key)
	s.report(ctx, c)
	return c.Record, c.Found, c.Err
}

func (s *observedStore) Insert(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	c := Call{Op: OpInsert, Sent: time.Now()}
	c.Term, c.Swapped, c.Err = s.inner.Insert(ctx, key, cand)
	s.report(ctx, c)
	return c.Term, c.Swapped, c.Err
}

func (s *observedStore) Elect(ctx context.Context, key string, cand store.Candidate, version int64) (int64, bool, error) {
	c := Call{Op: OpElect, Sent: time.Now()}
	c.Term, c.Swapped, c.Err = s.inner.Elect(ctx, key, cand, version)
	s.report(ctx, c)
	return c.Term, c.Swapped, c.Err
}

func (s *observedStore) ElectReleased(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	c := Call{Op: OpElectReleased, Sent: time.Now()}
	c.Term, c.Swapped, c.Err = s.inner.ElectReleased(ctx, key, cand)
	s.report(ctx, c)
	return c.Term, c.Swapped, c.Err
}

func (s *observedStore) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	c := Call{Op: OpRenew, Sent: time.Now()}
	c.Swapped, c.Err = s.inner.Renew(ctx, key, id, version)
	s.report(ctx, c)
	return c.Swapped, c.Err
}

func (s *observedStore) Release(ctx context.Context, key, id string, version int64) (bool, error) {
	c := Call{Op: OpRelease, Sent: time.Now()}
	c.Swapped, c.Err = s.inner.Release(ctx, key, id, version)
	s.report(ctx, c)
	return c.Swapped, c.Err
}

func (s *observedStore) Handover(ctx context.Context, key, id string, version int64, to string) (int64, bool, error) {
	c := Call{Op: OpHandover, Sent: time.Now()}
	c.Term, c.Swapped, c.Err = s.inner.Handover(ctx, key, id, version, to)
	s.report(ctx, c)
	return c.Term, c.Swapped, c.Err
}

// electionStore returns the store for the elector's election calls: st itself
// when no hook wants them.
func (e *Elector) electionStore() store.Driver {
	for _, h := range e.cfg.Hooks {
		if h.Call != nil {
			return &observedStore{Driver: e.store, inner: e.store, e: e}
		}
	}
	return e.store
}

// hookStarted, hookRenewed, hookStopped and hookLeader call the hooks of an
// event, in the order of Config.Hooks.
func (e *Elector) hookStarted(token int64) {
	for _, h := range e.cfg.Hooks {
		if h.Started != nil {
			h.Started(e, token)
		}
	}
}

func (e *Elector) hookRenewed(token int64, until time.Time) {
	for _, h := range e.cfg.Hooks {
		if h.Renewed != nil {
			h.Renewed(e, token, until)
		}
	}
}

func (e *Elector) hookStopped(token int64) {
	for _, h := range e.cfg.Hooks {
		if h.Stopped != nil {
			h.Stopped(e, token)
		}
	}
}

func (e *Elector) hookLeader(id string) {
	for _, h := range e.cfg.Hooks {
		if h.Leader != nil {
			h.Leader(e, id)
		}
	}
}

// trusted sets the trust deadline of the term token and tells the hooks.
func (e *Elector) trusted(token int64, until time.Time) {
	e.trust.Set(token, until)
	e.hookRenewed(token, until)
}
