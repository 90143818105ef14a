// Package group runs one candidate in many elections at once, with batched
// statements: one statement renews up to BatchSize leases, one reads up to BatchSize
// rows, each with a per-key compare-and-set outcome (store.RenewMany, ObserveMany,
// ElectMany, InsertMany, ReleaseMany). A process that leads 10,000 keys with a 1 s
// heartbeat sends about 10,000 / BatchSize renewal statements per second instead of
// 10,000.
//
// Per key the protocol is the one of package casleader: a leader trusts a key until
// the renew deadline after the send time of its last winning write (on MySQL, where
// the outcome is read back, a time no later than the write's execution); a follower
// takes a key over only by a compare-and-set that requires the lease to have expired
// by the database clock. All keys that one Group leads renew together, every
// HeartbeatInterval; keys it follows are read when the lease observed on them can
// expire, at least every PollInterval.
//
// One goroutine (Run's) owns the election state; IsLeader and Token are safe for
// concurrent use and do no I/O. The Store interface has five methods rather than the
// house style's one to three: the batched calls are one unit, and the SQL stores of
// package store implement all five.
package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/store"
)

// Store is what a Group needs: the batched methods of the stores of package store.
// InsertMany and ElectMany report each key won with its new term in store.Won.Term,
// above the version it was won from; the term is also the row's new version.
type Store interface {
	ObserveMany(ctx context.Context, keys []string) (map[string]store.Record, error)
	InsertMany(ctx context.Context, id string, keys []string) ([]store.Won, error)
	ElectMany(ctx context.Context, id string, from []store.KeyVersion, lease time.Duration) ([]store.Won, error)
	RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error)
	ReleaseMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error)
}

// ErrInvalidConfig is returned by [New] for a configuration that cannot be safe.
var ErrInvalidConfig = errors.New("group: invalid config")

// Config configures a [Group]. Zero values get the defaults given per field.
type Config struct {
	// ID names this candidate in every election of the group. Required.
	ID string
	// Keys are the elections to take part in from the start; see also [Group.Add].
	Keys []string
	// LeaseDuration, RenewDeadline, HeartbeatInterval and PollInterval mean what
	// they mean in casleader.Config, with the same defaults (15 s, 10 s, 2 s, 5 s) and
	// the same rule HeartbeatInterval < RenewDeadline < LeaseDuration.
	LeaseDuration, RenewDeadline, HeartbeatInterval, PollInterval time.Duration
	// BatchSize is the largest number of keys in one statement. Default 1000, at
	// most store.MaxBatch.
	BatchSize int
	// Parallel is how many batched statements run at once. Keep it below the pool
	// size. Default 4.
	Parallel int
	// KeepLeaseOnExit keeps the leases when Run's context ends instead of releasing them.
	KeepLeaseOnExit bool
	// OnChange is called from Run's goroutine when this candidate starts (leading
	// true, with the term's fencing token) or stops leading key. It must return quickly.
	OnChange func(key string, leading bool, token int64)
	// Logger receives role changes (Debug per key, Info per summary), renewal
	// failures (Warn). nil means discard.
	Logger *slog.Logger
}

// Stats are counters of a group's work since New.
type Stats struct {
	Leading         int           // keys led now
	Statements      int64         // batched calls made (a MySQL write is two statements)
	RenewBatches    int64         // RenewMany calls
	RenewLatencyMax time.Duration // slowest RenewMany call
	RenewLatencySum time.Duration // total time in RenewMany calls
	LostLeases      int64         // keys whose leadership ended other than by release
}

// Group is one candidate in many elections. Create it with [New], run it with [Group.Run].
type Group struct {
	cfg  Config
	st   Store
	base time.Time

	mu   sync.RWMutex
	keys map[string]*shared // every key of the group, for IsLeader and Token

	reqMu sync.Mutex
	ops   []op // Add and Remove requests, in order
	poke  chan struct{}

	statements, renewBatches, lost atomic.Int64
	renewMax, renewSum             atomic.Int64
	leading                        atomic.Int64
}

// op is one key added (add) or removed.
type op struct {
	key string
	add bool
}

