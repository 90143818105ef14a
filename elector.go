package casleader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casleader/casleader/cas"
	"github.com/casleader/casleader/detector"
	"github.com/casleader/casleader/heartbeat"
	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/internal/stream"
	"github.com/casleader/casleader/internal/term"
	"github.com/casleader/casleader/internal/timing"
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

// releaseTimeout bounds the release or handover write sent when leadership ends.
const releaseTimeout = 5 * time.Second

// Elector runs one candidate in one election. Create it with [New], start it with
// [Elector.Run]. Its methods are safe for concurrent use.
type Elector struct {
	cfg    Config
	cand   store.Candidate // as the row records this process: ID, incarnation, lease
	store  store.Driver    // the store given to New: guards, wake-ups and the members view use it
	calls  store.Driver    // the election's calls: store, observed when a hook wants them
	log    *slog.Logger
	stream *stream.Stream[Status] // the leadership stream (Listen)

	trust  term.Trust // trust deadline and token, read by IsLeader and Token
	leader atomic.Pointer[string]
	skew   atomic.Int64 // ClockSkew, in nanoseconds

	wake     chan struct{} // wakes a sleeping follower (notifications)
	released atomic.Int64  // the released version of the last wake-up that carried one

	mu       sync.Mutex
	running  bool
	paused   bool
	cooldown time.Time          // stay out of elections until then
	stop     context.CancelFunc // interrupts the current phase
	dirty    bool               // an interrupt arrived between two phases
	pending  []request          // resign and handover requests for the Run goroutine

	stopped   bool               // Stop was called: Run does not start again
	runCancel context.CancelFunc // ends the running Run's context; nil before the first Run
	runDone   chan struct{}      // closed when that Run has returned
}

type request struct {
	handoverTo string        // "" for a resign
	cooldown   time.Duration // resign only
	term       int64         // the only term it may end; 0 for any
	done       chan error    // buffered: the answer never blocks
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
	e := &Elector{
		cfg:   cfg,
		cand:  store.Candidate{ID: cfg.ID, Incarnation: rules.NewIncarnation(), Lease: cfg.LeaseDuration},
		store: st,
		log:   cfg.Logger.With("key", cfg.Key, "id", cfg.ID),
		wake:  make(chan struct{}, 1),
	}
	e.stream = stream.New(stampStatus)
	empty := ""
	e.leader.Store(&empty)
	e.calls = e.electionStore()
	return e, nil
}

// ID returns this candidate's ID.
func (e *Elector) ID() string { return e.cfg.ID }

// Key returns the election key.
func (e *Elector) Key() string { return e.cfg.Key }

// IsLeader reports whether this candidate leads now. It does no I/O: it compares the
// monotonic clock with the trust deadline, so it turns false the instant the deadline
// passes, even in a process that was frozen and has just resumed.
func (e *Elector) IsLeader() bool { return e.trust.IsLeader() }

// TrustedUntil returns the monotonic instant until which this candidate trusts its
// lease (the send time of its last successful renewal + RenewDeadline), and false
// when it does not lead. No other candidate can take over before that instant +
// (LeaseDuration - RenewDeadline), by the database clock. The time carries Go's
// monotonic clock reading: compare it with time.Now(), never print it as a date.
func (e *Elector) TrustedUntil() (time.Time, bool) { return e.trust.Until() }

// Config returns the configuration the elector runs with: what was passed to [New]
// with every zero field replaced by its effective default.
func (e *Elector) Config() Config { return e.cfg }

// Token returns the fencing token of the current term while [Elector.IsLeader] is
// true, else 0. Tokens strictly increase across terms of one election.
func (e *Elector) Token() int64 { return e.trust.Token() }

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
func (e *Elector) ClockSkew() time.Duration { return time.Duration(e.skew.Load()) }

// Leader returns the ID of the leader as last observed, "" when none is known.
func (e *Elector) Leader() string { return *e.leader.Load() }

// Wake makes a sleeping follower try at once to win a released lease, then read
// the row if that did not win. Notification listeners call it when a lease is released; it never
// blocks.
func (e *Elector) Wake() { e.wakeAt(0) }

// wakeAt wakes a sleeping follower with the version at which the lease was
// released (0: unknown; see cas.Machine.Woken).
func (e *Elector) wakeAt(version int64) {
	e.released.Store(version)
	stream.Poke(e.wake)
}

// Pause stops campaigning: a paused candidate stays a follower and never takes over.
// A paused leader resigns first (drain, then release). Resume undoes it.
func (e *Elector) Pause() {
	e.mu.Lock()
	e.paused = true
	e.interruptLocked()
	e.mu.Unlock()
}

// Resume lets a paused candidate campaign again.
func (e *Elector) Resume() {
	e.mu.Lock()
	e.paused = false
	e.interruptLocked()
	e.mu.Unlock()
}

// Resign gives up leadership and stays out of elections for one lease duration, so
// that another candidate takes over. See [Elector.ResignFor].
func (e *Elector) Resign(ctx context.Context) error {
	return e.ResignFor(ctx, e.cfg.LeaseDuration)
}

