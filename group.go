package casleader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casleader/casleader/cas"
	"github.com/casleader/casleader/detector"
	"github.com/casleader/casleader/heartbeat"
	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/internal/stream"
	"github.com/casleader/casleader/internal/term"
	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
)

// ErrInvalidKey is returned by [Group.Add] for a key that cannot be an election key.
var ErrInvalidKey = errors.New("casleader: invalid key")

// GroupConfig configures a [Group]. Zero values get the defaults given per field.
type GroupConfig struct {
	// ID names this candidate in every election of the group. Default
	// DefaultID(), unique to this process.
	ID string
	// Keys are the elections to take part in from the start; see also [Group.Add].
	Keys []string
	// LeaseDuration, RenewDeadline, HeartbeatInterval and PollInterval mean what
	// they mean in [Config], with the same defaults (15 s, 10 s, 2 s, 5 s;
	// given only LeaseDuration, RenewDeadline is 2/3 of it and HeartbeatInterval 1/5
	// of RenewDeadline) and the same rule HeartbeatInterval < RenewDeadline <
	// LeaseDuration.
	LeaseDuration, RenewDeadline, HeartbeatInterval, PollInterval time.Duration
	// BatchSize is the largest number of keys in one statement. Default 1000, at
	// most store.MaxBatch.
	BatchSize int
	// Parallel is how many batched statements run at once. Keep it below the pool
	// size. Default 4.
	Parallel int
	// KeepLeaseOnExit keeps the leases when Run's context ends instead of giving
	// them up (handing them over or releasing them: see Group.Run).
	KeepLeaseOnExit bool
	// Balance spreads the keys over the live candidates of the group, so that
	// each leads its fair share: within one key of N/M for N keys and M live
	// candidates that neither observe nor pause. Every candidate of the group
	// must set it and run the same keys. Every half lease, each candidate reads
	// who is live (the members of the group's least key) and decides, as all
	// the others do from the same read, who should lead each key: a leader keeps
	// its keys up to its share (no key moves to fix what is fair) and hands the
	// others over by the safe handover, at most 32 per half lease; a follower
	// campaigns only for the keys given to it, so the keys of a candidate that
	// died are taken up evenly; and when Run ends, each key is handed to the
	// candidate that should take it (else to its successor, see Group.Run). A
	// move never makes two leaders: it is a handover or an election
	// (docs/SAFETY.md). It needs the members table (the stores of the dialect
	// packages keep one). Default false.
	Balance bool
	// Observer makes the group never campaign: it only reports the leaders of its
	// keys (Leader). Default false.
	Observer bool
	// Priority is this candidate's priority, recorded in the members view (see
	// [Group.Members]); higher is preferred. For each key it leads, the group
	// hands the lease over to a live candidate of the key with a strictly higher
	// priority once that candidate has been seen live for a full LeaseDuration,
	// through the safe handover, by the rule of [Config.Priority]
	// (docs/operations.md, "Preferred leader"): one batched read of the members of the keys led per
	// half lease. Default 0.
	Priority int
	// OnChange is called from Run's goroutine when this candidate starts (leading
	// true, with the term's fencing token) or stops leading key. It must return
	// quickly: while it runs, no key is renewed.
	OnChange func(key string, leading bool, token int64)
	// OnStartedLeading, when not nil, is called on a goroutine of its own when the
	// group starts leading key in the term token: the leader's work for that key.
	// ctx is cancelled when that key's term ends (its trust deadline passes, its
	// lease is lost, released, handed over or resigned, the key is removed, or Run
	// ends), and TermFrom(ctx) gives the term's handle: token, IsLeader,
	// Guard (and Fence, for postgres.Guard on a pgx transaction), and a non-blocking
	// Resign. It should return soon after ctx is cancelled: the key's
	// lease is released only after it has returned, at most DrainTimeout later
	// (else the lease expires by itself), and the key takes no new term while it
	// runs. A panic in it crashes the process, as in an Elector. Default nil.
	OnStartedLeading func(ctx context.Context, key string, token int64)
	// DrainTimeout bounds how long, after a key's term ends, the group waits for
	// that term's OnStartedLeading to return before it releases the key; Run waits
	// as long at most for it when it returns. Default LeaseDuration − RenewDeadline.
	DrainTimeout time.Duration
	// Logger receives role changes (Debug per key, Info per summary), renewal
	// failures (Warn). nil means discard.
	Logger *slog.Logger
	// Hooks observe the group from the inside, per key, with the events and rules
	// of [Hooks]: every store call made for the elections (a batched
	// statement is reported once per key it carried, with its key count in
	// Call.Keys), the start of each key's term, each extension of its trust, its
	// end (once the term's work has returned and its lease was released, handed
	// over or lost), and each change of a key's observed leader or clock skew. They
	// are called on Run's goroutine and must not block: while they run, no key is
	// renewed. Packages metrics and healthz give theirs (Metrics.Hooks,
	// Checker.Hooks). Default none.
	Hooks []Hooks
}

// GroupStats are counters of a group's work since New.
type GroupStats struct {
	Leading    int   // keys led now
	Statements int64 // batched calls made (one per call, also when a MySQL write reads its rows back)
	LostLeases int64 // keys whose leadership ended other than by release
	// ClockSkew is the clock skew between database servers measured up to the
	// last batched read of followed keys, the largest over its keys: positive when the
	// server the group reads runs ahead of the one a leader writes through,
	// negative when behind (as Elector.ClockSkew). Elections do not
	// depend on it; a notable skew is logged as a warning.
	ClockSkew time.Duration
}

// Group is one candidate in many elections. Create it with [NewGroup], run it with [Group.Run].
//
// It runs in each election with batched statements: one statement renews up to BatchSize leases, one reads up to BatchSize
// rows, each with a per-key compare-and-set outcome (store.RenewMany, ObserveMany,
// ElectMany, InsertMany, ReleaseMany). A process that leads 10,000 keys with a 1 s
// heartbeat sends about 10,000 / BatchSize renewal statements per second instead of
// 10,000.
//
// Per key the protocol is the one of an [Elector], decided by the same per-key
// state machine, [cas.Machine]: a group runs one machine per key and only turns
// their decisions into batched statements (docs/SAFETY.md gives the argument). All
// keys that one Group leads renew together, every HeartbeatInterval; keys it
// follows are read when the lease observed on them can expire, at least every
// PollInterval, or when the store's wake-ups ([store.Driver.Subscribe]) wake them.
//
// One goroutine (Run's) owns the election state and makes every decision; up to
// Parallel helper goroutines only send statements and hand the replies back.
// OnChange and GroupConfig.Hooks are called from Run's goroutine. OnStartedLeading runs
// on a goroutine of its own per term, like the Elector's. IsLeader, Token and
// Leader, and those of a [Lease], are safe for concurrent use and do no I/O. Listen
// and HandoverTo are safe for concurrent use; HandoverTo hands its request to Run's
// goroutine, which alone acts on it, and waits for the outcome.
//
// A key's term ends as a single key's does (see GroupConfig.OnStartedLeading).
//
// A group takes a [store.Driver], as New does: it uses the batched calls
// (one unit per statement), a single-key handover (rare), the store's wake-ups and
// its members table.
type Group struct {
	cfg   GroupConfig
	cand  store.Candidate // as the rows record this process: ID, incarnation, lease
	st    store.Driver
	hooks hooks        // GroupConfig.Hooks, by event
	log   *slog.Logger // GroupConfig.Logger, with the ID
	// resume is the term a key resumes (an Elector's Config.ResumeTerm).
	resume int64

	mu   sync.RWMutex
	keys map[string]*shared // every key of the group, for IsLeader and Token

	reqMu   sync.Mutex
	running bool             // a Run is under way: it answers HandoverTo
	resigns []op             // terms to resign (key, token) or hand over (to)
	ops     []op             // Add and Remove requests, in order
	wakeup  map[string]int64 // keys woken by the store's wake-ups, with the released version (0: unknown)
	poke    chan struct{}
	paused  atomic.Bool
	named   atomic.Bool // the last write of the members rows succeeded: a handover can name this process

	statements, lost, leading, skew atomic.Int64
	skewLim                         retry.Limiter

	// Balance (see balance.go): the live members last read, and who should
	// lead each key by them.
	live     atomic.Pointer[[]store.Member]
	assigned atomic.Pointer[map[string]string]
}

// op is one key added (add) or removed, or a term of key to resign (token), or
// to hand over to to; done, when not nil, gets the outcome of a handover that
// HandoverTo asked for.
type op struct {
	key      string
	add      bool
	token    int64
	any      bool          // resign whatever term leads now, or cool down a follower (an Elector's Resign)
	cooldown time.Duration // after a resign: stay out of the key's elections this long (at least a lease)
	to       string
	reason   string // for the log, when not the caller's (the preferred leader rule, balancing)
	quiet    bool   // logged at Debug level: one of many (balancing)
	done     chan<- error
}