// shared is the part of a key's state that IsLeader reads.
type shared struct {
	trust atomic.Int64 // trust deadline in ns since base; 0 when not leading
	term  atomic.Int64
}

// state is a key's election state, owned by Run's goroutine.
type state struct {
	key      string
	sh       *shared
	leading  bool
	version  int64
	term     int64
	highest  int64 // highest term seen in a row or won
	deadline time.Time
	nextLook time.Time
	failures int // election writes in a row that did not win a row that looked free
}

// New validates cfg and returns a group on st. It does no I/O.
func New(st Store, cfg Config) (*Group, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: Store is nil", ErrInvalidConfig)
	}
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, 15*time.Second)
	cfg.RenewDeadline = cmp.Or(cfg.RenewDeadline, 10*time.Second)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, 2*time.Second)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, 5*time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 1000)
	cfg.Parallel = cmp.Or(cfg.Parallel, 4)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case cfg.ID == "" || len(cfg.ID) > store.MaxKeyLen:
		return nil, bad("ID must be 1 to %d bytes", store.MaxKeyLen)
	case cfg.LeaseDuration < 0 || cfg.RenewDeadline < 0 || cfg.HeartbeatInterval < 0 || cfg.PollInterval < 0:
		return nil, bad("durations must not be negative")
	case cfg.RenewDeadline >= cfg.LeaseDuration:
		return nil, bad("RenewDeadline (%v) must be less than LeaseDuration (%v)", cfg.RenewDeadline, cfg.LeaseDuration)
	case cfg.HeartbeatInterval >= cfg.RenewDeadline:
		return nil, bad("HeartbeatInterval (%v) must be less than RenewDeadline (%v)", cfg.HeartbeatInterval, cfg.RenewDeadline)
	case cfg.BatchSize < 1 || cfg.BatchSize > store.MaxBatch:
		return nil, bad("BatchSize (%d) must be 1 to %d", cfg.BatchSize, store.MaxBatch)
	case cfg.Parallel < 1:
		return nil, bad("Parallel (%d) must be positive", cfg.Parallel)
	}
	g := &Group{cfg: cfg, st: st, base: time.Now().Add(-time.Nanosecond), keys: map[string]*shared{}, poke: make(chan struct{}, 1)}
	g.Add(cfg.Keys...)
	return g, nil
}

// ID returns the candidate's ID.
func (g *Group) ID() string { return g.cfg.ID }

// IsLeader reports whether this candidate leads key now. Like casleader's, it
// compares the monotonic clock with the key's trust deadline on every call.
func (g *Group) IsLeader(key string) bool {
	g.mu.RLock()
	sh := g.keys[key]
	g.mu.RUnlock()
	if sh == nil {
		return false
	}
	d := sh.trust.Load()
	return d != 0 && int64(time.Since(g.base)) < d
}

// Token returns the fencing token of the current term of key while IsLeader(key),
// else 0.
func (g *Group) Token(key string) int64 {
	g.mu.RLock()
	sh := g.keys[key]
	g.mu.RUnlock()
	if sh == nil {
		return 0
	}
	t := sh.term.Load()
	if !g.IsLeader(key) {
		return 0
	}
	return t
}

// Lease is a handle on one key of a group. Its IsLeader and Token do what the
// group's do for that key without looking the key up: use it on hot paths.
type Lease struct {
	g  *Group
	sh *shared
}

// Lease returns a handle on key, which must have been added; nil otherwise. The
// handle reports false and 0 after the key is removed, even if it is added again.
func (g *Group) Lease(key string) *Lease {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if sh := g.keys[key]; sh != nil {
		return &Lease{g: g, sh: sh}
	}
	return nil
}

// IsLeader reports whether the group leads the key now (see [Group.IsLeader]).
func (l *Lease) IsLeader() bool {
	d := l.sh.trust.Load()
	return d != 0 && int64(time.Since(l.g.base)) < d
}

// Token returns the key's fencing token while IsLeader, else 0.
func (l *Lease) Token() int64 {
	t := l.sh.term.Load()
	if !l.IsLeader() {
		return 0
	}
	return t
}