// ResignFor gives up leadership, if held, and stays out of elections for cooldown.
// It stops acting first (IsLeader turns false, the leader's context is cancelled),
// waits for OnStartedLeading to return (at most DrainTimeout), then releases the row
// so that a follower can take over at once. It returns when the row is released, or
// when ctx ends. A follower only sets the cool-down. Without a running Run it does
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
	return e.send(ctx, request{cooldown: cooldown})
}

// HandoverTo passes leadership to candidate id: this leader stops acting, drains,
// then hands the lease to id with one compare-and-set; id confirms with its first
// renewal. It returns when the lease is handed over, or when ctx ends, and
// [ErrNotLeader] when this candidate does not lead. It waits for the leader's work
// as [Elector.ResignFor] does, under the same rule: to hand over from inside
// OnStartedLeading, call it from a goroutine with a context of its own, then
// return.
func (e *Elector) HandoverTo(ctx context.Context, id string) error {
	if id == "" || len(id) > store.MaxKeyLen {
		return fmt.Errorf("%w: handover target must be 1 to %d bytes", ErrInvalidConfig, store.MaxKeyLen)
	}
	return e.send(ctx, request{handoverTo: id, cooldown: e.cfg.LeaseDuration})
}

func (e *Elector) send(ctx context.Context, r request) error {
	if t := TermFrom(ctx); t != nil && t.Of(&e.trust) {
		return ownContext(r)
	}
	r.done = make(chan error, 1)
	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		if r.handoverTo != "" {
			return fmt.Errorf("%w: no Run runs, so it leads nothing to hand over (call Run first)", ErrRunState)
		}
		return fmt.Errorf("%w: no Run runs, so it leads nothing to resign (to keep it out of elections from the start, call Pause before Run)", ErrRunState)
	}
	e.pending = append(e.pending, r)
	e.interruptLocked()
	e.mu.Unlock()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ownContext is the error of a resign or handover (r) given this elector's
// leadership context: it would wait for the work that holds that context, and
// the context ends with the term.
func ownContext(r request) error {
	if r.handoverTo != "" {
		return errors.New("casleader: HandoverTo was given this elector's leadership context: it waits for the leader's work (OnStartedLeading) to return, so it is never called from inside that work; nothing was done: " +
			"call HandoverTo from a goroutine with a context of its own, then return from the work")
	}
	return errors.New("casleader: Resign was given this elector's leadership context: it waits for the leader's work (OnStartedLeading) to return, so it is never called from inside that work; nothing was done: " +
		"call casleader.TermFrom(ctx).Resign(), which returns at once, then return from the work")
}

// post hands r to a running Run without waiting for its answer.
func (e *Elector) post(r request) {
	r.done = make(chan error, 1)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running {
		return // no term runs, so r's term has ended
	}
	e.pending = append(e.pending, r)
	e.interruptLocked()
}

func (e *Elector) interruptLocked() {
	if e.stop != nil {
		e.stop()
		return
	}
	e.dirty = true
}

// phase returns a context for one phase of Run that Pause, Resume and requests
// interrupt.
func (e *Elector) phase(ctx context.Context) (context.Context, context.CancelFunc) {
	pctx, cancel := context.WithCancel(ctx)
	e.mu.Lock()
	e.stop = cancel
	if e.dirty || len(e.pending) > 0 {
		// Pause, Resume or a request came while no phase ran: let the caller
		// look at the new state before it blocks again.
		e.dirty = false
		cancel()
	}
	e.mu.Unlock()
	return pctx, func() {
		e.mu.Lock()
		e.stop = nil
		e.mu.Unlock()
		cancel()
	}
}

// takeRequests returns the pending requests and forgets them.
func (e *Elector) takeRequests() []request {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.pending
	e.pending = nil
	return p
}

