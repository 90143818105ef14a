package casleader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/casleader/casleader/cas"
	"github.com/casleader/casleader/internal/coalesce"
	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/internal/term"
	"github.com/casleader/casleader/store"
)

// Errors returned by the elector.
var (
	// ErrNotLeader is returned by HandoverTo, and by a term's Resign, when this
	// candidate does not lead (in that term).
	ErrNotLeader = term.ErrNotLeader
	// ErrRunState is returned when a call does not fit the elector's Run: by Run
	// while another Run of the same elector runs, or after Stop (a stopped elector
	// does not run again: create a new one with [New]), and by Resign, ResignFor
	// and HandoverTo when no Run runs (there is no leadership to give up). The
	// error it wraps says which.
	ErrRunState = errors.New("casleader: the elector's Run is not in the state this call needs")
	// ErrNotDrained is returned when the leader's work (OnStartedLeading) did not
	// return within DrainTimeout after its context was cancelled: by a resign or
	// handover, and by Run when it returns while that work still runs. The lease
	// was not released and expires by itself, so that the next leader cannot start
	// while that work may still act.
	ErrNotDrained = errors.New("casleader: the leader's work did not return within DrainTimeout")
	// ErrDuplicateID is returned by Run when the row names this candidate's ID in
	// a term that this process never won and that lease is being renewed, or shows
	// the term it leads renewed by somebody else: another live process runs with
	// the same ID. The elector never acts on such a term. It is [cas.ErrDuplicateID],
	// which a group's Run returns too.
	ErrDuplicateID = cas.ErrDuplicateID
)

// maxBatchWait is the longest an elector's statement waits to share a batched
// statement with those of the other electors on its store (internal/coalesce):
// at most a tenth of its heartbeat, and never more than this. Its members rows,
// written once a lease and live for a quarter lease more, wait up to ten times
// that, at most an eighth of the lease.
const maxBatchWait = 100 * time.Millisecond

// releaseTimeout bounds the release and handover writes sent when terms end.
const releaseTimeout = 5 * time.Second

// Elector runs one candidate in one election. Create it with [New], start it with
// [Elector.Run]. Its methods are safe for concurrent use.
//
// It runs on the engine of a [Group] with one key: one protocol, one executor,
// the same statements and the same verbs. Electors given the same store value
// share its statements while they run: a lone one sends single-key statements at
// once, and many send their renewals, reads, releases, handovers and members rows
// as the store's batched statements, each call waiting at most a tenth of its
// heartbeat (elections are each elector's own).
type Elector struct {
	cfg Config
	st  *coalesce.Store // st shared with the other electors on it while Run runs
	g   *Group          // the engine, with one key
	sh  *shared         // the key's trust, observed leader and stream
	log *slog.Logger

	mu        sync.Mutex
	running   bool
	stopped   bool               // Stop was called: Run does not start again
	runCancel context.CancelFunc // ends the running Run's context; nil before the first Run
	runDone   chan struct{}      // closed when that Run has returned
}