// Stats returns the group's counters.
func (g *Group) Stats() Stats {
	return Stats{
		Leading:         int(g.leading.Load()),
		Statements:      g.statements.Load(),
		RenewBatches:    g.renewBatches.Load(),
		RenewLatencyMax: time.Duration(g.renewMax.Load()),
		RenewLatencySum: time.Duration(g.renewSum.Load()),
		LostLeases:      g.lost.Load(),
	}
}

// Add makes the group campaign for keys too. Invalid keys are reported by the store
// and make their batch fail: validate keys before adding them.
func (g *Group) Add(keys ...string) {
	g.mu.Lock()
	for _, k := range keys {
		if g.keys[k] == nil {
			g.keys[k] = &shared{}
		}
	}
	g.mu.Unlock()
	g.reqMu.Lock()
	for _, k := range keys {
		g.ops = append(g.ops, op{key: k, add: true})
	}
	g.reqMu.Unlock()
	g.signal()
}

// Remove makes the group leave the elections of keys, releasing those it leads.
func (g *Group) Remove(keys ...string) {
	g.reqMu.Lock()
	for _, k := range keys {
		g.ops = append(g.ops, op{key: k})
	}
	g.reqMu.Unlock()
	g.signal()
}

func (g *Group) signal() {
	select {
	case g.poke <- struct{}{}:
	default:
	}
}