// participation says how this candidate takes part now, and until when a cool-down
// lasts (zero when none).
func (e *Elector) participation() (p cas.Participation, until time.Time) {
	if e.cfg.Observer {
		return cas.Observing, time.Time{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.paused {
		return cas.Abstaining, time.Time{}
	}
	if time.Now().Before(e.cooldown) {
		return cas.CoolingDown, e.cooldown
	}
	return cas.Campaigning, time.Time{}
}

// observeLeader records the leader observed and tells OnNewLeader, on the
// callback goroutine: a slow OnNewLeader never delays the elector's own work.
func (r *run) observeLeader(id string) {
	e := r.e
	if old := *e.leader.Load(); old == id {
		return
	}
	e.leader.Store(&id)
	ev := e.event(0)
	ev.Leader = id
	e.hook(onLeader, ev)
	e.stream.Publish(func(s *Status) { s.Leader = id })
	if id == "" {
		e.log.Info("casleader: lease released")
	} else {
		e.log.Info("casleader: new leader observed", "leader", id)
	}
	if f := e.cfg.OnNewLeader; f != nil {
		r.cb.post(func() {
			defer e.crashOnPanic("OnNewLeader", 0)
			f(id)
		})
	}
}

// crashOnPanic, deferred around a user callback, logs a panic with the key, the
// term and the stack, then panics again with the same value: the process crashes,
// as it does with client-go. The lease is not released by a crashed process: it
// expires by itself, so the next leader starts no earlier than the lease allows.
func (e *Elector) crashOnPanic(callback string, token int64) {
	if v := recover(); v != nil {
		e.log.Error("casleader: callback panicked; the process crashes and its lease expires by itself",
			"callback", callback, "term", token, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		panic(v)
	}
}

// callbacks runs the OnNewLeader and OnStoppedLeading calls of one Run in order,
// on one goroutine of their own, so that a slow or blocked callback never holds
// up the goroutine that renews the lease.
type callbacks struct {
	mu     sync.Mutex
	queue  []func()
	closed bool
	more   chan struct{} // signals a post or close
	done   chan struct{} // closed when the goroutine has exited
}

func startCallbacks() *callbacks {
	c := &callbacks{more: make(chan struct{}, 1), done: make(chan struct{})}
	go c.run()
	return c
}

func (c *callbacks) post(f func()) {
	c.mu.Lock()
	if !c.closed {
		c.queue = append(c.queue, f)
	}
	c.mu.Unlock()
	c.signal()
}

func (c *callbacks) signal() {
	stream.Poke(c.more)
}

// close lets the goroutine exit once it has run what was posted.
func (c *callbacks) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.signal()
}

func (c *callbacks) run() {
	defer close(c.done)
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			closed := c.closed
			c.mu.Unlock()
			if closed {
				return
			}
			<-c.more
			continue
		}
		f := c.queue[0]
		c.queue = c.queue[1:]
		c.mu.Unlock()
		f()
	}
}

// Run takes part in the election until ctx ends or [Elector.Stop] is called, then resigns (unless
// Config.KeepLeaseOnExit) and returns nil. Losing leadership is not fatal: the
// elector goes back to following and campaigns again. A database that is down is
// retried with backoff; Run returns early only on a deployment error (a missing
// table or privilege: the error says what to do). Run returns after every
// goroutine it started, including the callbacks, has returned, or, when a callback
// is blocked, at most twice DrainTimeout after ctx ended (once while the leader's
// work drains before the release is decided, once more for the callbacks left):
// the blocked callback is logged at Error level and left running (it is never
// called again by this Run). When OnStartedLeading is what was left running, the
// lease was not released (it expires by itself) and Run returns an error matching
// [ErrNotDrained]. After [Elector.Stop], Run returns [ErrRunState] at once.
func (e *Elector) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return fmt.Errorf("%w: Run is already running (an elector runs once at a time)", ErrRunState)
	}
	if e.stopped {
		e.mu.Unlock()
		return fmt.Errorf("%w: Stop was called, and a stopped elector does not run again: create a new one with New", ErrRunState)
	}
	e.running = true
	done := make(chan struct{})
	defer close(done) // last: after every other deferred call and running = false
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.runCancel, e.runDone = cancel, done
	e.mu.Unlock()
	r := &run{e: e, m: cas.New(e.cand, e.cfg.RenewDeadline), cb: startCallbacks()}
	r.m.ElectsReleased(true) // every store.Driver has ElectReleased
	if e.cfg.ResumeTerm != 0 {
		r.m.Resume(e.cfg.ResumeTerm)
	}
	// Wake-ups end a follower's sleep early, and one that carries the released
	// version may be elected from at once (cas.Machine.Woken).
	defer e.store.Subscribe(e.cfg.Key, e.cfg.ID, e.wakeAt)()
	stopMembers := e.startMembers(ctx)
	err := r.loop(ctx)
	if werr := r.finish(); err == nil {
		err = werr
	}
	stopMembers()
	e.mu.Lock()
	e.running = false
	e.stop = nil
	pending := e.pending
	e.pending = nil
	e.mu.Unlock()
	for _, p := range pending {
		p.done <- nil
	}
	return err
}

// Stop ends the election for this elector: it stops campaigning, resigns if
// leading (IsLeader turns false, the leader's context is cancelled, OnStartedLeading
// gets up to DrainTimeout to return, then the row is released unless
// Config.KeepLeaseOnExit), and waits until [Elector.Run] has returned. It is what
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
	if t := TermFrom(ctx); t != nil && t.Of(&e.trust) {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("casleader: Stop: Run has not returned yet (it is draining the leader's work or releasing the lease, and returns on its own): %w", ctx.Err())
	}
}

// run is the state of one Run call, owned by its goroutine.
type run struct {
	e    *Elector
	m    *cas.Machine
	cb   *callbacks     // OnNewLeader and OnStoppedLeading
	work sync.WaitGroup // OnStartedLeading goroutines

	// undrained is closed when the OnStartedLeading of a term that was not
	// drained returns; nil when no such work runs. This candidate does not
	// campaign while it runs.
	undrained <-chan struct{}

	// failures counts the election writes in a row that failed or lost although
	// the row looked free; after the second, the next read waits retry.Backoff, so
	// that a row the database judges otherwise (or refuses to write) is never
	// hammered.
	failures int
	lim      retry.Limiter // their log lines

	skewLim retry.Limiter // the clock-skew warning
}