// shared is the part of a key's state that IsLeader, Token, Leader and Listen read.
type shared struct {
	trust  term.Trust
	leader atomic.Pointer[string] // as last observed; nil when unknown
	stream *stream.Stream[Status] // the key's leadership stream (Listen)
	// next is the key's successor by the last read of its members (the
	// members goroutine writes it): whom a graceful end of a term hands the
	// lease to. nil until a read while leading.
	next atomic.Pointer[successor]
}

func newShared() *shared { return &shared{stream: stream.New(stampStatus)} }

// state is a key's election state, owned by Run's goroutine.
type state struct {
	key         string
	idx         int  // position in run.list; -1 once the key is removed
	ordered     bool // in run.order
	sh          *shared
	m           *cas.Machine
	nextLook    time.Time
	token       int64 // the term reported by OnChange(true), until OnChange(false)
	led         bool
	unsubscribe func()
	failures    int           // election writes in a row that did not win a row that looked free
	skew        time.Duration // the clock skew the key's reads showed, as last told to the hooks
	freeSince   time.Time     // Balance: since when reads have found the row free (zero: not free)

	// The leader's work of the current or last term (OnStartedLeading).
	cancel context.CancelFunc // ends the current term's leadership context; nil when none
	expiry *time.Timer        // calls cancel at the trust deadline
	work   chan struct{}      // closed when the last term's OnStartedLeading returned; nil when none runs
}

// working reports whether the OnStartedLeading of the key's last term still runs.
func (s *state) working() bool {
	if s.work == nil {
		return false
	}
	select {
	case <-s.work:
		s.work = nil
		return false
	default:
		return true
	}
}

// NewGroup validates cfg and returns a group on st. It does no I/O. The group
// subscribes to st's wake-ups for the keys it follows while it runs
// ([store.Driver.Subscribe]).
func NewGroup(st store.Driver, cfg GroupConfig) (*Group, error) {
	if st == nil {
		return nil, &ConfigError{Field: "Store", Rule: "is nil: pass mysql.New, postgres.New or sqlite.New"}
	}
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.HeartbeatInterval = timing.Fill(cfg.LeaseDuration, cfg.RenewDeadline, cfg.HeartbeatInterval)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, timing.DefaultPoll)
	if cfg.DrainTimeout == 0 && cfg.LeaseDuration > cfg.RenewDeadline {
		cfg.DrainTimeout = cfg.LeaseDuration - cfg.RenewDeadline
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 1000)
	cfg.Parallel = cmp.Or(cfg.Parallel, 4)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ID == "" {
		cfg.ID = DefaultID()
	}
	if err := validate(cfg); err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, st: st, keys: map[string]*shared{}, wakeup: map[string]int64{}, poke: make(chan struct{}, 1),
		cand: store.Candidate{ID: cfg.ID, Incarnation: rules.NewIncarnation(), Lease: cfg.LeaseDuration}}
	g.hooks = newHooks(cfg.Hooks)
	g.log = cfg.Logger.With("id", cfg.ID)
	for _, k := range cfg.Keys {
		if rule := rules.NameRule(k); rule != "" {
			return nil, &ConfigError{Field: "Keys", Rule: fmt.Sprintf("holds %q, which %s: fix or drop it", k, rule), err: ErrInvalidKey}
		}
	}
	_ = g.Add(cfg.Keys...) // valid, as checked above
	return g, nil
}

// validate checks cfg once its defaults are filled in, by the rules of Config
// and the group's own.
func validate(cfg GroupConfig) error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Rule: fmt.Sprintf(format, args...)}
	}
	if rule := rules.NameRule(cfg.ID); rule != "" {
		return bad("ID", "%s", rule)
	}
	if err := checkTiming(cfg.LeaseDuration, cfg.RenewDeadline, cfg.HeartbeatInterval, cfg.PollInterval, cfg.DrainTimeout); err != nil {
		return err
	}
	switch {
	case cfg.BatchSize < 1 || cfg.BatchSize > store.MaxBatch:
		return bad("BatchSize", "(%d) must be 1 to %d", cfg.BatchSize, store.MaxBatch)
	case cfg.Parallel < 1:
		return bad("Parallel", "(%d) must be positive: it is how many statements run at once", cfg.Parallel)
	case cfg.Balance && cfg.Priority != 0:
		return bad("Priority", "is %d with Balance: Balance spreads the keys evenly and Priority gathers them on the highest priority: set one of them", cfg.Priority)
	}
	return nil
}

// ID returns the candidate's ID.
func (g *Group) ID() string { return g.cfg.ID }

func (g *Group) shared(key string) *shared {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.keys[key]
}

// IsLeader reports whether this candidate leads key now. Like [Elector.IsLeader], it
// compares the monotonic clock with the key's trust deadline on every call.
func (g *Group) IsLeader(key string) bool {
	sh := g.shared(key)
	return sh != nil && sh.trust.IsLeader()
}

// Token returns the fencing token of the current term of key while IsLeader(key),
// else 0.
func (g *Group) Token(key string) int64 {
	if sh := g.shared(key); sh != nil {
		return sh.trust.Token()
	}
	return 0
}

// Leader returns the leader of key as last observed, "" when released or unknown.
func (g *Group) Leader(key string) string {
	if sh := g.shared(key); sh != nil {
		return sh.leaderID()
	}
	return ""
}

func (sh *shared) leaderID() string {
	if p := sh.leader.Load(); p != nil {
		return *p
	}
	return ""
}

// Lease is a handle on one key of a group. Its IsLeader and Token do what the
// group's do for that key without looking the key up: use it on hot paths. It has
// the methods IsLeader, Token and Leader of an Elector, so it can gate work on one
// key (for instance with contrib/gocron).
type Lease struct {
	sh *shared
}

// Lease returns a handle on key, which must have been added; nil otherwise. The
// handle reports false and 0 after the key is removed, even if it is added again.
func (g *Group) Lease(key string) *Lease {
	if sh := g.shared(key); sh != nil {
		return &Lease{sh: sh}
	}
	return nil
}

// IsLeader reports whether the group leads the key now (see [Group.IsLeader]).
func (l *Lease) IsLeader() bool { return l.sh.trust.IsLeader() }

// Token returns the key's fencing token while IsLeader, else 0.
func (l *Lease) Token() int64 { return l.sh.trust.Token() }

// Leader returns the key's leader as last observed, "" when released or unknown.
func (l *Lease) Leader() string { return l.sh.leaderID() }

// Stats returns the group's counters.
func (g *Group) Stats() GroupStats {
	return GroupStats{
		Leading:    int(g.leading.Load()),
		Statements: g.statements.Load(),
		LostLeases: g.lost.Load(),
		ClockSkew:  time.Duration(g.skew.Load()),
	}
}

// Add makes the group campaign for keys too. Keys that cannot be election keys
// (empty, longer than store.MaxKeyLen, not UTF-8, with a NUL byte or a trailing
// space) are not added: Add returns an error wrapping [ErrInvalidKey] that names
// each of them, and adds the others.
func (g *Group) Add(keys ...string) error {
	var errs []error
	valid := make([]string, 0, len(keys))
	for _, k := range keys {
		if err := rules.ValidateName("key", k); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w: fix or drop it", ErrInvalidKey, err))
			continue
		}
		valid = append(valid, k)
	}
	g.mu.Lock()
	for _, k := range valid {
		if g.keys[k] == nil {
			g.keys[k] = newShared()
		}
	}
	g.mu.Unlock()
	g.reqMu.Lock()
	for _, k := range valid {
		g.ops = append(g.ops, op{key: k, add: true})
	}
	g.reqMu.Unlock()
	g.signal()
	return errors.Join(errs...)
}

// Remove makes the group leave the elections of keys, giving up those it leads (see
// Run).
func (g *Group) Remove(keys ...string) {
	g.reqMu.Lock()
	for _, k := range keys {
		g.ops = append(g.ops, op{key: k})
	}
	g.reqMu.Unlock()
	g.signal()
}

// Pause makes the group stop campaigning: it gives up the keys it leads (see Run)
// and takes none until Resume. Followed keys are still observed.
func (g *Group) Pause() {
	g.paused.Store(true)
	g.signal()
}

// Resume ends a Pause.
func (g *Group) Resume() {
	g.paused.Store(false)
	g.signal()
}

// Wake makes the group read the rows of keys it follows now, as the store's wake-ups do
// when their leases may have been given up.
func (g *Group) Wake(keys ...string) {
	g.reqMu.Lock()
	for _, k := range keys {
		g.wakeup[k] = 0
	}
	g.reqMu.Unlock()
	g.signal()
}

// wakeAt wakes key with the version at which its lease was released (0: unknown).
func (g *Group) wakeAt(key string, version int64) {
	g.reqMu.Lock()
	g.wakeup[key] = version
	g.reqMu.Unlock()
	g.signal()
}