// New returns an elector for cfg on st. It validates cfg and does no I/O. The
// elector subscribes to st's wake-ups while it runs ([store.Driver.Subscribe]).
func New(st store.Driver, cfg Config) (*Elector, error) {
	if st == nil {
		return nil, &ConfigError{Field: "Store", Rule: "is nil: pass mysql.New, postgres.New or sqlite.New"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Elector{cfg: cfg, log: cfg.Logger.With("key", cfg.Key, "id", cfg.ID)}
	gc := GroupConfig{
		ID: cfg.ID, Keys: []string{cfg.Key}, BatchSize: 1, Parallel: 1,
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline,
		HeartbeatInterval: cfg.HeartbeatInterval, PollInterval: cfg.PollInterval,
		DrainTimeout: cfg.DrainTimeout, KeepLeaseOnExit: cfg.KeepLeaseOnExit,
		Observer: cfg.Observer, Priority: cfg.Priority, Logger: cfg.Logger,
		Hooks: append(slices.Clip(cfg.Hooks), e.hooks()),
	}
	if f := cfg.OnStartedLeading; f != nil {
		gc.OnStartedLeading = func(ctx context.Context, _ string, token int64) { f(ctx, token) }
	}
	wait := min(cfg.HeartbeatInterval/10, maxBatchWait)
	e.st = coalesce.New(st, wait, min(10*wait, cfg.LeaseDuration/8))
	g, err := NewGroup(e.st, gc)
	if err != nil {
		return nil, err
	}
	g.resume = cfg.ResumeTerm
	e.g, e.sh = g, g.shared(cfg.Key)
	return e, nil
}

// ID returns this candidate's ID.
func (e *Elector) ID() string { return e.cfg.ID }

// Key returns the election key.
func (e *Elector) Key() string { return e.cfg.Key }

// IsLeader reports whether this candidate leads now. It does no I/O: it compares the
// monotonic clock with the trust deadline, so it turns false the instant the deadline
// passes, even in a process that was frozen and has just resumed.
func (e *Elector) IsLeader() bool { return e.sh.trust.IsLeader() }

// TrustedUntil returns the monotonic instant until which this candidate trusts its
// lease (the send time of its last successful renewal + RenewDeadline), and false
// when it does not lead. No other candidate can take over before that instant +
// (LeaseDuration - RenewDeadline), by the database clock. The time carries Go's
// monotonic clock reading: compare it with time.Now(), never print it as a date.
func (e *Elector) TrustedUntil() (time.Time, bool) { return e.sh.trust.Until() }

// Config returns the configuration the elector runs with: what was passed to [New]
// with every zero field replaced by its effective default.
func (e *Elector) Config() Config { return e.cfg }

// Token returns the fencing token of the current term while [Elector.IsLeader] is
// true, else 0. Tokens strictly increase across terms of one election.
func (e *Elector) Token() int64 { return e.sh.trust.Token() }

// ClockSkew returns the clock skew between database servers that this elector's
// reads have shown within the last [timing.SkewWindow]: positive when the server it
// reads runs ahead of the server through which the leader renews, negative when it
// runs behind, 0 when none was seen (always, on a single server). It is a lower
// bound, measured from ticks in the future of the server read and from renewals
// that look older than the time between two reads. Elections do not depend on it:
// a lease's expiry is judged against the freshest read of its term, which cancels
// any offset between the servers' clocks (docs/SAFETY.md, "Clock skew between
// database servers"). A skew of a quarter of LeaseDuration - RenewDeadline or more
// is logged as a warning, at most once per 10 s.
func (e *Elector) ClockSkew() time.Duration { return time.Duration(e.g.skew.Load()) }

// Leader returns the ID of the leader as last observed, "" when none is known.
func (e *Elector) Leader() string { return e.sh.leaderID() }

// Pause stops campaigning: a paused candidate stays a follower and never takes over.
// A paused leader resigns first (drain, then hand over or release, as ResignFor).
// Resume undoes it.
func (e *Elector) Pause() { e.g.Pause() }

// Resume lets a paused candidate campaign again.
func (e *Elector) Resume() { e.g.Resume() }

// Resign gives up leadership and stays out of elections for one lease duration, so
// that another candidate takes over. See [Elector.ResignFor].
func (e *Elector) Resign(ctx context.Context) error {
	return e.ResignFor(ctx, e.cfg.LeaseDuration)
}

// ResignFor gives up leadership, if held, and stays out of elections for cooldown.
// It stops acting first (IsLeader turns false, the leader's context is cancelled),
// waits for OnStartedLeading to return (at most DrainTimeout), then hands the lease
// to the key's successor, the best live candidate its members reads know, with one
// compare-and-set that names it (as HandoverTo does), or releases the row when
// none is known ([Group.Run] gives the rule), so that a follower takes over at
// once. It returns when the lease is handed over or released, or when ctx ends. A follower only sets the cool-down. Without a running Run it does
// nothing and returns [ErrRunState] (to keep a candidate out of elections from
// its start, call [Elector.Pause] before Run). When OnStartedLeading does not
// return within DrainTimeout, the row is not released (the lease expires by
// itself, so that no other leader starts while that work may still act) and
// ResignFor returns an error matching [ErrNotDrained].
//
// Resign, ResignFor and HandoverTo wait for the leader's work, so that work never
// calls them: from inside OnStartedLeading, call [Term.Resign]
// (TermFrom(ctx).Resign()), which returns at once, then return. Given this
// elector's leadership context (or one derived from it) they do nothing and
// return an error that says so; given another context from inside the work, they
// would wait DrainTimeout for their own caller and leave the lease to expire.
func (e *Elector) ResignFor(ctx context.Context, cooldown time.Duration) error {
	if e.own(ctx) {
		return errors.New("casleader: Resign was given this elector's leadership context: it waits for the leader's work (OnStartedLeading) to return, so it is never called from inside that work; nothing was done: " +
			"call casleader.TermFrom(ctx).Resign(), which returns at once, then return from the work")
	}
	done := make(chan error, 1)
	if !e.g.request(op{key: e.cfg.Key, any: true, cooldown: cooldown, done: done}) {
		return fmt.Errorf("%w: no Run runs, so it leads nothing to resign (to keep it out of elections from the start, call Pause before Run)", ErrRunState)
	}
	return wait(ctx, done)
}

// HandoverTo passes leadership to candidate id: this leader stops acting, drains,
// then hands the lease to id with one compare-and-set; id confirms with its first
// renewal. It returns when the lease is handed over, or when ctx ends, and
// [ErrNotLeader] when this candidate does not lead. It waits for the leader's work
// as [Elector.ResignFor] does, under the same rule: to hand over from inside
// OnStartedLeading, call it from a goroutine with a context of its own, then
// return.
func (e *Elector) HandoverTo(ctx context.Context, id string) error {
	if rule := rules.NameRule(id); rule != "" {
		return &ConfigError{Field: "HandoverTo", Rule: "target " + rule}
	}
	if e.own(ctx) {
		return errors.New("casleader: HandoverTo was given this elector's leadership context: it waits for the leader's work (OnStartedLeading) to return, so it is never called from inside that work; nothing was done: " +
			"call HandoverTo from a goroutine with a context of its own, then return from the work")
	}
	if !e.isRunning() {
		return fmt.Errorf("%w: no Run runs, so it leads nothing to hand over (call Run first)", ErrRunState)
	}
	return e.g.HandoverTo(ctx, e.cfg.Key, id)
}

// own reports whether ctx is this elector's leadership context (or derives from it).
func (e *Elector) own(ctx context.Context) bool {
	t := TermFrom(ctx)
	return t != nil && t.Of(&e.sh.trust)
}

func (e *Elector) isRunning() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running
}

// wait returns the answer on done, or ctx's error when ctx ends first.
func wait(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run takes part in the election until ctx ends or [Elector.Stop] is called, then resigns (unless
// Config.KeepLeaseOnExit) and returns nil. Losing leadership is not fatal: the
// elector goes back to following and campaigns again. A database that is down is
// retried with backoff; Run returns early only on a deployment error (a missing
// table or privilege: the error says what to do) or a duplicate ID
// ([ErrDuplicateID]). Run returns after every goroutine it started has returned,
// or, when OnStartedLeading does not return within DrainTimeout after its context
// was cancelled, with an error matching [ErrNotDrained]: that work is logged at
// Error level and left running, and its lease was not released (it expires by
// itself). After [Elector.Stop], Run returns [ErrRunState] at once.
func (e *Elector) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, err := e.begin(cancel)
	if err != nil {
		return err
	}
	defer close(done) // last: after running = false
	leave := e.st.Join()
	err = e.g.Run(ctx)
	leave()
	switch {
	case errors.Is(err, ErrDuplicateID):
		e.log.Error("casleader: election stopped: give every candidate a unique ID and restart", "error", err)
	case errors.Is(err, store.ErrDeployment):
		e.log.Error("casleader: election stopped: fix the deployment and restart", "error", err)
	case errors.Is(err, ErrNotDrained):
		err = fmt.Errorf("key %q: %w", e.cfg.Key, err)
	}
	e.mu.Lock()
	e.running = false
	e.mu.Unlock()
	return err
}

// begin marks a Run under way, with cancel to end it, and returns the channel
// that its end closes.
func (e *Elector) begin(cancel context.CancelFunc) (chan struct{}, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		return nil, fmt.Errorf("%w: Run is already running (an elector runs once at a time)", ErrRunState)
	}
	if e.stopped {
		return nil, fmt.Errorf("%w: Stop was called, and a stopped elector does not run again: create a new one with New", ErrRunState)
	}
	done := make(chan struct{})
	e.running = true
	e.runCancel, e.runDone = cancel, done
	return done, nil
}

// Stop ends the election for this elector: it stops campaigning, resigns if
// leading (IsLeader turns false, the leader's context is cancelled, OnStartedLeading
// gets up to DrainTimeout to return, then the lease is handed over or released as
// by ResignFor unless Config.KeepLeaseOnExit), and waits until [Elector.Run] has returned. It is what
// cancelling Run's context does, plus the wait, for code that does not own that
// context (a shutdown hook). It returns nil once Run has returned (or when none
// runs), or an error wrapping ctx.Err() when ctx ends first: Run then still
// finishes on its own. A stopped elector does not run again: a later Run returns
// [ErrRunState] at once; create a new elector to campaign again. Stop may be called more
// than once.
//
// Called with the leadership context of OnStartedLeading (or one derived from it),
// Stop ends Run without waiting: Run waits for that very callback to return.
func (e *Elector) Stop(ctx context.Context) error {
	e.mu.Lock()
	e.stopped = true
	cancel, done := e.runCancel, e.runDone
	e.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	if e.own(ctx) {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("casleader: Stop: Run has not returned yet (it is draining the leader's work or releasing the lease, and returns on its own): %w", ctx.Err())
	}
}

// hooks are the elector's own hooks on its engine: its Info lines.
func (e *Elector) hooks() Hooks {
	return Hooks{
		Started: func(ev Event) { e.log.Info("casleader: became leader", "term", ev.Token) },
		Renewed: func(ev Event) {
			e.log.Debug("casleader: renewed", "term", ev.Token, "trusted_for", time.Until(ev.Until))
		},
		Leader: func(ev Event) {
			if ev.Leader == "" {
				e.log.Info("casleader: lease released")
			} else {
				e.log.Info("casleader: new leader observed", "leader", ev.Leader)
			}
		},
		Stopped: func(ev Event) { e.log.Info("casleader: stopped leading", "term", ev.Token) },
	}
}