// noteSkew publishes the clock skew measured up to a read sent at sent, and warns
// when it is notable.
func (r *run) noteSkew(sent time.Time) {
	e := r.e
	s := r.m.Skew(sent)
	if old := e.skew.Swap(int64(s)); old != int64(s) {
		ev := e.event(0)
		ev.Skew = s
		e.hook(onSkew, ev)
	}
	if !timing.SkewNotable(s, e.cfg.LeaseDuration, e.cfg.RenewDeadline) {
		return
	}
	if ok, held := r.skewLim.Allow(); ok {
		e.log.Warn(timing.SkewMessage, "skew", s, "margin", e.cfg.LeaseDuration-e.cfg.RenewDeadline, "warnings_not_logged", held)
	}
}

func (r *run) loop(ctx context.Context) error {
	e := r.e
	for {
		for _, req := range e.takeRequests() {
			// Not leading: a resign only sets the cool-down.
			if req.term != 0 {
				req.done <- ErrNotLeader // its term has ended
				continue
			}
			if req.handoverTo != "" {
				req.done <- ErrNotLeader
				continue
			}
			e.mu.Lock()
			e.cooldown = time.Now().Add(req.cooldown)
			e.mu.Unlock()
			req.done <- nil
		}
		if ctx.Err() != nil {
			return nil
		}
		d, sent, err := r.follow(ctx)
		if err != nil {
			if errors.Is(err, ErrDuplicateID) {
				e.log.Error("casleader: election stopped: give every candidate a unique ID and restart", "error", err)
				return err
			}
			if errors.Is(err, store.ErrDeployment) {
				e.log.Error("casleader: election stopped: fix the deployment and restart", "error", err)
				return err
			}
			continue // interrupted or ctx ended
		}
		if d.Action == cas.Lead {
			if err := r.lead(ctx, d, sent); err != nil {
				return err
			}
		}
	}
}

// follow watches the row until this candidate may and should write, sends the
// election write, and returns the machine's decision with the write's send time.
func (r *run) follow(ctx context.Context) (cas.Decision, time.Time, error) {
	e := r.e
	part, until, busy := r.participation()
	pctx, cancel := e.phase(ctx)
	defer cancel()
	if !until.IsZero() {
		var c2 context.CancelFunc
		pctx, c2 = context.WithDeadline(pctx, until)
		defer c2()
	}
	if r.failures > 1 {
		// The first retry reads at once: a lost race or a lost reply is settled
		// by the next read, and a lease of ours must be adopted while it is fresh.
		t := time.NewTimer(retry.Backoff(r.failures-1, electionBackoff, e.cfg.PollInterval))
		select {
		case <-pctx.Done():
			t.Stop()
			return cas.Decision{}, time.Time{}, pctx.Err()
		case <-t.C:
		}
	}
	d, obs, err := r.watch(pctx, part, busy)
	if err != nil {
		return cas.Decision{}, time.Time{}, err
	}
	return r.write(ctx, d, obs.Sent)
}

// participation says how this candidate takes part in the next election, until
// when, and returns the end of an earlier term's work that still runs, if any.
func (r *run) participation() (part cas.Participation, until time.Time, busy <-chan struct{}) {
	part, until = r.e.participation()
	busy = r.undrained
	if busy != nil {
		select {
		case <-busy:
			r.undrained, busy = nil, nil
		default:
			// The work of an earlier term still runs: do not lead again beside it.
			// Its end wakes this follower.
			part = cas.Abstaining
		}
	}
	return part, until, busy
}

// watch reads the row until the machine decides to act on it, to take part again
// once busy is closed, or (woken) to campaign without a read. It returns the
// decision and the last read; a duplicate ID is returned as the error.
func (r *run) watch(pctx context.Context, part cas.Participation, busy <-chan struct{}) (cas.Decision, detector.Observation, error) {
	e := r.e
	var d cas.Decision
	var dup error
	w := detector.Watch{Store: e.calls, Key: e.cfg.Key, Poll: e.cfg.PollInterval, Heartbeat: e.cfg.HeartbeatInterval, Timeout: e.cfg.RenewDeadline, Logger: e.log,
		Woken: func() (bool, time.Duration) {
			d = r.m.Woken(e.released.Swap(0), part, r.failures)
			return d.Action == cas.Campaign || d.Action == cas.CampaignReleased, d.Wait
		}}
	obs, err := w.Run(pctx, e.wake, func(o detector.Observation) (time.Duration, bool) {
		if o.Found {
			r.observeLeader(o.LeaderID)
			e.store.Observed(e.cfg.Key, o.Record)
		}
		d = r.m.Observed(o.Record, o.Found, o.Sent, part)
		r.noteSkew(o.Sent)
		if d.Action == cas.Refuse {
			dup = d.Err
			e.log.Error("casleader: duplicate candidate ID: another process leads with this ID; not acting on its term", "term", o.Record.Term, "version", o.Record.Version)
			return 0, true
		}
		r.foreign(o.Record)
		if d.Action == cas.Wait {
			r.failures = 0 // the row shows a live lease: the database and we agree
			r.lim.Reset()
		}
		if busy != nil && d.Action == cas.Wait {
			select {
			case <-busy: // that work returned: take part again
				return 0, true
			default:
			}
		}
		return d.Wait, d.Action != cas.Wait
	})
	if err != nil {
		return cas.Decision{}, obs, err
	}
	return d, obs, dup
}