// Run takes part in the elections until ctx ends, then releases the keys it leads
// (unless KeepLeaseOnExit) and returns nil. Database errors are retried; Run returns
// early only on a deployment error (store.ErrDeployment).
func (g *Group) Run(ctx context.Context) error {
	r := &run{g: g, states: map[string]*state{}}
	defer r.stopAll(ctx)
	lastRenew := time.Time{}
	for {
		r.takeRequests(ctx)
		now := time.Now()
		r.expire(now)
		if ctx.Err() != nil {
			return nil
		}
		if !now.Before(lastRenew.Add(g.cfg.HeartbeatInterval)) {
			lastRenew = now
			if err := r.renew(ctx); err != nil {
				return err
			}
		}
		if err := r.follow(ctx); err != nil {
			return err
		}
		// Sleep until the next renewal, the next look at a followed key, or the
		// next trust deadline, whichever comes first.
		wake := lastRenew.Add(g.cfg.HeartbeatInterval)
		for _, s := range r.states {
			if s.leading {
				wake = minTime(wake, s.deadline)
			} else {
				wake = minTime(wake, s.nextLook)
			}
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

// run is the state of one Run call.
type run struct {
	g      *Group
	states map[string]*state
}

func (r *run) takeRequests(ctx context.Context) {
	g := r.g
	g.reqMu.Lock()
	ops := g.ops
	g.ops = nil
	g.reqMu.Unlock()
	now := time.Now()
	var release []*state
	for _, o := range ops {
		k := o.key
		s := r.states[k]
		switch {
		case o.add && s == nil:
			g.mu.Lock()
			sh := g.keys[k]
			if sh == nil {
				sh = &shared{}
				g.keys[k] = sh
			}
			g.mu.Unlock()
			r.states[k] = &state{key: k, sh: sh, nextLook: now}
		case !o.add && s != nil:
			delete(r.states, k)
			g.mu.Lock()
			if g.keys[k] == s.sh {
				delete(g.keys, k)
			}
			g.mu.Unlock()
			if s.leading {
				r.stopLeading(s, false)
				release = append(release, s)
			}
		}
	}
	r.release(ctx, release)
}

// expire steps down from keys whose trust deadline has passed.
func (r *run) expire(now time.Time) {
	for _, s := range r.states {
		if s.leading && !now.Before(s.deadline) {
			r.g.cfg.Logger.Warn("casleader group: stepping down: no renewal succeeded within the renew deadline", "key", s.key, "term", s.term)
			r.stopLeading(s, true)
			s.nextLook = now
		}
	}
}

func (r *run) startLeading(s *state, version, term int64, deadline time.Time) {
	s.leading, s.version, s.term, s.deadline = true, version, term, deadline
	s.highest = max(s.highest, term)
	s.sh.term.Store(term)
	s.sh.trust.Store(max(int64(deadline.Sub(r.g.base)), 1))
	r.g.leading.Add(1)
	r.g.cfg.Logger.Debug("casleader group: became leader", "key", s.key, "term", term)
	if f := r.g.cfg.OnChange; f != nil {
		f(s.key, true, term)
	}
}

func (r *run) stopLeading(s *state, lost bool) {
	if !s.leading {
		return
	}
	s.sh.trust.Store(0)
	s.leading = false
	r.g.leading.Add(-1)
	if lost {
		r.g.lost.Add(1)
	}
	if f := r.g.cfg.OnChange; f != nil {
		f(s.key, false, s.term)
	}
}

func (r *run) extend(s *state, since time.Time) {
	if d := since.Add(r.g.cfg.RenewDeadline); d.After(s.deadline) {
		s.deadline = d
		s.sh.trust.Store(max(int64(d.Sub(r.g.base)), 1))
	}
}

// chunks splits items into batches of at most BatchSize.
func chunks[T any](items []T, size int) [][]T {
	var out [][]T
	for len(items) > size {
		out = append(out, items[:size])
		items = items[size:]
	}
	if len(items) > 0 {
		out = append(out, items)
	}
	return out
}

// parallel runs f for each batch, at most Parallel at once, and returns the first
// deployment error.
func parallel[T any](r *run, batches [][]T, f func(batch []T) error) error {
	var (
		wg    sync.WaitGroup
		sem   = make(chan struct{}, r.g.cfg.Parallel)
		mu    sync.Mutex
		fatal error
	)
	for _, b := range batches {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(b); errors.Is(err, store.ErrDeployment) {
				mu.Lock()
				fatal = cmp.Or(fatal, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return fatal
}

// renew renews every led key, in batches, and settles the keys whose renewal lost or
// failed with one batched read.
func (r *run) renew(ctx context.Context) error {
	g := r.g
	var held []*state
	for _, s := range r.states {
		if s.leading {
			held = append(held, s)
		}
	}
	if len(held) == 0 {
		return nil
	}
	var mu sync.Mutex
	var unsettled []*state
	err := parallel(r, chunks(held, g.cfg.BatchSize), func(batch []*state) error {
		kvs := make([]store.KeyVersion, len(batch))
		earliest := batch[0].deadline
		for i, s := range batch {
			kvs[i] = store.KeyVersion{Key: s.key, Version: s.version}
			earliest = minTime(earliest, s.deadline)
		}
		rctx, cancel := context.WithDeadline(ctx, earliest)
		start := time.Now()
		won, err := g.st.RenewMany(rctx, g.cfg.ID, kvs)
		cancel()
		took := time.Since(start)
		g.statements.Add(1)
		g.renewBatches.Add(1)
		g.renewSum.Add(int64(took))
		for {
			old := g.renewMax.Load()
			if int64(took) <= old || g.renewMax.CompareAndSwap(old, int64(took)) {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if !errors.Is(err, store.ErrDeployment) {
				g.cfg.Logger.Warn("casleader group: batched renewal failed; settling", "keys", len(batch), "error", err)
			}
			unsettled = append(unsettled, batch...)
			return err
		}
		byKey := make(map[string]time.Time, len(won))
		for _, w := range won {
			byKey[w.Key] = w.Since
		}
		for _, s := range batch {
			if since, ok := byKey[s.key]; ok {
				s.version++
				r.extend(s, since)
			} else {
				unsettled = append(unsettled, s)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return r.settle(ctx, unsettled)
}

// settle reads the rows of led keys whose renewal lost or had an unknown outcome:
// a row that still names this candidate with its term is adopted (the write
// committed, or a step-down request bumped the version), anything else ends the term.
func (r *run) settle(ctx context.Context, ss []*state) error {
	if len(ss) == 0 {
		return nil
	}
	g := r.g
	var mu sync.Mutex
	var release []*state
	err := parallel(r, chunks(ss, g.cfg.BatchSize), func(batch []*state) error {
		keys := make([]string, len(batch))
		for i, s := range batch {
			keys[i] = s.key
		}
		rctx, cancel := context.WithTimeout(ctx, g.cfg.RenewDeadline)
		sent := time.Now()
		recs, err := g.st.ObserveMany(rctx, keys)
		cancel()
		g.statements.Add(1)
		if err != nil {
			return err // keep the deadlines: they pass by themselves
		}
		mu.Lock()
		defer mu.Unlock()
		for _, s := range batch {
			rec, ok := recs[s.key]
			if !ok || rec.LeaderID != g.cfg.ID || rec.Term != s.term {
				g.cfg.Logger.Warn("casleader group: stepping down: the lease was taken over", "key", s.key, "term", s.term)
				r.stopLeading(s, true)
				r.observed(s, rec, ok, sent)
				continue
			}
			s.version = rec.Version
			r.extend(s, sent.Add(-rec.Age))
			if rec.StepDown {
				r.stopLeading(s, false)
				release = append(release, s)
			}
		}
		return nil
	})
	r.release(ctx, release)
	return err
}

// observed schedules the next look at a followed key from a row read at sent.
func (r *run) observed(s *state, rec store.Record, found bool, sent time.Time) {
	g := r.g
	wait := g.cfg.PollInterval
	if found {
		s.version = rec.Version
		s.highest = max(s.highest, rec.Term)
		if !rec.Expired(g.cfg.LeaseDuration) {
			wait = min(wait, rec.Remaining(g.cfg.LeaseDuration))
		}
	}
	s.nextLook = sent.Add(wait + rand.N(min(g.cfg.PollInterval/20, 10*time.Millisecond)+1))
}

// follow reads the followed keys that are due, and campaigns for those whose lease
// is free: inserts for missing rows, elections for released or expired ones.
func (r *run) follow(ctx context.Context) error {
	g := r.g
	now := time.Now()
	var due []*state
	ready := false
	// Keys due within half a heartbeat are read with those due now: per-key jitter
	// must not split the batches.
	soon := now.Add(min(g.cfg.HeartbeatInterval, g.cfg.PollInterval) / 2)
	for _, s := range r.states {
		if !s.leading && !soon.Before(s.nextLook) {
			due = append(due, s)
			ready = ready || !now.Before(s.nextLook)
		}
	}
	if !ready {
		return nil
	}
	slices.SortFunc(due, func(a, b *state) int { return cmp.Compare(a.key, b.key) })
	var mu sync.Mutex
	var create, elect []*state
	err := parallel(r, chunks(due, g.cfg.BatchSize), func(batch []*state) error {
		keys := make([]string, len(batch))
		for i, s := range batch {
			keys[i] = s.key
		}
		rctx, cancel := context.WithTimeout(ctx, g.cfg.RenewDeadline)
		sent := time.Now()
		recs, err := g.st.ObserveMany(rctx, keys)
		cancel()
		g.statements.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if !errors.Is(err, store.ErrDeployment) {
				g.cfg.Logger.Warn("casleader group: batched read failed, retrying", "keys", len(batch), "error", err)
			}
			for _, s := range batch {
				s.nextLook = time.Now().Add(min(g.cfg.PollInterval, time.Second))
			}
			return err
		}
		for _, s := range batch {
			rec, found := recs[s.key]
			// A row whose term is below one seen before was rolled back by a failover
			// that lost writes: a lease of ours in it is a revived term, not adopted.
			revived := found && rec.Term < s.highest
			switch {
			case !found:
				create = append(create, s)
			case rec.LeaderID == g.cfg.ID && rec.Age < g.cfg.RenewDeadline && !revived:
				// Our own live lease: an election whose reply was lost.
				r.startLeading(s, rec.Version, rec.Term, sent.Add(g.cfg.RenewDeadline-rec.Age))
			case rec.Expired(g.cfg.LeaseDuration):
				s.version = rec.Version
				elect = append(elect, s)
			default:
				s.failures = 0 // a live lease: the database and we agree
				r.observed(s, rec, true, sent)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return r.campaign(ctx, create, elect)
}

// campaign inserts the missing rows of create and elects from the versions of elect.
// A key won is led in the term the store reports, which is also the row's new
// version: its fencing token and the version its first renewal is made from.
func (r *run) campaign(ctx context.Context, create, elect []*state) error {
	g := r.g
	var mu sync.Mutex
	// after settles a batch; from is the version a key was won from (0 for a
	// missing row), which its new term must be above.
	after := func(batch []*state, won []store.Won, err error, from func(*state) int64) {
		mu.Lock()
		defer mu.Unlock()
		byKey := make(map[string]store.Won, len(won))
		for _, w := range won {
			byKey[w.Key] = w
		}
		for _, s := range batch {
			if w, ok := byKey[s.key]; ok && err == nil {
				if w.Term > from(s) {
					s.failures = 0
					r.startLeading(s, w.Term, w.Term, w.Since.Add(g.cfg.RenewDeadline))
					continue
				}
				g.cfg.Logger.Error("casleader group: the store reported a key won without a new term; not leading it until its row is read: the Store must set store.Won.Term",
					"key", s.key, "term", w.Term, "from", from(s))
			}
			// Lost, unknown, or without a term: look again soon; an own lease is
			// adopted then, with the row's term. Soon, but never in a tight loop:
			// a row that keeps looking free to reads and refusing writes is read
			// after waits that double up to the poll interval.
			s.failures++
			s.nextLook = time.Now().Add(retry.Backoff(s.failures, 10*time.Millisecond, g.cfg.PollInterval))
		}
	}
	err := parallel(r, chunks(create, g.cfg.BatchSize), func(batch []*state) error {
		keys := make([]string, len(batch))
		for i, s := range batch {
			keys[i] = s.key
		}
		rctx, cancel := context.WithTimeout(ctx, g.cfg.RenewDeadline)
		won, err := g.st.InsertMany(rctx, g.cfg.ID, keys)
		cancel()
		g.statements.Add(1)
		after(batch, won, err, func(*state) int64 { return 0 })
		return err
	})
	if err != nil {
		return err
	}
	return parallel(r, chunks(elect, g.cfg.BatchSize), func(batch []*state) error {
		kvs := make([]store.KeyVersion, len(batch))
		for i, s := range batch {
			kvs[i] = store.KeyVersion{Key: s.key, Version: s.version}
		}
		rctx, cancel := context.WithTimeout(ctx, g.cfg.RenewDeadline)
		won, err := g.st.ElectMany(rctx, g.cfg.ID, kvs, g.cfg.LeaseDuration)
		cancel()
		g.statements.Add(1)
		after(batch, won, err, func(s *state) int64 { return s.version })
		return err
	})
}

// release gives up the leases of ss (which have stopped leading already), in batches,
// under a short timeout that outlives Run's context.
func (r *run) release(ctx context.Context, ss []*state) {
	if len(ss) == 0 {
		return
	}
	g := r.g
	_ = parallel(r, chunks(ss, g.cfg.BatchSize), func(batch []*state) error {
		kvs := make([]store.KeyVersion, len(batch))
		for i, s := range batch {
			kvs[i] = store.KeyVersion{Key: s.key, Version: s.version}
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(5*time.Second, g.cfg.LeaseDuration))
		_, err := g.st.ReleaseMany(rctx, g.cfg.ID, kvs)
		cancel()
		g.statements.Add(1)
		if err != nil {
			g.cfg.Logger.Warn("casleader group: release failed; the leases expire by themselves", "keys", len(batch), "error", err)
		}
		now := time.Now()
		for _, s := range batch {
			s.nextLook = now.Add(g.cfg.LeaseDuration) // let another candidate win
		}
		return nil
	})
}

// stopAll ends every term when Run returns: stop acting first, then release.
func (r *run) stopAll(ctx context.Context) {
	var release []*state
	for _, s := range r.states {
		if s.leading {
			r.stopLeading(s, false)
			release = append(release, s)
		}
	}
	if !r.g.cfg.KeepLeaseOnExit {
		r.release(ctx, release)
	}
}
