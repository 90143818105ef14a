package casleader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casleader/casleader/cas"
	"github.com/casleader/casleader/detector"
	"github.com/casleader/casleader/heartbeat"
	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/store"
)

// Store is what an [Elector] needs from the database: the compare-and-set writes
// and the read of package store. [store.MySQL], [store.Postgres] and [store.SQLite]
// implement it.
type Store interface {
	Observe(ctx context.Context, key string) (rec store.Record, found bool, err error)
	Insert(ctx context.Context, key, id string) (term int64, inserted bool, err error)
	Elect(ctx context.Context, key, id string, version int64, lease time.Duration) (term int64, won bool, err error)
	Renew(ctx context.Context, key, id string, version int64) (swapped bool, err error)
	Release(ctx context.Context, key, id string, version int64) (swapped bool, err error)
	Handover(ctx context.Context, key, id string, version int64, to string) (term int64, ok bool, err error)
}

// Notifier is an optional wake-up path between the candidates of an election (see
// [Config.Notifier]; package notify implements it). The elector calls its methods
// from its own goroutine: they must not block.
type Notifier interface {
	// Subscribe arranges for wake to be called when the lease of key may have been
	// given up, until unsubscribe is called. Wake-ups may be spurious or lost.
	Subscribe(key string, wake func()) (unsubscribe func())
	// Observed is called with every row a follower reads.
	Observed(key string, rec store.Record)
	// Leading is called with true when this candidate starts leading key in the term
	// token, and with false when that term has ended: after the release or handover
	// write returned, or when the lease was lost.
	Leading(key string, token int64, leading bool)
}

// Errors returned by the elector.
var (
	ErrNotLeader      = errors.New("casleader: not the leader")
	ErrAlreadyRunning = errors.New("casleader: Run is already running")
	ErrNotRunning     = errors.New("casleader: Run is not running")
)

// releaseTimeout bounds the release or handover write sent when leadership ends.
const releaseTimeout = 5 * time.Second

// Elector runs one candidate in one election. Create it with [New], start it with
// [Elector.Run]. Its methods are safe for concurrent use.
type Elector struct {
	cfg   Config
	store Store
	log   *slog.Logger
	base  time.Time // origin of the monotonic clock readings in trust

	trust  atomic.Int64 // trust deadline in ns since base; 0 when not leading
	term   atomic.Int64 // fencing token of the current term
	leader atomic.Pointer[string]

	wake chan struct{} // wakes a sleeping follower (notifications)

	mu       sync.Mutex
	running  bool
	paused   bool
	cooldown time.Time          // stay out of elections until then
	stop     context.CancelFunc // interrupts the current phase
	dirty    bool               // an interrupt arrived between two phases
	pending  []request          // resign and handover requests for the Run goroutine
}

type request struct {
	handoverTo string        // "" for a resign
	cooldown   time.Duration // resign only
	done       chan error
}

// New returns an elector for cfg on st. It validates cfg and does no I/O.
func New(st Store, cfg Config) (*Elector, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: Store is nil: pass store.NewMySQL, store.NewPostgres or store.NewSQLite", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Elector{
		cfg:   cfg,
		store: st,
		log:   cfg.Logger.With("key", cfg.Key, "id", cfg.ID),
		base:  time.Now().Add(-time.Nanosecond),
		wake:  make(chan struct{}, 1),
	}
	empty := ""
	e.leader.Store(&empty)
	return e, nil
}

// ID returns this candidate's ID.
func (e *Elector) ID() string { return e.cfg.ID }

// Key returns the election key.
func (e *Elector) Key() string { return e.cfg.Key }

// IsLeader reports whether this candidate leads now. It does no I/O: it compares the
// monotonic clock with the trust deadline, so it turns false the instant the deadline
// passes, even in a process that was frozen and has just resumed.
func (e *Elector) IsLeader() bool {
	d := e.trust.Load()
	return d != 0 && int64(time.Since(e.base)) < d
}