// write sends the election write that d asks for, if any, and returns the machine's
// decision on its reply with the write's send time; without a write, d with
// readSent, the send time of the read that decided it.
func (r *run) write(ctx context.Context, d cas.Decision, readSent time.Time) (cas.Decision, time.Time, error) {
	e := r.e
	switch d.Action {
	case cas.Lead:
		// Our own lease, adopted: an election whose reply was lost, or a handover.
		// No write of ours is known to have set it, so renew at once.
		return d, time.Time{}, nil
	case cas.Create:
		sent := time.Now()
		wctx, wcancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
		term, ok, err := e.calls.Insert(wctx, e.cfg.Key, e.cand)
		wcancel()
		if err != nil {
			return r.unsettled("create", err)
		}
		r.outcome(ok, d.Version)
		return r.decided(r.m.Created(term, ok, sent)), sent, nil
	case cas.Campaign:
		sent := time.Now()
		wctx, wcancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
		term, ok, err := e.calls.Elect(wctx, e.cfg.Key, e.cand, d.Version)
		wcancel()
		if err != nil {
			return r.unsettled("elect", err)
		}
		r.outcome(ok, d.Version)
		return r.decided(r.m.Elected(term, ok, sent)), sent, nil
	case cas.CampaignReleased:
		// Woken without a version: an election that wins only a released row
		// (the machine asks for it after a wake-up that carries no version).
		sent := time.Now()
		wctx, wcancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
		term, ok, err := e.calls.ElectReleased(wctx, e.cfg.Key, e.cand)
		wcancel()
		if err != nil {
			return r.unsettled("elect released", err)
		}
		r.outcome(ok, d.Version)
		return r.decided(r.m.Elected(term, ok, sent)), sent, nil
	}
	return d, readSent, nil
}

// foreign logs the first sighting of a live lease that names this candidate's ID
// in a term it does not own (the machine never adopts it, and refuses it if it is
// renewed). It is also what a process restarted with a stable ID sees of its
// earlier run's lease, which then expires.
func (r *run) foreign(rec store.Record) {
	if l := r.m.LeaseSighting(rec); l != 0 {
		r.e.log.Warn(timing.LeaseMessage, "leader", rec.LeaderID, "lease_row", l, "lease", r.e.cfg.LeaseDuration)
	}
	if term := r.m.ForeignSighting(rec); term != 0 && !r.e.cfg.Observer {
		r.e.log.Warn("casleader: the row names this candidate's ID in a term this process did not win; not adopting it, waiting for it to expire (after a restart with the same ID, Config.ResumeTerm resumes it at once)",
			"term", term, "version", rec.Version, "lease_left", rec.Remaining(r.e.cfg.LeaseDuration))
	}
}

// decided reports a fault that the machine found in an election write's reply
// (and recovered from: the next read settles the write).
func (r *run) decided(d cas.Decision) cas.Decision {
	if d.Err != nil {
		r.e.log.Error("casleader: not leading: "+d.Err.Error(), "error", d.Err)
	}
	return d
}

// electionBackoff is the first wait after an election write that failed or lost;
// the waits double up to the poll interval.
const electionBackoff = 50 * time.Millisecond

// outcome records whether an election write won. A lost one is normal once (another
// candidate won the race: the next read shows its lease); lost again and again from
// rows that look free, it means the database judges the row otherwise than its read
// does, and is reported.
func (r *run) outcome(won bool, version int64) {
	if won {
		r.failures = 0
		r.lim.Reset()
		return
	}
	r.failures++
	if r.failures == 1 {
		r.e.log.Debug("casleader: election lost", "version", version)
		return
	}
	if ok, held := r.lim.Allow(); ok {
		r.e.log.Warn("casleader: election writes keep losing although the row looks free: check the row and the database clock",
			"version", version, "attempt", r.failures, "failures_not_logged", held,
			"retry_in_at_most", r.e.cfg.PollInterval)
	}
}

// unsettled handles an election write whose outcome is unknown: the next read settles
// it (an own lease is adopted).
func (r *run) unsettled(op string, err error) (cas.Decision, time.Time, error) {
	r.m.Unsettled()
	if errors.Is(err, store.ErrDeployment) {
		return cas.Decision{}, time.Time{}, err
	}
	r.failures++
	if ok, held := r.lim.Allow(); ok {
		r.e.log.Warn("casleader: election write failed; the next read settles it", "op", op, "error", err,
			"attempt", r.failures, "failures_not_logged", held)
	}
	return cas.Decision{Action: cas.Wait}, time.Time{}, nil
}