func (g *Group) signal() {
	stream.Poke(g.poke)
}

// Run takes part in the elections until ctx ends, then gives up the keys it leads
// (unless KeepLeaseOnExit) and returns nil.
//
// A term that ends gracefully (Run's end, Remove, Pause, a resign) gives its key
// up with one write: after it has stopped acting and drained, it hands the lease
// to the key's successor, the best live candidate that the last read of the
// key's members showed (highest Priority, then lowest ID; never this candidate,
// a paused one or an observer; a read sent less than members.Fresh ago: a lease
// and a quarter), by the compare-and-set that HandoverTo sends; and releases it
// when none is known. That read is the one the preferred leader rule sends, once
// per members period (a lease; half a lease in a balanced group), of the keys
// led: a term younger than that knows no successor yet.
//
// Database errors are retried; Run returns early only on a deployment error
// (store.ErrDeployment) or when another process acts with the group's ID on one of
// its keys ([ErrDuplicateID]: that key's term is neither acted on nor given up; the
// group's other keys are given up as on exit).
// Run returns after every goroutine it started has exited, or, when a key's
// OnStartedLeading does not return within DrainTimeout after its context was
// cancelled, with an error matching [ErrNotDrained] (that key's lease was not
// released: it expires by itself). A later Run campaigns for the group's keys again.
func (g *Group) Run(ctx context.Context) (err error) {
	r := &engine{g: g, states: map[string]*state{}}
	defer g.begin()()           // last: answers the HandoverTo calls that came too late
	defer g.startMembers(ctx)() // stopped after the leases are released
	defer func() { err = cmp.Or(err, r.stopAll(ctx)) }()
	r.seed(time.Now())
	var nextRenew time.Time
	for {
		r.takeRequests(ctx)
		r.drain(ctx, time.Now())
		r.tick(ctx, time.Now())
		if ctx.Err() != nil {
			return nil
		}
		if now := time.Now(); !now.Before(nextRenew) {
			if err := r.renew(ctx); err != nil {
				return err
			}
			nextRenew = now.Add(r.renewWait())
		}
		if err := r.follow(ctx); err != nil {
			return err
		}
		// Sleep until the next renewal, the next look at a followed key, or the
		// next trust deadline, whichever comes first.
		wake := nextRenew
		for _, s := range r.list {
			if s.m.Leading() {
				wake = minTime(wake, s.m.Deadline())
			} else {
				wake = minTime(wake, s.nextLook)
			}
		}
		for _, d := range r.draining {
			wake = minTime(wake, d.until)
		}
		if d := time.Until(wake); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
			case <-t.C:
			case <-g.poke:
			}
			t.Stop()
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// run is the state of one Run call, owned by its goroutine.
type engine struct {
	g        *Group
	states   map[string]*state
	draining []draining     // ends of terms whose work has not returned yet
	work     sync.WaitGroup // OnStartedLeading goroutines
	woken    []*state       // keys to elect from the version their wake-up carried (Candidate)
	released []*state       // keys woken without a version, to elect if released (Candidate)
	list     []*state       // every key's state, to iterate (states finds them by key)
	order    []*state       // the led keys in the order of the last renewal round
	held     []heldKey      // renew's buffer, kept between rounds
	lim      retry.Limiter  // the warnings of elections that fail or keep losing
	readLim  retry.Limiter  // the warnings of reads that fail
	renewLim retry.Limiter  // the warnings of renewals that fail
	// renewFailures counts the rounds in a row with a renewal that failed.
	renewFailures int
}

// add starts following s.
func (r *engine) add(s *state) {
	s.idx = len(r.list)
	r.states[s.key] = s
	r.list = append(r.list, s)
}

// remove forgets s: the last state takes its place in the list.
func (r *engine) remove(s *state) {
	delete(r.states, s.key)
	last := r.list[len(r.list)-1]
	r.list[s.idx], last.idx = last, s.idx
	r.list[len(r.list)-1] = nil
	r.list = r.list[:len(r.list)-1]
	s.idx = -1
}

// heldKey is a led key with its trust deadline, copied out of its machine so that
// sorting a round's keys reads one contiguous slice.
type heldKey struct {
	deadline time.Time
	s        *state
}

// noteSkew publishes the clock skew shown by one batched read, and warns when it is
// notable.
func (g *Group) noteSkew(s time.Duration) {
	g.skew.Store(int64(s))
	if !timing.SkewNotable(s, g.cfg.LeaseDuration, g.cfg.RenewDeadline) {
		return
	}
	if ok, held := g.skewLim.Allow(); ok {
		g.log.Warn(timing.SkewMessage, "skew", s, "margin", g.cfg.LeaseDuration-g.cfg.RenewDeadline, "warnings_not_logged", held)
	}
}

// draining is the end of a term that waits for its OnStartedLeading to return
// before its release or handover is sent, at most until until.
type draining struct {
	ending
	until time.Time
}

// participation says how the group takes part in the election of s at now. A key
// whose last term's work still runs takes no new term (as if paused) until it
// returns.
func (r *engine) participation(s *state, now time.Time) cas.Participation {
	busy := !s.m.Leading() && s.working()
	p := s.m.Participation(now, r.g.paused.Load() || busy, r.g.cfg.Observer)
	if s.m.Following() {
		p = r.g.campaigns(s, p, now)
	}
	return p
}

// seed follows every key of the group, as Add left them, at the start of a Run:
// a later Run of the same group campaigns again for the keys that an earlier one
// had taken in.
func (r *engine) seed(now time.Time) {
	r.g.mu.RLock()
	keys := make([]string, 0, len(r.g.keys))
	for k := range r.g.keys {
		keys = append(keys, k)
	}
	r.g.mu.RUnlock()
	slices.Sort(keys)
	for _, k := range keys {
		r.addKey(k, now)
	}
}

// takeRequests applies the requests made since the last round, in order: resigns
// and handovers, then Add and Remove, then the store's wake-ups.
func (r *engine) takeRequests(ctx context.Context) {
	g := r.g
	g.reqMu.Lock()
	ops, woken, resigns := g.ops, g.wakeup, g.resigns
	g.ops, g.wakeup, g.resigns = nil, map[string]int64{}, nil
	g.reqMu.Unlock()
	now := time.Now()
	ends := r.takeResigns(resigns, now)
	for _, o := range ops {
		k := o.key
		s := r.states[k]
		switch {
		case o.add && s == nil:
			r.addKey(k, now)
		case !o.add && s != nil:
			if e, ok := r.removeKey(s); ok {
				ends = append(ends, e)
			}
		}
	}
	for k, v := range woken {
		r.takeWakeup(k, v, now)
	}
	r.end(ctx, ends)
}

// takeResigns yields the terms that resigns name and returns their ends to send.
func (r *engine) takeResigns(resigns []op, now time.Time) []ending {
	var ends []ending
	for _, o := range resigns {
		s := r.states[o.key]
		if s != nil && o.any {
			o.token = s.m.Term() // 0 when it follows: then it only cools down
			s.m.CoolDown(now.Add(o.cooldown))
		}
		// Scoped to its term: a term that has ended already is left alone.
		if s == nil || !s.m.Leading() || s.m.Term() != o.token {
			if o.done != nil && o.any {
				o.done <- nil
			} else if o.done != nil {
				o.done <- r.g.notLeading(o.key, "its term ended before the handover")
			}
			continue
		}
		to := cmp.Or(o.to, r.successor(s, now)) // a resign hands the lease on when it can
		level := slog.LevelInfo
		if o.quiet {
			level = slog.LevelDebug // one of many moves that balance the group
		}
		r.g.log.Log(context.Background(), level, "casleader: "+o.why(), "key", o.key, "term", o.token, "handover_to", to)
		var v int64
		if o.any {
			v, _ = s.m.Resign() // an Elector's Resign: its cool-down is set above
		} else {
			v, _ = s.m.Yield(now) // it leads, so it yields, and cools down for a lease
		}
		led := r.stopLeading(s, false)
		cool := cmp.Or(o.cooldown, r.g.cfg.LeaseDuration)
		ends = append(ends, ending{s: s, token: o.token, version: v, to: to, done: o.done, led: led, cooldown: cool})
	}
	return ends
}

// why says, for the log, who asked for the end of a term.
func (o op) why() string {
	switch {
	case o.reason != "":
		return o.reason
	case o.to != "" && o.done != nil:
		return "handing the key over: HandoverTo asked"
	case o.done != nil:
		return "resigning: Resign asked"
	default:
		return "resigning: the term's handle asked"
	}
}

// addKey starts following key k (an Add).
func (r *engine) addKey(k string, now time.Time) {
	g := r.g
	g.mu.Lock()
	sh := g.keys[k]
	if sh == nil {
		sh = newShared()
		g.keys[k] = sh
	}
	g.mu.Unlock()
	s := &state{key: k, sh: sh, m: cas.New(g.cand, g.cfg.RenewDeadline), nextLook: now}
	s.m.ElectsReleased(true) // every store.Driver has ElectReleased
	if g.resume != 0 {
		s.m.Resume(g.resume)
	}
	s.unsubscribe = g.st.Subscribe(k, g.cfg.ID, func(v int64) { g.wakeAt(k, v) })
	r.add(s)
}

// removeKey stops following s (a Remove) and returns the release to send, if s was
// leading.
func (r *engine) removeKey(s *state) (ending, bool) {
	g := r.g
	r.remove(s)
	g.mu.Lock()
	if g.keys[s.key] == s.sh {
		delete(g.keys, s.key)
	}
	g.mu.Unlock()
	if s.unsubscribe != nil {
		s.unsubscribe()
	}
	e, ok := r.resign(s)
	s.sh.stream.Close() // the key's listeners end, after its term stopped acting
	return e, ok
}

// takeWakeup acts on a wake-up of key k by the store, with the released version
// v (0: unknown).
func (r *engine) takeWakeup(k string, v int64, now time.Time) {
	s := r.states[k]
	if s == nil || !s.m.Following() {
		return
	}
	if len(r.released) >= r.g.cfg.Parallel && (v == 0 || v == notify.HandedOver) {
		// Many keys woken without a version at once (a leader gave many up):
		// one statement each would queue; one batched read, then batched
		// elections, cost two round trips for all of them.
		s.nextLook = minTime(s.nextLook, now)
		return
	}
	// A release that carries its version is elected from at once; one without
	// it, and a handover to this candidate, by an election that wins only a
	// released row or one handed to it (the machine decides); anything else is
	// read now.
	s.m.Named(r.g.named.Load())
	switch d := s.m.Woken(v, r.participation(s, now), s.failures); d.Action {
	case cas.Campaign:
		r.woken = append(r.woken, s)
	case cas.CampaignReleased:
		r.released = append(r.released, s)
	default:
		// A read now, or a little later (a handover to another candidate), never
		// later than it was due.
		if at := now.Add(d.Wait); at.Before(s.nextLook) {
			s.nextLook = at
		}
	}
}

// tick asks every leading key's machine what the passing of time means: a passed
// trust deadline ends the term, a pause or observer mode releases it.
func (r *engine) tick(ctx context.Context, now time.Time) {
	var ends []ending
	for _, s := range r.list {
		if !s.m.Leading() {
			continue
		}
		switch d := s.m.Tick(now, r.participation(s, now)); d.Action {
		case cas.StepDown:
			r.stepDown(s, s.token, now, "no renewal succeeded within the renew deadline")
		case cas.Release:
			if e, ok := r.resign(s); ok {
				ends = append(ends, e)
			}
		}
	}
	r.end(ctx, ends)
}

// startLeading publishes a term that the key's machine has just decided to lead,
// unless its trust deadline has passed by now (the reply came too late).
func (r *engine) startLeading(ctx context.Context, s *state, now time.Time) {
	if s.m.DeadlinePassed(now).Action == cas.StepDown {
		r.g.log.Warn("casleader: not leading: the reply came after the renew deadline", "key", s.key)
		s.nextLook = now
		return
	}
	s.sh.trust.Set(s.m.Term(), s.m.Deadline())
	starts := !s.led
	if starts {
		s.led, s.token = true, s.m.Term()
		r.g.tell(r.g.hooks.started, s.key, s.token, nil)
		token := s.token
		s.sh.stream.Publish(func(st *Status) { st.Leading, st.Token, st.Leader = true, token, r.g.cfg.ID })
	}
	r.renewed(s)
	r.observeLeader(s, r.g.cfg.ID)
	if !starts {
		return
	}
	r.g.leading.Add(1)
	r.g.log.Debug("casleader: became leader", "key", s.key, "term", s.token)
	r.g.st.Leading(s.key, s.token, true)
	if f := r.g.cfg.OnChange; f != nil {
		f(s.key, true, s.token)
	}
	if f := r.g.cfg.OnStartedLeading; f != nil {
		r.startWork(ctx, s, f)
	}
}

// startWork runs f, the leader's work for the term just started on s, on a
// goroutine of its own with the term's leadership context: cancelled when the term
// ends, at the latest at its trust deadline (by a timer, so that a Run goroutine
// held up in a statement never stretches it).
func (r *engine) startWork(ctx context.Context, s *state, f func(context.Context, string, int64)) {
	g, key, token := r.g, s.key, s.token
	lctx, cancel := context.WithCancel(term.With(context.WithoutCancel(ctx), g.term(key, token, s.sh)))
	s.cancel = cancel
	s.expiry = time.AfterFunc(time.Until(s.m.Deadline()), cancel)
	done := make(chan struct{})
	s.work = done
	r.work.Add(1)
	go func() {
		defer r.work.Done()
		defer g.Wake(key) // the key may take part again
		defer close(done)
		defer g.crashOnPanic(key, token)
		f(lctx, key, token)
	}()
}

// crashOnPanic, deferred around OnStartedLeading, logs a panic with the key, the
// term and the stack, then panics again: the process crashes, and its leases
// expire by themselves, as with an Elector.
func (g *Group) crashOnPanic(key string, token int64) {
	if v := recover(); v != nil {
		g.log.Error("casleader: callback panicked; the process crashes and its leases expire by themselves",
			"callback", "OnStartedLeading", "key", key, "term", token, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		panic(v)
	}
}

// resignTerm asks Run to end the term token of key (a term handle's Resign).
func (g *Group) resignTerm(key string, token int64) {
	g.request(op{key: key, token: token})
}

// publish publishes the trust deadline of a key whose machine goes on leading, and
// moves the expiry of its leadership context with it. It returns false when that
// expiry has cancelled the context already (a hair before the machine's
// deadline): the term has ended then, and the machine is told so.
func (r *engine) publish(s *state) bool {
	if s.expiry != nil && !s.expiry.Stop() {
		s.m.DeadlinePassed(s.m.Deadline())
		return false
	}
	s.sh.trust.Set(s.m.Term(), s.m.Deadline())
	if s.expiry != nil {
		s.expiry.Reset(time.Until(s.m.Deadline()))
	}
	r.renewed(s)
	return true
}

// stopLeading unpublishes a term whose machine has stepped down or resigned, and
// reports it (lost: other than by release). It returns whether the term had been
// reported started; a lost one is reported stopped to the hooks once its work has
// returned, a released one once its release was sent (ended).
func (r *engine) stopLeading(s *state, lost bool) bool {
	s.sh.trust.Clear()
	if s.cancel != nil {
		s.expiry.Stop()
		s.cancel()
		s.cancel, s.expiry = nil, nil
	}
	s.sh.stream.Publish(func(st *Status) { st.Leading, st.Token = false, 0 })
	if !s.led {
		return false
	}
	s.led = false
	r.g.leading.Add(-1)
	if lost {
		r.g.lost.Add(1)
		r.g.st.Leading(s.key, s.token, false)
		r.lapse(s, s.token)
	}
	if f := r.g.cfg.OnChange; f != nil {
		f(s.key, false, s.token)
	}
	return true
}

// stepDown ends the term token of s, lost for why, and reads the key at now.
func (r *engine) stepDown(s *state, token int64, now time.Time, why string) {
	r.g.log.Warn("casleader: stepping down: "+why, "key", s.key, "term", token)
	r.stopLeading(s, true)
	s.nextLook = now
}

// observeLeader records id as the leader of s observed, and tells the hooks when
// it changed (a first sighting of no leader is no change).
func (r *engine) observeLeader(s *state, id string) {
	old := s.sh.leader.Load()
	if old != nil && *old == id {
		return
	}
	s.sh.leader.Store(&id)
	if old != nil || id != "" {
		s.sh.stream.Publish(func(st *Status) { st.Leader = id })
		r.g.tell(r.g.hooks.leader, s.key, 0, func(ev *Event) { ev.Leader = id })
	}
}

// ending is a term that has stopped acting and whose lease is to be released
// (to == "") or handed to to, from version; done, when not nil, gets the outcome
// (see op).
type ending struct {
	s       *state
	token   int64
	version int64
	to      string
	led     bool // the term was reported started: its end is reported to the hooks
	nowrite bool // nothing to send: the end only waits for the term's work
	told    bool // the Notifier was told of the end already
	// cooldown, after a resign or handover, keeps the key out of its elections
	// this long from the end (as from the request).
	cooldown time.Duration
	done     chan<- error
}

// resign stops a leading key acting at once and returns the release to send, or
// the handover to the key's successor when one is known (see successor).
func (r *engine) resign(s *state) (ending, bool) {
	token := s.m.Term()
	v, ok := s.m.Resign()
	led := r.stopLeading(s, false)
	if !ok && led {
		r.lapse(s, token) // the lease is not held: nothing to release
	}
	e := ending{s: s, token: token, version: v, to: r.successor(s, time.Now()), led: led}
	if ok && e.to != "" {
		r.g.log.Debug("casleader: handing the key to its successor as the term ends", "key", s.key, "term", token, "handover_to", e.to)
	}
	return e, ok
}

// readFailed retries the reads of ss, which failed with err at now, after a
// backoff that doubles up to the poll interval, and reports the failure at most
// once per retry.LogEvery (an invalid row at Error level).
func (r *engine) readFailed(ctx context.Context, ss []*state, err error, now time.Time) {
	attempts := 0
	for _, s := range ss {
		s.failures++
		attempts = max(attempts, s.failures)
		s.nextLook = now.Add(retry.Backoff(s.failures, electionBackoff, r.g.cfg.PollInterval))
	}
	if errors.Is(err, store.ErrDeployment) || ctx.Err() != nil { // Run's end, or fatal: said once by Run
		return
	}
	level := slog.LevelWarn
	if errors.Is(err, store.ErrInvalidRow) {
		level = slog.LevelError
	}
	if ok, held := r.readLim.Allow(); ok {
		r.g.log.Log(ctx, level, "casleader: reading the election row failed, retrying",
			keysAttr(ss, "error", err, "attempt", attempts, "failures_not_logged", held)...)
	}
}

// electionBackoff is the first wait after an election write or a read that failed
// or lost; the waits double up to the poll interval.
const electionBackoff = 50 * time.Millisecond

// keysAttr returns the log attributes that name the keys of ss (the key, or how
// many keys when several), then attrs.
func keysAttr(ss []*state, attrs ...any) []any {
	if len(ss) == 1 {
		return append([]any{"key", ss[0].key}, attrs...)
	}
	return append([]any{"keys", len(ss)}, attrs...)
}

// electionsFailed reports, at most once per retry.LogEvery, election writes of ss
// that failed (err) or keep losing although their rows looked free.
func (r *engine) electionsFailed(ss []*state, err error) {
	if errors.Is(err, store.ErrDeployment) {
		return
	}
	attempts := 0
	for _, s := range ss {
		attempts = max(attempts, s.failures)
	}
	if err == nil && attempts < 2 {
		return // lost once: another candidate won the race, as elections do
	}
	if ok, held := r.lim.Allow(); ok {
		msg := "casleader: election failed; the next read settles it"
		if err == nil {
			msg = "casleader: election writes keep losing although the row looks free: check the row and the database clock"
		}
		attrs := []any{"attempt", attempts, "failures_not_logged", held}
		if err != nil {
			attrs = append(attrs, "error", err)
		}
		r.g.log.Warn(msg, keysAttr(ss, attrs...)...)
	}
}

// parallel runs send for each job on at most Parallel goroutines, and apply for
// each job and its reply on the caller's goroutine, as replies arrive. It returns
// the first deployment or duplicate-ID error that apply returns.
func parallel[T, R any](r *engine, jobs []T, send func(T) R, apply func(T, R) error) error {
	if len(jobs) == 0 {
		return nil
	}
	in := make(chan T, len(jobs))
	for _, j := range jobs {
		in <- j
	}
	close(in)
	type reply struct {
		job T
		res R
	}
	out := make(chan reply, len(jobs))
	var wg sync.WaitGroup
	for range min(r.g.cfg.Parallel, len(jobs)) {
		wg.Go(func() {
			for j := range in {
				out <- reply{j, send(j)}
			}
		})
	}
	var fatal error
	for range jobs {
		rep := <-out
		if err := apply(rep.job, rep.res); errors.Is(err, store.ErrDeployment) || errors.Is(err, ErrDuplicateID) {
			fatal = cmp.Or(fatal, err)
		}
	}
	wg.Wait()
	return fatal
}

// kvBatch is a batch of keys with the versions to write from.
type kvBatch struct {
	ss       []*state
	kvs      []store.KeyVersion
	deadline time.Time // the earliest trust deadline among ss (renewals)
}

// keyBatch is a batch of keys to read or insert.
type keyBatch struct {
	ss   []*state
	keys []string
}

// keyBatches splits ss into batches of at most size keys, to read or insert.
func keyBatches(ss []*state, size int) []keyBatch {
	var out []keyBatch
	for b := range slices.Chunk(ss, size) {
		out = append(out, keyBatch{ss: b, keys: stateKeys(b)})
	}
	return out
}

// kvBatches splits ss into batches of at most BatchSize keys, each with the
// version its machine holds, to write from.
func (r *engine) kvBatches(ss []*state) []kvBatch {
	var out []kvBatch
	for b := range slices.Chunk(ss, r.g.cfg.BatchSize) {
		j := kvBatch{ss: b, kvs: make([]store.KeyVersion, len(b))}
		for i, s := range b {
			j.kvs[i] = store.KeyVersion{Key: s.key, Version: s.m.Version()}
		}
		out = append(out, j)
	}
	return out
}

// endVersions returns the keys of es with the versions their ends write from.
func endVersions(es []ending) []store.KeyVersion {
	kvs := make([]store.KeyVersion, len(es))
	for i, e := range es {
		kvs[i] = store.KeyVersion{Key: e.s.key, Version: e.version}
	}
	return kvs
}

// wonReply is the reply to one write: the keys whose compare-and-set won.
type wonReply struct {
	won map[string]store.Won
	stmt
}

type readReply struct {
	recs map[string]store.Record
	stmt
}

// observeMany reads the rows of b under a timeout.
func (r *engine) observeMany(ctx context.Context, b keyBatch, timeout time.Duration) readReply {
	recs, st := timed(r, ctx, time.Now().Add(timeout), func(ctx context.Context) (map[string]store.Record, error) {
		return detector.Read(ctx, r.g.st, b.keys)
	})
	return readReply{recs: recs, stmt: st}
}

// write sends one write under ctx, until deadline when it is not zero, and
// returns the keys it won.
func (r *engine) write(ctx context.Context, deadline time.Time, send func(context.Context) ([]store.Won, error)) wonReply {
	won, st := timed(r, ctx, deadline, send)
	rep := wonReply{won: make(map[string]store.Won, len(won)), stmt: st}
	for _, w := range won {
		rep.won[w.Key] = w
	}
	return rep
}

// timed sends one statement under ctx, until deadline when it is not zero, and
// times it for the hooks.
func timed[T any](r *engine, ctx context.Context, deadline time.Time, send func(context.Context) (T, error)) (T, stmt) {
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	st := stmt{sent: time.Now()}
	v, err := send(ctx)
	st.done(ctx, err)
	r.g.statements.Add(1)
	return v, st
}

// renew renews every led key, in batches, and settles the keys whose renewal lost or
// failed with one batched read.
func (r *engine) renew(ctx context.Context) error {
	jobs := r.kvBatches(r.renewOrder())
	for i, j := range jobs {
		jobs[i].deadline = j.ss[0].m.Deadline() // sorted: the batch's earliest
	}
	var unsettled, failed []*state
	var failure error
	err := parallel(r, jobs, func(j kvBatch) wonReply {
		return r.write(ctx, j.deadline, func(ctx context.Context) ([]store.Won, error) {
			return heartbeat.Renew(ctx, r.g.st, r.g.cfg.ID, j.kvs)
		})
	}, func(j kvBatch, rep wonReply) error {
		lost, err := r.renewReply(ctx, j, rep)
		unsettled = append(unsettled, lost...)
		if rep.err != nil {
			failed, failure = append(failed, j.ss...), cmp.Or(failure, rep.err)
		}
		return err
	})
	r.renewRound(ctx, failed, failure)
	if err != nil {
		return err
	}
	return r.settle(ctx, unsettled)
}

// renewRound ends a round of renewals in which the renewals of failed had an
// unknown outcome (err, the first): it counts the rounds in a row with such a
// failure, which back the next rounds off (renewWait), and reports them at most
// once per retry.LogEvery.
func (r *engine) renewRound(ctx context.Context, failed []*state, err error) {
	if len(failed) == 0 {
		r.renewFailures = 0 // every renewal of the round had an answer
		return
	}
	r.renewFailures++
	if errors.Is(err, store.ErrDeployment) || ctx.Err() != nil { // fatal, said once by Run; or Run ending
		return
	}
	if ok, held := r.renewLim.Allow(); ok {
		r.g.log.Warn("casleader: renewal failed, retrying", keysAttr(failed, "error", err, "attempt", r.renewFailures,
			"retry_in", r.renewWait(), "failures_not_logged", held)...)
	}
}

// renewWait is the time from one round of renewals to the next: the heartbeat
// interval, or after a round with a renewal that failed (an unknown outcome) a
// backoff from 10 ms up to half of it, so that a transient error (a deadlock, a
// serialization failure, a reset connection) costs little of the trust deadline.
func (r *engine) renewWait() time.Duration {
	if r.renewFailures == 0 {
		return r.g.cfg.HeartbeatInterval
	}
	return retry.Renewal(r.renewFailures, r.g.cfg.HeartbeatInterval)
}

// renewOrder returns the led keys in the order to renew them, and keeps it in
// r.order for the next round.
func (r *engine) renewOrder() []*state {
	// Earliest trust deadline first: when a round of renewals takes long (many keys,
	// a busy database), each key is still renewed about once per round, in the order
	// of its last renewal, instead of at a random place in each round (up to two
	// rounds apart). The deadlines are copied once into a reused buffer (comparing
	// them through each key's machine cost a third of a 100,000-key leader's CPU),
	// in the order of the last round, which renewed them in about this order: the
	// sort finds them nearly sorted.
	r.held = r.held[:0]
	for _, s := range r.order {
		if s.idx >= 0 && s.m.Leading() {
			r.held = append(r.held, heldKey{deadline: s.m.Deadline(), s: s})
		} else {
			s.ordered = false
		}
	}
	for _, s := range r.list {
		if !s.ordered && s.m.Leading() {
			s.ordered = true
			r.held = append(r.held, heldKey{deadline: s.m.Deadline(), s: s})
		}
	}
	slices.SortFunc(r.held, func(a, b heldKey) int { return a.deadline.Compare(b.deadline) })
	clear(r.order)
	r.order = r.order[:0]
	for _, h := range r.held {
		r.order = append(r.order, h.s)
	}
	clear(r.held) // keeps no state alive past its key
	return r.order
}

// renewReply applies the reply to the renewal of batch j and returns the keys to
// settle: all of them when the renewal failed, else those that lost.
func (r *engine) renewReply(ctx context.Context, j kvBatch, rep wonReply) ([]*state, error) {
	now := time.Now()
	r.wrote("renew", j.ss, rep)
	if rep.err != nil {
		// The write may have committed: the machine remembers it, and a retry
		// that then loses its compare-and-set is settled by one read. Until
		// then the trust deadline stands.
		for _, s := range j.ss {
			s.m.RenewalFailed(true)
		}
		return nil, rep.err
	}
	var lost []*state
	for i, s := range j.ss {
		w, ok := rep.won[s.key]
		if !ok {
			s.m.RenewalFailed(false) // lost its compare-and-set
			lost = append(lost, s)
			continue
		}
		d := s.m.RenewReply(j.kvs[i].Version+1, w.Since, now)
		if d.Action == cas.Lead && !r.publish(s) {
			d.Action = cas.StepDown
		}
		if d.Action == cas.StepDown {
			r.stepDown(s, s.token, now, "the renewal's reply came after the renew deadline")
		}
	}
	return lost, nil
}

// settleTimeout bounds the read that settles batch b: it ends at the earliest trust
// deadline of its keys, since a read that returns later keeps no key's trust, and a
// read that hangs (a reset or stalled connection) must not hold up the next
// renewals. A batch whose deadline has passed gets one heartbeat interval, so the
// read still finds what became of its keys.
func (r *engine) settleTimeout(b keyBatch) time.Duration {
	cfg := r.g.cfg
	var earliest time.Time
	for _, s := range b.ss {
		if d := s.m.Deadline(); !d.IsZero() && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	if earliest.IsZero() {
		return cfg.RenewDeadline
	}
	return min(max(time.Until(earliest), cfg.HeartbeatInterval), cfg.RenewDeadline)
}

// settle reads the rows of led keys whose renewal lost or had an unknown outcome,
// and does what each key's machine decides: go on leading, step down, or release or
// hand over the key as a step-down request in the row asks.
func (r *engine) settle(ctx context.Context, ss []*state) error {
	g := r.g
	var ends []ending
	var dup error
	err := parallel(r, keyBatches(ss, g.cfg.BatchSize), func(b keyBatch) readReply {
		return r.observeMany(ctx, b, r.settleTimeout(b))
	}, func(b keyBatch, rep readReply) error {
		r.observed(b, rep)
		if rep.err != nil {
			if !errors.Is(rep.err, store.ErrDeployment) {
				g.log.Warn("casleader: reading the election row to settle a renewal failed; the trust deadline stands", keysAttr(b.ss, "error", rep.err)...)
			}
			return rep.err // keep the deadlines: they pass by themselves
		}
		now := time.Now()
		for _, s := range b.ss {
			rec, found := rep.recs[s.key]
			token := s.m.Term()
			d := s.m.SettledAt(rec, found, rep.sent, now)
			if d.Action == cas.Lead && !r.publish(s) {
				d.Action = cas.StepDown
			}
			switch d.Action {
			case cas.StepDown:
				why := "the lease was taken over or the renew deadline passed"
				if d.Err != nil {
					why = d.Err.Error()
				}
				r.stepDown(s, token, now, why)
				if found {
					r.observeLeader(s, rec.LeaderID)
				}
			case cas.Refuse:
				// Not released: the lease is the other process's too.
				g.log.Error("casleader: duplicate candidate ID: another process acts with this ID; stepping down without releasing",
					"key", s.key, "term", token, "error", d.Err)
				r.stopLeading(s, true)
				r.observeLeader(s, rec.LeaderID)
				s.nextLook = now
				dup = cmp.Or(dup, d.Err)
			case cas.Release, cas.Handover:
				g.log.Info("casleader: step-down requested", "key", s.key, "term", token, "handover_to", d.To)
				v, _ := s.m.Yield(now)
				led := r.stopLeading(s, false)
				ends = append(ends, ending{s: s, token: token, version: v, to: d.To, led: led})
			}
		}
		return nil
	})
	r.end(ctx, ends)
	return cmp.Or(dup, err)
}

// follow reads the followed keys that are due, and does what each key's machine
// decides: campaign (insert a missing row, elect from a released or expired one),
// adopt a lease of ours, or wait.
func (r *engine) follow(ctx context.Context) error {
	g := r.g
	now := time.Now()
	if err := r.campaignWoken(ctx); err != nil {
		return err
	}
	due, ready := r.dueKeys(now)
	if !ready {
		return nil
	}
	slices.SortFunc(due, func(a, b *state) int { return cmp.Compare(a.key, b.key) })
	// Half of the rounds of reads wait for the leaders' next renewals rather than
	// the whole wait (timing.ReadAfterRenewal), every key of the round alike:
	// keys due close together are read together, so a round that mixed the two
	// would read them all at the earlier time.
	rd := &readRound{afterRenewal: rand.N(2) == 0}
	err := parallel(r, keyBatches(due, g.cfg.BatchSize), func(b keyBatch) readReply {
		return r.observeMany(ctx, b, g.cfg.RenewDeadline)
	}, func(b keyBatch, rep readReply) error {
		return r.followReply(ctx, rd, b, rep)
	})
	if err = cmp.Or(rd.dup, err); err != nil {
		return err
	}
	return r.campaign(ctx, rd.create, rd.elect, rd.confirm)
}

// readRound is what the replies of one round of reads of follow decided.
type readRound struct {
	afterRenewal bool // time the round's next reads after the leaders' renewals
	create       []*state
	elect        []*state
	confirm      []*state
	dup          error // the first duplicate candidate ID found
}

// campaignWoken campaigns for the keys woken since the last round, without a read.
func (r *engine) campaignWoken(ctx context.Context) error {
	if len(r.woken) > 0 {
		// Elected from the version their wake-up carried, without a read.
		woken := r.woken
		r.woken = nil
		if err := r.campaign(ctx, nil, woken, nil); err != nil {
			return err
		}
	}
	if len(r.released) > 0 {
		// Woken without a version, or as a handover's target: elected if released
		// or handed to us, without a read.
		released := r.released
		r.released = nil
		if err := r.electReleased(ctx, released); err != nil {
			return err
		}
	}
	return nil
}

// dueKeys returns the followed keys to read at now, and whether one is due already.
func (r *engine) dueKeys(now time.Time) (due []*state, ready bool) {
	g := r.g
	// Keys due within half a heartbeat are read with those due now: per-key jitter
	// must not split the batches.
	soon := now.Add(min(g.cfg.HeartbeatInterval, g.cfg.PollInterval) / 2)
	for _, s := range r.list {
		if s.m.Following() && !soon.Before(s.nextLook) {
			due = append(due, s)
			ready = ready || !now.Before(s.nextLook)
		}
	}
	return due, ready
}

// followReply applies the reply to the read of batch b in round rd.
func (r *engine) followReply(ctx context.Context, rd *readRound, b keyBatch, rep readReply) error {
	g := r.g
	now := time.Now()
	r.observed(b, rep)
	if rep.err != nil {
		r.readFailed(ctx, b.ss, rep.err, now)
		return rep.err
	}
	var skew time.Duration
	for _, s := range b.ss {
		rec, found := rep.recs[s.key]
		if found {
			r.observeLeader(s, rec.LeaderID)
			g.st.Observed(s.key, rec)
		} else {
			r.observeLeader(s, "")
		}
		s.seenFree(!found || rec.Released() || rec.Expired(g.cfg.LeaseDuration), now)
		d := s.m.ObservedReply(rec, found, rep.sent, rep.sent.Add(rep.took), r.participation(s, now))
		k := s.m.Skew(rep.sent)
		if max(k, -k) > max(skew, -skew) {
			skew = k
		}
		r.noteKeySkew(s, k)
		r.foreign(s, rec)
		r.followDecision(ctx, rd, s, d, rec, found, now)
	}
	g.noteSkew(skew)
	return nil
}

// followDecision does what the machine of s decided, at now, on reading rec.
func (r *engine) followDecision(ctx context.Context, rd *readRound, s *state, d cas.Decision, rec store.Record, found bool, now time.Time) {
	g := r.g
	switch d.Action {
	case cas.Refuse:
		g.log.Error("casleader: duplicate candidate ID: another process leads with this ID; not acting on its term",
			"key", s.key, "term", rec.Term, "error", d.Err)
		rd.dup = cmp.Or(rd.dup, d.Err)
		s.nextLook = now.Add(g.cfg.PollInterval)
	case cas.Create:
		rd.create = append(rd.create, s)
	case cas.Campaign:
		rd.elect = append(rd.elect, s)
	case cas.Confirm:
		rd.confirm = append(rd.confirm, s)
	case cas.Lead:
		// Our own live lease: an election whose reply was lost, or a lease
		// handed to us by name.
		r.startLeading(ctx, s, now)
	default:
		s.failures = 0 // a live lease: the database and we agree
		wait := min(d.Wait, g.cfg.PollInterval)
		if wait <= 0 {
			wait = g.cfg.PollInterval
		}
		if rd.afterRenewal {
			wait = timing.ReadAfterRenewal(rec, found, g.cfg.HeartbeatInterval, wait)
		}
		// From the reply, not the send: a read timed for the lease's
		// expiry then reaches the database after it, whatever this
		// read's delay on the way there was.
		s.nextLook = now.Add(wait + jitter(g.cfg.PollInterval))
	}
}

// foreign logs the first sighting of a live lease under the group's ID in a term
// that the key's machine does not own (it never adopts it, and refuses it if it
// is renewed): after a restart with the same ID, the earlier run's lease expires.
func (r *engine) foreign(s *state, rec store.Record) {
	if l := s.m.LeaseSighting(rec); l != 0 {
		r.g.log.Warn(timing.LeaseMessage, "key", s.key, "leader", rec.LeaderID, "lease_row", l, "lease", r.g.cfg.LeaseDuration)
	}
	if term := s.m.ForeignSighting(rec); term != 0 && !r.g.cfg.Observer {
		r.g.log.Warn("casleader: the row names this candidate's ID in a term this process did not win; not adopting it, waiting for it to expire",
			"key", s.key, "term", term, "version", rec.Version)
	}
}

// jitter is a small random delay so that a herd of followers does not read in
// lockstep.
func jitter(poll time.Duration) time.Duration {
	return rand.N(min(poll/20, 10*time.Millisecond) + 1)
}

// campaign inserts the missing rows of create, elects from the versions of elect
// (the ones their machines decided on) and renews the resumed terms of confirm. A
// key won is led in the term the store reports, which is also the row's new
// version: its fencing token and the version its first renewal is made from.
func (r *engine) campaign(ctx context.Context, create, elect, confirm []*state) error {
	g := r.g
	err := r.writeFrom(ctx, "insert", create, func(ctx context.Context, kvs []store.KeyVersion) ([]store.Won, error) {
		keys := make([]string, len(kvs))
		for i, kv := range kvs {
			keys[i] = kv.Key
		}
		return detector.Insert(ctx, g.st, g.cand, keys)
	}, func(s *state, term int64, won bool, sent time.Time) cas.Decision {
		return s.m.Created(term, won, sent)
	})
	if err != nil {
		return err
	}
	err = r.writeFrom(ctx, "elect", elect, func(ctx context.Context, kvs []store.KeyVersion) ([]store.Won, error) {
		return detector.Elect(ctx, g.st, g.cand, kvs)
	}, elected)
	if err != nil {
		return err
	}
	// Resumed terms, led once a renewal from the version read confirms them.
	return r.writeFrom(ctx, "renew", confirm, func(ctx context.Context, kvs []store.KeyVersion) ([]store.Won, error) {
		return heartbeat.Renew(ctx, g.st, g.cfg.ID, kvs)
	}, func(s *state, _ int64, won bool, sent time.Time) cas.Decision {
		return s.m.Confirmed(won, sent)
	})
}

// writeFrom sends write for the keys ss, in batches, each from the version its
// machine holds, and hands the replies to their machines with won (see applyWon).
func (r *engine) writeFrom(ctx context.Context, name string, ss []*state,
	write func(context.Context, []store.KeyVersion) ([]store.Won, error),
	won func(s *state, term int64, won bool, sent time.Time) cas.Decision) error {
	return parallel(r, r.kvBatches(ss), func(j kvBatch) wonReply {
		return r.write(ctx, time.Now().Add(r.g.cfg.RenewDeadline), func(ctx context.Context) ([]store.Won, error) {
			return write(ctx, j.kvs)
		})
	}, func(j kvBatch, rep wonReply) error {
		r.wrote(name, j.ss, rep)
		return r.applyWon(ctx, j.ss, rep, won)
	})
}

// electReleased sends, for each key woken without a version or as a handover's
// target, the store's election that wins only a released row or one handed to this
// candidate: one statement per key (wake-ups come one key at a time), Parallel at
// once.
func (r *engine) electReleased(ctx context.Context, ss []*state) error {
	g := r.g
	return parallel(r, ss, func(s *state) wonReply {
		return r.write(ctx, time.Now().Add(g.cfg.RenewDeadline), func(ctx context.Context) ([]store.Won, error) {
			sent := time.Now()
			term, ok, err := g.st.ElectReleased(ctx, s.key, g.cand)
			if !ok || err != nil {
				return nil, err
			}
			return []store.Won{{Key: s.key, Term: term, Since: sent}}, nil
		})
	}, func(s *state, rep wonReply) error {
		ss := []*state{s}
		r.wrote("elect released", ss, rep)
		err := r.applyWon(ctx, ss, rep, elected)
		if rep.err == nil && len(rep.won) == 0 && s.m.Following() {
			// Lost: the row is neither released nor handed to us. The wake-up
			// announced something else (a handover to another, on a store whose
			// wake-ups cannot say so: a MySQL named lock) or nothing: read the row
			// now, as the wake-up asked, rather than after an election's backoff
			// (50 ms); a read decides, so nothing loops.
			s.nextLook = time.Now()
		}
		return err
	})
}

// elected hands a key's election reply to its machine (for applyWon).
func elected(s *state, term int64, won bool, sent time.Time) cas.Decision {
	return s.m.Elected(term, won, sent)
}

// applyWon hands the reply of an election or insert of the keys ss to their machines:
// won, lost, or unknown (an error: the next read settles it).
func (r *engine) applyWon(ctx context.Context, ss []*state, rep wonReply, won func(s *state, term int64, won bool, sent time.Time) cas.Decision) error {
	g := r.g
	now := time.Now()
	for _, s := range ss {
		w, ok := rep.won[s.key]
		switch {
		case rep.err != nil:
			// Unknown outcome: the next read settles it (an own lease is adopted).
			s.m.Unsettled()
		case ok:
			d := won(s, w.Term, true, w.Since)
			if d.Action == cas.Lead {
				s.failures = 0
				r.startLeading(ctx, s, now)
				continue
			}
			if d.Err != nil {
				g.log.Error("casleader: not leading: "+d.Err.Error(), "key", s.key, "error", d.Err)
			}
		default:
			won(s, 0, false, rep.sent) // lost
		}
		// Lost, unknown, or without a term: look again soon; an own lease is
		// adopted then, with the row's term. Soon, but never in a tight loop:
		// a row that keeps looking free to reads and refusing writes is read
		// after waits that double up to the poll interval.
		s.failures++
		s.nextLook = now.Add(retry.Backoff(s.failures, electionBackoff, g.cfg.PollInterval) + jitter(g.cfg.PollInterval))
	}
	r.electionsFailed(ss, rep.err)
	return rep.err
}

// end sends the releases and handovers of terms that have stopped acting: batched
// releases, handovers batched by target, under a short timeout that outlives Run's context.
// A write that lost its compare-and-set or failed is settled by one batched read,
// and sent again from the version read while the key's machine says so.
//
// A term whose OnStartedLeading still runs waits for it first (see drain).
func (r *engine) end(ctx context.Context, es []ending) {
	now := time.Now()
	var ready []ending
	for _, e := range es {
		if e.s.working() {
			r.draining = append(r.draining, draining{ending: e, until: now.Add(r.g.cfg.DrainTimeout)})
			continue
		}
		ready = append(ready, e)
	}
	r.send(ctx, ready)
}

// drain sends the releases and handovers of the terms whose work has returned,
// and gives up those of the terms whose work did not return within DrainTimeout:
// releasing them would let the next leader start while that work may still act,
// so their leases expire by themselves.
func (r *engine) drain(ctx context.Context, now time.Time) {
	if len(r.draining) == 0 {
		return
	}
	var ready []ending
	keep := r.draining[:0]
	for _, d := range r.draining {
		switch {
		case !d.s.working() && d.nowrite:
			r.ended(d.ending, nil)
		case !d.s.working():
			ready = append(ready, d.ending)
		case !now.Before(d.until) && d.nowrite:
			r.ended(d.ending, nil)
		case !now.Before(d.until):
			r.g.log.Error("casleader: not releasing the lease: OnStartedLeading is still running after DrainTimeout; the lease expires by itself",
				"key", d.s.key, "term", d.token, "drain_timeout", r.g.cfg.DrainTimeout, "handover_to", d.to)
			r.ended(d.ending, r.g.notDrained(d.ending))
		default:
			keep = append(keep, d)
		}
	}
	r.draining = keep
	r.send(ctx, ready)
}

// send sends the releases and handovers of es, whose terms have stopped acting and
// whose work has returned.
func (r *engine) send(ctx context.Context, es []ending) {
	if len(es) == 0 {
		return
	}
	g := r.g
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(releaseTimeout, g.cfg.LeaseDuration))
	defer cancel()
	for attempt := 0; len(es) > 0; attempt++ {
		lost, lastErr := r.sendOnce(wctx, es)
		if len(lost) == 0 {
			return
		}
		if attempt == 2 {
			g.log.Warn("casleader: release failed; the leases expire by themselves", "keys", len(lost), "error", lastErr)
			for _, e := range lost {
				r.ended(e, handoverFailed(e, lastErr))
			}
			return
		}
		es = r.resendFrom(wctx, lost, lastErr)
	}
}

// handovers are the ends of terms given up to one target (none: released) in one
// statement.
type handovers struct {
	to store.Candidate
	es []ending
}

// op names the statement of h for the Call hooks.
func (h handovers) op() string {
	if h.to.ID == "" {
		return "release"
	}
	return "handover"
}

// sendOnce sends the releases and handovers of es under wctx, batched by target
// (none for a release; for a handover the candidate and, when a read of the key's
// members showed it, its incarnation: see shared.target), at most BatchSize keys a
// statement. It returns those that lost their compare-and-set or failed, with the
// last error.
func (r *engine) sendOnce(wctx context.Context, es []ending) (lost []ending, lastErr error) {
	g := r.g
	byTo := map[store.Candidate][]ending{}
	var tos []store.Candidate
	now := time.Now()
	for _, e := range es {
		var to store.Candidate
		if e.to != "" {
			to = e.s.sh.target(e.to, now, g.cfg.LeaseDuration)
		}
		if byTo[to] == nil {
			tos = append(tos, to)
		}
		byTo[to] = append(byTo[to], e)
	}
	var batches []handovers
	for _, to := range tos {
		for b := range slices.Chunk(byTo[to], g.cfg.BatchSize) {
			batches = append(batches, handovers{to: to, es: b})
		}
	}
	_ = parallel(r, batches, func(h handovers) wonReply {
		return r.write(wctx, time.Time{}, func(ctx context.Context) ([]store.Won, error) {
			return heartbeat.Release(ctx, g.st, g.cfg.ID, h.to, endVersions(h.es))
		})
	}, func(h handovers, rep wonReply) error {
		r.wroteEnds(h.op(), h.es, rep)
		for _, e := range h.es {
			if w, ok := rep.won[e.s.key]; ok && rep.err == nil {
				e.s.m.Released(cmp.Or(w.Term, e.version+1), true, e.to) // a release's: the next version
				r.observeLeader(e.s, e.to)
				r.ended(e, nil)
				continue
			}
			lastErr = cmp.Or(rep.err, lastErr)
			lost = append(lost, e)
		}
		return nil
	})
	return lost, lastErr
}

// resendFrom settles the ends that lost or failed and returns those to send again,
// each from the version its machine says.
func (r *engine) resendFrom(wctx context.Context, lost []ending, lastErr error) []ending {
	g := r.g
	// A lost compare-and-set or an error may hide a write of ours that committed
	// (a renewal whose reply was lost) or a step-down request: read the rows and
	// let each machine say whether to try again, and from which version.
	ss := make([]*state, len(lost))
	for i, e := range lost {
		ss[i] = e.s
	}
	reads := map[*state]readReply{}
	_ = parallel(r, keyBatches(ss, g.cfg.BatchSize), func(b keyBatch) readReply {
		return r.observeMany(wctx, b, releaseTimeout)
	}, func(b keyBatch, rep readReply) error {
		r.observed(b, rep)
		for _, s := range b.ss {
			reads[s] = rep
		}
		return nil
	})
	var es []ending
	for _, e := range lost {
		rep := reads[e.s]
		if rep.err != nil {
			g.log.Warn("casleader: release failed; the lease expires by itself", "key", e.s.key, "error", cmp.Or(lastErr, rep.err))
			r.ended(e, handoverFailed(e, cmp.Or(lastErr, rep.err)))
			continue
		}
		rec, found := rep.recs[e.s.key]
		if from, retry := e.s.m.RetryFrom(e.token, e.version, rec, found); retry {
			e.version = from
			es = append(es, e)
			continue
		}
		e.s.m.Released(0, false, e.to)
		if found {
			r.observeLeader(e.s, rec.LeaderID)
		}
		g.log.Warn("casleader: release lost its compare-and-set; the row had moved on", "key", e.s.key, "handover_to", e.to)
		r.ended(e, g.notLeading(e.s.key, "the row had moved on (taken over, or changed by a step-down request) before the handover was written"))
	}
	return es
}

// ended tells the store's wake-ups that a term whose lease was to be given up has ended:
// after its release or handover write returned, so that woken followers find the
// row free. It answers the HandoverTo call that asked for e, if any, with err.
func (r *engine) ended(e ending, err error) {
	if e.cooldown > 0 {
		e.s.m.CoolDown(time.Now().Add(e.cooldown))
	}
	if !e.told {
		r.g.st.Leading(e.s.key, e.token, false)
	}
	if e.led {
		r.g.tell(r.g.hooks.stopped, e.s.key, e.token, nil)
	}
	if e.done != nil {
		e.done <- err
	}
}

// stopAll ends every term when Run returns: stop acting first, drain (each term at
// most DrainTimeout), then release; and waits at most DrainTimeout for the work of
// terms that ended before. It returns an error matching ErrNotDrained when some
// work did not return.
func (r *engine) stopAll(ctx context.Context) error {
	var ends []ending
	to := r.g.exitTargets()
	for _, s := range r.list {
		if s.m.Leading() {
			if e, ok := r.resign(s); ok {
				e.to = cmp.Or(to[s.key], e.to)
				ends = append(ends, e)
			}
		}
	}
	if r.g.cfg.KeepLeaseOnExit {
		for _, e := range ends {
			r.ended(ending{s: e.s, token: e.token}, nil) // the Notifier, at once: no write follows
			if e.led {
				r.lapse(e.s, e.token) // the hooks, once its work has returned
			}
		}
	} else {
		r.end(ctx, ends)
	}
	for {
		r.drain(ctx, time.Now())
		if len(r.draining) == 0 {
			break
		}
		until := r.draining[0].until
		for _, d := range r.draining {
			until = minTime(until, d.until)
		}
		t := time.NewTimer(time.Until(until))
		select {
		case <-r.g.poke: // a work returned (or a request came, ignored now)
		case <-t.C:
		}
		t.Stop()
	}
	// Only now that every release has returned: the last unsubscription stops the
	// listener, and a MySQL listener that stops gives up the named locks of the
	// keys it led, which wakes their followers. Before the releases, those
	// followers would find the rows still leased and fall back to reading them.
	for _, s := range r.list {
		if s.unsubscribe != nil {
			s.unsubscribe()
		}
	}
	return r.waitWork()
}

// waitWork waits at most DrainTimeout for the leader's work of every term this
// Run started, and returns an error matching ErrNotDrained when some still runs.
func (r *engine) waitWork() error {
	work := make(chan struct{})
	go func() {
		r.work.Wait()
		close(work)
	}()
	t := time.NewTimer(r.g.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-work:
		return nil
	case <-t.C:
		r.g.log.Error("casleader: Run returns while OnStartedLeading still runs: it did not return within DrainTimeout after its context was cancelled; its lease was not released",
			"drain_timeout", r.g.cfg.DrainTimeout)
		return fmt.Errorf("%w: Run returns while it still runs, and its lease was not released (it expires by itself): make OnStartedLeading return when its context is cancelled",
			ErrNotDrained)
	}
}