// TrustedUntil returns the monotonic instant until which this candidate trusts its
// lease (the send time of its last successful renewal + RenewDeadline), and false
// when it does not lead. No other candidate can take over before that instant +
// (LeaseDuration - RenewDeadline), by the database clock. The time carries Go's
// monotonic clock reading: compare it with time.Now(), never print it as a date.
func (e *Elector) TrustedUntil() (time.Time, bool) {
	d := e.trust.Load()
	if d == 0 || int64(time.Since(e.base)) >= d {
		return time.Time{}, false
	}
	return e.base.Add(time.Duration(d)), true
}

// Config returns the configuration the elector runs with: what was passed to [New]
// with every zero field replaced by its effective default.
func (e *Elector) Config() Config { return e.cfg }

// Token returns the fencing token of the current term while [Elector.IsLeader] is
// true, else 0. Tokens strictly increase across terms of one election.
func (e *Elector) Token() int64 {
	t := e.term.Load()
	if !e.IsLeader() {
		return 0
	}
	return t
}

// Leader returns the ID of the leader as last observed, "" when none is known.
func (e *Elector) Leader() string { return *e.leader.Load() }

// Wake makes a sleeping follower read the row now. Notification listeners call it
// when a lease is released; it never blocks.
func (e *Elector) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
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
// when ctx ends. Without a running Run it only sets the cool-down.
func (e *Elector) ResignFor(ctx context.Context, cooldown time.Duration) error {
	return e.send(ctx, request{cooldown: cooldown})
}

// HandoverTo passes leadership to candidate id: this leader stops acting, drains,
// then hands the lease to id with one compare-and-set; id confirms with its first
// renewal. It returns [ErrNotLeader] when this candidate does not lead.
func (e *Elector) HandoverTo(ctx context.Context, id string) error {
	if id == "" || len(id) > store.MaxKeyLen {
		return fmt.Errorf("%w: handover target must be 1 to %d bytes", ErrInvalidConfig, store.MaxKeyLen)
	}
	return e.send(ctx, request{handoverTo: id, cooldown: e.cfg.LeaseDuration})
}