// lead runs one term: it hands the leadership context to OnStartedLeading, renews
// until leadership ends, then stops acting, drains and, when asked to, releases or
// hands over the lease.
func (r *run) lead(ctx context.Context, d cas.Decision, last time.Time) error {
	e, m := r.e, r.m
	token := m.Term()
	e.trust.Set(token, m.Deadline())
	e.hook(onStarted, e.event(token))
	e.trusted(token, m.Deadline()) // the same deadline, told to Renewed
	e.stream.Publish(func(s *Status) { s.Leading, s.Token, s.Leader = true, token, e.cfg.ID })
	e.log.Info("casleader: became leader", "term", token, "version", m.Version())
	r.observeLeader(e.cfg.ID)
	e.store.Leading(e.cfg.Key, token, true)
	// Told after the release or handover write below, so that woken followers find
	// the row already free.
	defer e.store.Leading(e.cfg.Key, token, false)

	lctx, lcancel := context.WithCancel(term.With(context.WithoutCancel(ctx), e.term(token)))
	defer lcancel()
	expiry := time.AfterFunc(time.Until(m.Deadline()), lcancel)
	defer expiry.Stop()
	workDone := r.startWork(lctx, token)

	d, req, fatal := r.renew(ctx, d, last, token, expiry)
	// Stop acting before anything else is written.
	e.trust.Clear()
	lcancel()
	e.stream.Publish(func(s *Status) { s.Leading, s.Token = false, 0 })
	version, held := m.Resign()
	drained := r.drain(workDone, token)
	if !drained {
		r.undrained = workDone
	}

	err := r.giveUp(ctx, d, token, version, held, drained)
	r.answer(req, err, held, d)
	reason := d.Action.String()
	if errors.Is(err, ErrNotDrained) {
		reason = "not-drained" // nothing was released: the lease expires by itself
	}
	e.log.Info("casleader: stopped leading", "term", token, "reason", reason)
	e.hook(onStopped, e.event(token))
	if f := e.cfg.OnStoppedLeading; f != nil {
		r.stoppedLeading(f, token)
	}
	if fatal != nil {
		e.log.Error("casleader: election stopped: fix the deployment and restart", "error", fatal)
		return fatal
	}
	if req == nil && ctx.Err() != nil && errors.Is(err, ErrNotDrained) {
		return err // Run's end left the work running: Run says so
	}
	return nil
}

// startWork runs OnStartedLeading, if set, with the leadership context of term
// token, and returns a channel closed when it has returned.
func (r *run) startWork(lctx context.Context, token int64) <-chan struct{} {
	e := r.e
	workDone := make(chan struct{})
	if f := e.cfg.OnStartedLeading; f != nil {
		r.work.Add(1)
		go func() {
			defer r.work.Done()
			defer e.Wake() // a follower that waits for this work to end
			defer close(workDone)
			defer e.crashOnPanic("OnStartedLeading", token)
			f(lctx, token)
		}()
	} else {
		close(workDone)
	}
	return workDone
}

// renew renews the lease of term token from d and last (the send time of the last
// write that set it) while the machine says Lead, and returns the decision that
// ends the term, the request to answer if one ended it, and a fatal error. expiry
// cancels the leadership context at the trust deadline.
func (r *run) renew(ctx context.Context, d cas.Decision, last time.Time, token int64, expiry *time.Timer) (cas.Decision, *request, error) {
	e, m := r.e, r.m
	w := &renewer{Driver: e.calls}
	renewed := func(version int64, sent time.Time) time.Time {
		// The machine's late-reply rule decides (a reply handled after the trust
		// deadline never revives the term). The expiry timer may have cancelled the
		// leadership context a hair before the machine's deadline: the term has
		// ended then too. A passed deadline returned ends the heartbeat (Expired).
		if !expiry.Stop() {
			m.DeadlinePassed(m.Deadline())
			return time.Time{}
		}
		if m.RenewReply(version, sent, time.Now()).Action != cas.Lead {
			return time.Time{}
		}
		w.ambiguous = false
		e.trusted(token, m.Deadline())
		expiry.Reset(time.Until(m.Deadline()))
		last = sent
		return m.Deadline()
	}
	hb := heartbeat.Loop{Store: w, Key: e.cfg.Key, ID: e.cfg.ID, Interval: e.cfg.HeartbeatInterval, Logger: e.log, Renewed: renewed}
	var fatal error
	var req *request
	for d.Action == cas.Lead {
		pctx, cancel := e.phase(ctx)
		out, _, err := hb.Run(pctx, d.Version, last, m.Deadline())
		cancel()
		switch out {
		case heartbeat.Expired:
			m.DeadlinePassed(time.Now())
			d = cas.Decision{Action: cas.StepDown}
			e.log.Warn("casleader: stepping down: no renewal succeeded within the renew deadline", errAttr([]any{"term", token}, err)...)
		case heartbeat.Lost:
			var err error
			if d, err = r.settleLost(ctx, w, token, expiry); err != nil {
				fatal = err
			}
		case heartbeat.Failed:
			d = cas.Decision{Action: cas.StepDown}
			fatal = err
		case heartbeat.Stopped:
			d, req = r.stopped(ctx)
		}
	}
	return d, req, fatal
}

// settleLost settles a renewal of term token that lost its compare-and-set (or
// whose outcome w says is unknown) with one read, and returns what the machine
// decides: go on leading, with the trust deadline the read gave, or step down. A
// duplicate ID is returned as the error too.
func (r *run) settleLost(ctx context.Context, w *renewer, token int64, expiry *time.Timer) (cas.Decision, error) {
	e, m := r.e, r.m
	d := r.settle(ctx, w.ambiguous)
	w.ambiguous = false // the machine keeps it until a renewal wins
	var fatal error
	if d.Action == cas.Refuse {
		fatal = d.Err
		e.log.Error("casleader: duplicate candidate ID: another process acts with this candidate's ID; stepping down without releasing",
			"term", token, "version", m.Version(), "error", d.Err)
	} else if d.Action == cas.StepDown && d.Err != nil {
		e.log.Warn("casleader: stepping down: "+d.Err.Error(), "term", token, "version", m.Version())
	} else if d.Action == cas.StepDown {
		e.log.Warn("casleader: stepping down: the lease was taken over", "term", token, "leader", m.Leader(), "version", m.Version())
	} else if !expiry.Stop() {
		// The deadline passed while the row was read: the leadership context
		// is cancelled, so this term ends even though the lease is still ours.
		d = cas.Decision{Action: cas.StepDown}
		e.log.Warn("casleader: stepping down: the renew deadline passed while settling a renewal", "term", token)
	} else {
		e.trusted(token, m.Deadline())
		expiry.Reset(time.Until(m.Deadline()))
	}
	return d, fatal
}

// giveUp releases or hands over the lease of term token from version as d asks,
// once the term has stopped acting: only if the lease was still held, and only if
// its work has returned (drained).
func (r *run) giveUp(ctx context.Context, d cas.Decision, token, version int64, held, drained bool) error {
	switch {
	case !held:
	case !drained && (d.Action == cas.Handover || d.Action == cas.Release):
		// The work may still act: releasing now would let the next leader start
		// while it runs. The lease expires by itself, LeaseDuration after the last
		// renewal, by the database clock.
		return r.notDrained(token, d.To)
	case d.Action == cas.Handover:
		return r.release(ctx, token, version, d.To)
	case d.Action == cas.Release:
		return r.release(ctx, token, version, "")
	}
	return nil
}

// answer sets the cool-down after a term and answers req, the request that ended
// it, with err, the outcome of the release; a step-down requested through the row
// sets a cool-down of one lease.
func (r *run) answer(req *request, err error, held bool, d cas.Decision) {
	e := r.e
	if req != nil {
		e.mu.Lock()
		e.cooldown = time.Now().Add(req.cooldown)
		e.mu.Unlock()
		req.done <- err
	} else if held && (d.Action == cas.Release || d.Action == cas.Handover) {
		// A step-down requested through the row: let another candidate win.
		e.mu.Lock()
		e.cooldown = time.Now().Add(e.cfg.LeaseDuration)
		e.mu.Unlock()
	}
}

// stopped decides what an interrupted heartbeat means: Run's context ended, a
// request arrived, or the candidate was paused. It returns the decision and the
// request to answer, if any.
func (r *run) stopped(ctx context.Context) (cas.Decision, *request) {
	e, m := r.e, r.m
	if ctx.Err() != nil {
		if e.cfg.KeepLeaseOnExit {
			return cas.Decision{Action: cas.StepDown}, nil
		}
		return cas.Decision{Action: cas.Release, Version: m.Version()}, nil
	}
	var reqs []request
	for _, q := range e.takeRequests() {
		if q.term != 0 && q.term != m.Term() {
			q.done <- ErrNotLeader // scoped to a term that has ended
			continue
		}
		reqs = append(reqs, q)
	}
	if len(reqs) > 0 {
		req := reqs[0]
		for _, other := range reqs[1:] { // answered together with the first
			e.mu.Lock()
			e.pending = append(e.pending, other)
			e.mu.Unlock()
		}
		if req.handoverTo != "" && req.handoverTo != e.cfg.ID {
			return cas.Decision{Action: cas.Handover, Version: m.Version(), To: req.handoverTo}, &req
		}
		if req.handoverTo == e.cfg.ID {
			req.done <- nil
			return cas.Decision{Action: cas.Lead, Version: m.Version()}, nil
		}
		return cas.Decision{Action: cas.Release, Version: m.Version()}, &req
	}
	p, _ := e.participation()
	return m.Tick(time.Now(), p), nil
}

// renewer is the leader's store for heartbeat.Loop.Run: it notes whether a renewal
// since the last successful one had an error, whose write may have committed.
type renewer struct {
	store.Driver
	ambiguous bool
}

func (w *renewer) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	ok, err := w.Driver.Renew(ctx, key, id, version)
	if err != nil {
		w.ambiguous = true
	}
	return ok, err
}