func (e *Elector) send(ctx context.Context, r request) error {
	r.done = make(chan error, 1)
	e.mu.Lock()
	if !e.running {
		if r.handoverTo != "" {
			e.mu.Unlock()
			return ErrNotRunning
		}
		e.cooldown = time.Now().Add(r.cooldown)
		e.mu.Unlock()
		return nil
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
		return cas.Abstaining, time.Time{}
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

func (e *Elector) setTrust(deadline time.Time) {
	if deadline.IsZero() {
		e.trust.Store(0)
		return
	}
	e.trust.Store(max(int64(deadline.Sub(e.base)), 1))
}

func (e *Elector) observeLeader(id string) {
	if old := *e.leader.Load(); old == id {
		return
	}
	e.leader.Store(&id)
	if id == "" {
		e.log.Info("casleader: lease released")
	} else {
		e.log.Info("casleader: new leader observed", "leader", id)
	}
	if e.cfg.OnNewLeader != nil {
		e.cfg.OnNewLeader(id)
	}
}

// Run takes part in the election until ctx ends, then resigns (unless
// Config.KeepLeaseOnExit) and returns nil. Losing leadership is not fatal: the
// elector goes back to following and campaigns again. A database that is down is
// retried with backoff; Run returns early only on a deployment error (a missing
// table or privilege: the error says what to do). Run returns only after every
// goroutine it started, including OnStartedLeading, has returned.
func (e *Elector) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return ErrAlreadyRunning
	}
	e.running = true
	e.mu.Unlock()
	r := &run{e: e, m: cas.New(e.cfg.ID, e.cfg.LeaseDuration, e.cfg.RenewDeadline)}
	if n := e.cfg.Notifier; n != nil {
		// Notifications only end a follower's sleep early (Elector.Wake).
		defer n.Subscribe(e.cfg.Key, e.Wake)()
	}
	err := r.loop(ctx)
	r.work.Wait()
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

// run is the state of one Run call, owned by its goroutine.
type run struct {
	e    *Elector
	m    *cas.Machine
	work sync.WaitGroup // OnStartedLeading goroutines

	// failures counts the election writes in a row that failed or lost although
	// the row looked free; after the second, the next read waits retry.Backoff, so
	// that a row the database judges otherwise (or refuses to write) is never
	// hammered.
	failures int
	lim      retry.Limiter // their log lines
}

func (r *run) loop(ctx context.Context) error {
	e := r.e
	for {
		for _, req := range e.takeRequests() {
			// Not leading: a resign only sets the cool-down.
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
	part, until := e.participation()
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
	var d cas.Decision
	cfg := detector.Config{Key: e.cfg.Key, Poll: e.cfg.PollInterval, Timeout: e.cfg.RenewDeadline, Logger: e.log}
	obs, err := detector.Watch(pctx, e.store, cfg, e.wake, func(o detector.Observation) (time.Duration, bool) {
		if o.Found {
			e.observeLeader(o.LeaderID)
			if n := e.cfg.Notifier; n != nil {
				n.Observed(e.cfg.Key, o.Record)
			}
		}
		d = r.m.Observed(o.Record, o.Found, o.Sent, part)
		if d.Action == cas.Wait {
			r.failures = 0 // the row shows a live lease: the database and we agree
			r.lim.Reset()
		}
		return d.Wait, d.Action != cas.Wait
	})
	if err != nil {
		return cas.Decision{}, time.Time{}, err
	}
	switch d.Action {
	case cas.Lead:
		// Our own lease, adopted: an election whose reply was lost, or a handover.
		// No write of ours is known to have set it, so renew at once.
		return d, time.Time{}, nil
	case cas.Create:
		sent := time.Now()
		wctx, wcancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
		term, ok, err := e.store.Insert(wctx, e.cfg.Key, e.cfg.ID)
		wcancel()
		if err != nil {
			return r.unsettled("create", err)
		}
		r.outcome(ok, d.Version)
		return r.m.Created(term, ok, sent), sent, nil
	case cas.Campaign:
		sent := time.Now()
		wctx, wcancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
		term, ok, err := e.store.Elect(wctx, e.cfg.Key, e.cfg.ID, d.Version, e.cfg.LeaseDuration)
		wcancel()
		if err != nil {
			return r.unsettled("elect", err)
		}
		r.outcome(ok, d.Version)
		return r.m.Elected(term, ok, sent), sent, nil
	}
	return d, obs.Sent, nil
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
	e.term.Store(token)
	e.setTrust(m.Deadline())
	e.log.Info("casleader: became leader", "term", token, "version", m.Version())
	e.observeLeader(e.cfg.ID)
	if n := e.cfg.Notifier; n != nil {
		n.Leading(e.cfg.Key, token, true)
		// Told after the release or handover write below, so that woken followers
		// find the row already free.
		defer n.Leading(e.cfg.Key, token, false)
	}

	lctx, lcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer lcancel()
	expiry := time.AfterFunc(time.Until(m.Deadline()), lcancel)
	defer expiry.Stop()
	workDone := make(chan struct{})
	if f := e.cfg.OnStartedLeading; f != nil {
		r.work.Add(1)
		go func() {
			defer r.work.Done()
			defer close(workDone)
			f(lctx, token)
		}()
	} else {
		close(workDone)
	}

	renewed := func(version int64, sent time.Time) time.Time {
		// A reply that arrives after the trust deadline must not revive the term:
		// IsLeader() has said false and the leadership context is cancelled (or is
		// being cancelled by expiry). Returning the passed deadline ends the term.
		if !time.Now().Before(m.Deadline()) || !expiry.Stop() {
			return m.Deadline()
		}
		dl := m.Renewed(version, sent)
		e.setTrust(dl)
		expiry.Reset(time.Until(dl))
		last = sent
		return dl
	}
	hcfg := heartbeat.Config{Key: e.cfg.Key, ID: e.cfg.ID, Interval: e.cfg.HeartbeatInterval, Logger: e.log}
	var fatal error
	var req *request
	for d.Action == cas.Lead {
		pctx, cancel := e.phase(ctx)
		res := heartbeat.Run(pctx, e.store, hcfg, d.Version, last, m.Deadline(), renewed)
		cancel()
		switch res.Outcome {
		case heartbeat.Expired:
			d = m.DeadlinePassed(time.Now())
			e.log.Warn("casleader: stepping down: no renewal succeeded within the renew deadline", "term", token, "error", res.Err)
		case heartbeat.Lost:
			d = r.settle(ctx)
			if d.Action == cas.StepDown {
				e.log.Warn("casleader: stepping down: the lease was taken over", "term", token, "leader", m.Leader(), "version", m.Version())
			} else if !expiry.Stop() {
				// The deadline passed while the row was read: the leadership context
				// is cancelled, so this term ends even though the lease is still ours.
				d = cas.Decision{Action: cas.StepDown}
				e.log.Warn("casleader: stepping down: the renew deadline passed while settling a renewal", "term", token)
			} else {
				e.setTrust(m.Deadline())
				expiry.Reset(time.Until(m.Deadline()))
			}
		case heartbeat.Failed:
			d = cas.Decision{Action: cas.StepDown}
			fatal = res.Err
		case heartbeat.Stopped:
			d, req = r.stopped(ctx)
		}
	}
	// Stop acting before anything else is written.
	e.setTrust(time.Time{})
	e.term.Store(0)
	lcancel()
	version, held := m.Resign()
	r.drain(workDone)

	var err error
	switch {
	case !held:
	case d.Action == cas.Handover:
		err = r.release(ctx, token, version, d.To)
	case d.Action == cas.Release:
		err = r.release(ctx, token, version, "")
	}
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
	e.log.Info("casleader: stopped leading", "term", token, "reason", d.Action.String())
	if e.cfg.OnStoppedLeading != nil {
		e.cfg.OnStoppedLeading()
	}
	if fatal != nil {
		e.log.Error("casleader: election stopped: fix the deployment and restart", "error", fatal)
	}
	return fatal
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
	reqs := e.takeRequests()
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
	if p, _ := e.participation(); p == cas.Abstaining {
		return cas.Decision{Action: cas.Release, Version: m.Version()}, nil
	}
	return m.DeadlinePassed(time.Now()), nil
}

// settle reads the row once (retrying transient errors until the trust deadline) to
// settle a renewal that lost its compare-and-set or had an ambiguous result.
func (r *run) settle(ctx context.Context) cas.Decision {
	e, m := r.e, r.m
	m.RenewalFailed()
	for attempt := 1; ; attempt++ {
		dl := m.Deadline()
		if !time.Now().Before(dl) || ctx.Err() != nil {
			return m.DeadlinePassed(time.Now())
		}
		rctx, cancel := context.WithDeadline(ctx, dl)
		sent := time.Now()
		rec, found, err := e.store.Observe(rctx, e.cfg.Key)
		cancel()
		if err == nil {
			return m.Settled(rec, found, sent)
		}
		wait := heartbeat.Backoff(attempt, e.cfg.HeartbeatInterval)
		e.log.Warn("casleader: reading the row to settle a renewal failed, retrying", "error", err, "retry_in", wait)
		t := time.NewTimer(min(wait, time.Until(dl)))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// drain waits for OnStartedLeading to return, at most DrainTimeout.
func (r *run) drain(workDone <-chan struct{}) {
	t := time.NewTimer(r.e.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-workDone:
	case <-t.C:
		r.e.log.Warn("casleader: OnStartedLeading did not return within DrainTimeout after its context was cancelled", "drain_timeout", r.e.cfg.DrainTimeout)
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
			ok, err = e.store.Release(wctx, e.cfg.Key, e.cfg.ID, version)
		} else {
			newVersion, ok, err = e.store.Handover(wctx, e.cfg.Key, e.cfg.ID, version, to)
		}
		if ok && err == nil {
			break
		}
		rec, found, rerr := e.store.Observe(wctx, e.cfg.Key)
		if rerr != nil || !found || rec.LeaderID != e.cfg.ID || rec.Term != token || rec.Version == version {
			break
		}
		version, newVersion = rec.Version, rec.Version+1
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
		e.observeLeader(to)
	default:
		e.observeLeader("") // logs the release
	}
	return nil
}