// settle reads the row once (retrying transient errors until the trust deadline) to
// settle a renewal that lost its compare-and-set or had an ambiguous result (a
// renewal of this term since its last success failed with an unknown outcome), and
// returns the machine's decision, Refuse included (see [cas.Machine.Settled]).
func (r *run) settle(ctx context.Context, ambiguous bool) cas.Decision {
	e, m := r.e, r.m
	m.RenewalFailed(ambiguous)
	for attempt := 1; ; attempt++ {
		dl := m.Deadline()
		if !time.Now().Before(dl) || ctx.Err() != nil {
			return m.DeadlinePassed(time.Now())
		}
		rctx, cancel := context.WithDeadline(ctx, dl)
		sent := time.Now()
		rec, found, err := e.calls.Observe(rctx, e.cfg.Key)
		cancel()
		if err == nil {
			return m.SettledAt(rec, found, sent, time.Now())
		}
		wait := retry.Renewal(attempt, e.cfg.HeartbeatInterval)
		e.log.Warn("casleader: reading the row to settle a renewal failed, retrying", "error", err, "retry_in", wait)
		t := time.NewTimer(min(wait, time.Until(dl)))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// stoppedLeading calls f (OnStoppedLeading) on the callback goroutine and waits
// for it at most DrainTimeout, so that it normally returns before a new term
// starts, yet a blocked one never stops the election.
func (r *run) stoppedLeading(f func(), token int64) {
	e := r.e
	done := make(chan struct{})
	r.cb.post(func() {
		defer close(done)
		defer e.crashOnPanic("OnStoppedLeading", token)
		f()
	})
	t := time.NewTimer(e.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		e.log.Error("casleader: OnStoppedLeading did not return within DrainTimeout; the election goes on without it",
			"term", token, "drain_timeout", e.cfg.DrainTimeout)
	}
}

// finish waits for the callbacks and the leader's work started by this Run, at
// most DrainTimeout, and logs those that did not return. It returns an error
// matching ErrNotDrained when the leader's work did not.
func (r *run) finish() error {
	e := r.e
	r.cb.close()
	work := make(chan struct{})
	go func() {
		r.work.Wait()
		close(work)
	}()
	cbDone := r.cb.done
	t := time.NewTimer(e.cfg.DrainTimeout)
	defer t.Stop()
	for work != nil || cbDone != nil {
		select {
		case <-work:
			work = nil
		case <-cbDone:
			cbDone = nil
		case <-t.C:
			if cbDone != nil {
				e.log.Error("casleader: Run returns while OnNewLeader or OnStoppedLeading still runs: it did not return within DrainTimeout",
					"drain_timeout", e.cfg.DrainTimeout)
			}
			if work != nil {
				e.log.Error("casleader: Run returns while OnStartedLeading still runs: it did not return within DrainTimeout after its context was cancelled; its lease was not released",
					"drain_timeout", e.cfg.DrainTimeout)
				return fmt.Errorf("%w: key %q: Run returns while it still runs, and its lease was not released (it expires by itself): make OnStartedLeading return when its context is cancelled",
					ErrNotDrained, e.cfg.Key)
			}
			return nil
		}
	}
	return nil
}

// drain waits for OnStartedLeading to return, at most DrainTimeout, and reports
// whether it did.
func (r *run) drain(workDone <-chan struct{}, token int64) bool {
	t := time.NewTimer(r.e.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-workDone:
		return true
	case <-t.C:
		r.e.log.Warn("casleader: OnStartedLeading did not return within DrainTimeout after its context was cancelled",
			"term", token, "drain_timeout", r.e.cfg.DrainTimeout)
		return false
	}
}

// release sends the release (to == "") or handover write after the leader stopped
// acting. It runs even when Run's context has ended.
func (r *run) release(ctx context.Context, token, version int64, to string) error {
	e := r.e
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(releaseTimeout, e.cfg.LeaseDuration))
	defer cancel()
	var (
		ok         bool
		err        error
		newVersion = version + 1 // a release bumps the version; a handover starts a term
	)
	// A lost compare-and-set or an error may hide a write of ours that committed
	// (a renewal whose reply was lost) or a step-down request: while the row still
	// shows our term, try again from the version it shows.
	for attempt := 0; attempt < 3; attempt++ {
		if to == "" {
			ok, err = e.calls.Release(wctx, e.cfg.Key, e.cfg.ID, version)
		} else {
			newVersion, ok, err = e.calls.Handover(wctx, e.cfg.Key, e.cfg.ID, version, to)
		}
		if ok && err == nil {
			break
		}
		rec, found, rerr := e.calls.Observe(wctx, e.cfg.Key)
		if rerr != nil {
			break
		}
		from, retry := r.m.RetryFrom(token, version, rec, found)
		if !retry {
			break
		}
		version, newVersion = from, from+1
	}
	r.m.Released(newVersion, ok && err == nil, to)
	switch {
	case err != nil:
		e.log.Warn("casleader: release failed; the lease expires by itself", "handover_to", to, "error", err)
		return fmt.Errorf("casleader: release %q: %w", e.cfg.Key, err)
	case !ok:
		e.log.Warn("casleader: release lost its compare-and-set; the row had moved on", "handover_to", to)
	case to != "":
		e.log.Info("casleader: lease handed over", "handover_to", to)
		r.observeLeader(to)
	default:
		r.observeLeader("") // logs the release
	}
	return nil
}
