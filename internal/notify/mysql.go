package notify

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/internal/stream"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// lockTimeout bounds a statement on a lock connection beyond the wait it asks
// the server for: a reply that a cut link dropped never comes, and the connection
// stays open.
const lockTimeout = 5 * time.Second

// releaseLock releases the named lock name held on conn, within lockTimeout.
func releaseLock(ctx context.Context, conn *sql.Conn, name string) error {
	ctx, cancel := context.WithTimeout(ctx, lockTimeout)
	defer cancel()
	_, err := conn.ExecContext(ctx, `DO RELEASE_LOCK(?)`, name)
	return err
}

// MySQLConfig configures [NewMySQL]. Zero values get the defaults given per field.
type MySQLConfig struct {
	// DB is the pool the notifier takes its dedicated connections from: one for the
	// locks this process holds, one per key followed. Required.
	DB *sql.DB
	// Table is the election table, spelled as the stores are given it; it namespaces
	// the lock names. Default schema.DefaultTable.
	Table string
	// WaitTimeout bounds one GET_LOCK wait of a follower, after which it waits again.
	// Whole seconds. Default 30 s.
	WaitTimeout time.Duration
	// GaleraCheckInterval is, on a Galera node, how often a follower that waits on a
	// lock also reads the row (see [MySQL]): named locks are local to a node, so a
	// release on another node is found by that read. Whole seconds. Default 1 s.
	GaleraCheckInterval time.Duration
	// Logger receives connection failures. nil means discard.
	Logger *slog.Logger
	// Hub receives the wake-ups. nil means a hub of the notifier's own; a store's
	// built-in wake-ups pass theirs.
	Hub *Hub
	// MaxWaiters bounds the followed keys waited on at once, each on a connection of
	// DB: the keys above it are woken by their followers' polls only. 0 means no
	// bound.
	MaxWaiters int
}

// MySQL wakes followers through named locks (see the package doc): the [Listener]
// of a MySQL store. Create it with [NewMySQL] and run [MySQL.Run].
//
// On a Galera cluster named locks are local to a node: a leader's lock wakes only
// the followers connected to the same node. The notifier detects a Galera node
// (wsrep_on = ON) on its first follower connection, says so once at Warn level
// ([MySQL.Galera] reports it), and then also reads the row of each key it follows
// every GaleraCheckInterval while it waits: a release or a new term written on
// another node wakes the follower within that interval (plus the node's
// replication delay) instead of a poll interval.
type MySQL struct {
	cfg MySQLConfig
	hub *Hub
	tbl string // the quoted table

	galera       atomic.Int32 // 0: not known yet, 1: no, 2: a Galera node
	galeraWarned atomic.Bool

	mu     sync.Mutex
	armed  map[string]int64 // key -> term of the live leader a follower waits on
	rearm  map[string]chan struct{}
	lead   map[string]int64 // key -> term this process leads
	change chan struct{}    // wakes the lock holder (latest only)

	woken atomic.Int64
}

// NewMySQL validates cfg and returns a notifier. It does no I/O.
func NewMySQL(cfg MySQLConfig) (*MySQL, error) {
	if cfg.DB == nil {
		return nil, fmt.Errorf("%w: notify: MySQLConfig.DB is nil", store.ErrInvalidArgument)
	}
	cfg.Table = cmp.Or(cfg.Table, schema.DefaultTable)
	if err := ident.ValidateTable(cfg.Table); err != nil {
		return nil, err
	}
	quoted, err := ident.Quote(schema.MySQL, cfg.Table)
	if err != nil {
		return nil, err
	}
	cfg.WaitTimeout = max(cmp.Or(cfg.WaitTimeout, 30*time.Second).Round(time.Second), time.Second)
	cfg.GaleraCheckInterval = max(cmp.Or(cfg.GaleraCheckInterval, time.Second).Round(time.Second), time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &MySQL{
		cfg:    cfg,
		hub:    cmp.Or(cfg.Hub, NewHub()),
		tbl:    quoted,
		armed:  map[string]int64{},
		rearm:  map[string]chan struct{}{},
		lead:   map[string]int64{},
		change: make(chan struct{}, 1),
	}, nil
}

// Table returns the election table whose locks the notifier holds and waits on.
func (m *MySQL) Table() string { return m.cfg.Table }

// LockName returns the name of the lock that the leader of key in term holds.
func (m *MySQL) LockName(key string, term int64) string {
	h := sha256.Sum256([]byte(m.cfg.Table + "\x00" + key))
	return "casleader:" + hex.EncodeToString(h[:16]) + ":" + strconv.FormatInt(term, 10)
}

// Subscribe calls wake when the leader of key releases its lock, with
// [HandedOver]: a lock carries no version, and the lease may have been released
// or handed over to any follower (see the package doc).
func (m *MySQL) Subscribe(key string, wake func(version int64)) (unsubscribe func()) {
	return m.hub.Subscribe(key, wake)
}

// SubscribeAs is [MySQL.Subscribe]: a lock granted does not tell a handover's target
// from the other followers, so id is not used.
func (m *MySQL) SubscribeAs(key, _ string, wake func(version int64)) (unsubscribe func()) {
	return m.hub.Subscribe(key, wake)
}

// Announce does nothing: the leader's lock, released by Leading, announces a
// release.
func (m *MySQL) Announce(string, int64) {}

// AnnounceHandover does nothing: a handover releases the lock too (Leading).
func (m *MySQL) AnnounceHandover(string, string) {}

// Listening reports true: a lock waiter cannot tell whether it would be woken.
func (m *MySQL) Listening() bool { return true }

// Observed arms the follower of key on the lock of the term it saw, or disarms it
// when the lease is released.
func (m *MySQL) Observed(key string, rec store.Record) {
	term := rec.Term
	if rec.Released() {
		term = 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lead[key] == term && term != 0 {
		term = 0 // our own lease
	}
	if m.armed[key] == term {
		return
	}
	m.armed[key] = term
	if ch := m.rearm[key]; ch != nil {
		stream.Poke(ch)
	}
}

// Leading makes the lock holder take (leading) or release the lock of key and term.
func (m *MySQL) Leading(key string, term int64, leading bool) {
	m.mu.Lock()
	if leading {
		m.lead[key] = term
		if m.armed[key] != 0 { // a leader does not wait on anybody's lock
			m.armed[key] = 0
			if ch := m.rearm[key]; ch != nil {
				stream.Poke(ch)
			}
		}
	} else if m.lead[key] == term {
		delete(m.lead, key)
	}
	m.mu.Unlock()
	stream.Poke(m.change)
}

// Woken returns how many wake-ups lock grants (and, on Galera, row reads) have
// caused.
func (m *MySQL) Woken() int64 { return m.woken.Load() }

// Galera reports whether the server of a follower connection was found to be a
// Galera node, where named locks do not cross nodes (see [MySQL]).
func (m *MySQL) Galera() bool { return m.galera.Load() == 2 }

// detectGalera asks the server of conn, once per notifier, whether it is a Galera
// node, and warns once if it is.
func (m *MySQL) detectGalera(ctx context.Context, conn *sql.Conn) error {
	if m.galera.Load() != 0 {
		return nil
	}
	var name, value string
	ctx, cancel := context.WithTimeout(ctx, lockTimeout)
	defer cancel()
	err := conn.QueryRowContext(ctx, `SHOW VARIABLES LIKE 'wsrep_on'`).Scan(&name, &value)
	switch {
	case errors.Is(err, sql.ErrNoRows): // MySQL without wsrep
		m.galera.Store(1)
	case err != nil:
		return err
	case value == "ON":
		if !m.galeraWarned.Swap(true) {
			m.cfg.Logger.Warn("casleader notify: the server is a Galera node; named locks (GET_LOCK) do not cross nodes, "+
				"so a release on another node is found by reading the row every galera_check_interval while waiting",
				"table", m.cfg.Table, "galera_check_interval", m.cfg.GaleraCheckInterval)
		}
		m.galera.Store(2)
	default:
		m.galera.Store(1)
	}
	return nil
}

// moved reports whether the row of key no longer shows a live lease of term:
// released, another term, or gone.
func (m *MySQL) moved(ctx context.Context, conn *sql.Conn, key string, term int64) (bool, error) {
	var leader string
	var rowTerm int64
	err := conn.QueryRowContext(ctx, `SELECT leader_id, term FROM `+m.tbl+` WHERE elect_key = ?`, key).Scan(&leader, &rowTerm)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return leader == "" || rowTerm != term, nil
}

// Run holds the locks of the terms this process leads and waits on those of the
// terms it follows, until ctx ends; then it releases everything and returns nil.
func (m *MySQL) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { m.hold(ctx) })
	waiting := map[string]context.CancelFunc{}
	for {
		// Start a waiter per subscribed key, stop those of keys no longer subscribed.
		// Keys waited on already keep their waiter; new ones get one up to MaxWaiters.
		live := map[string]bool{}
		keys := m.hub.Keys()
		for _, k := range keys {
			if waiting[k] != nil {
				live[k] = true
			}
		}
		for _, k := range keys {
			if !live[k] && m.cfg.MaxWaiters > 0 && len(live) >= m.cfg.MaxWaiters {
				continue
			}
			live[k] = true
			if waiting[k] == nil {
				wctx, wcancel := context.WithCancel(ctx)
				waiting[k] = wcancel
				ch := make(chan struct{}, 1)
				m.mu.Lock()
				m.rearm[k] = ch
				m.mu.Unlock()
				wg.Go(func() { m.follow(wctx, k, ch) })
			}
		}
		for k, c := range waiting {
			if !live[k] {
				c()
				delete(waiting, k)
			}
		}
		t := time.NewTimer(time.Second) // also notices unsubscriptions
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-m.hub.Added():
		case <-t.C:
		}
		t.Stop()
	}
}

// hold keeps the set of locks held on one dedicated connection equal to the terms
// this process leads. Releases go first: they are what followers wait for.
func (m *MySQL) hold(ctx context.Context) {
	h := &holder{m: m, held: map[string]bool{}}
	defer h.close(ctx)
	for {
		want := m.wantedLocks()
		err := h.sync(ctx, want)
		wait := time.Duration(0)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = h.fail(err)
		} else {
			h.failures = 0
		}
		if wait == 0 && len(h.held) < len(want) {
			wait = 100 * time.Millisecond // a lock still taken: try again soon
		}
		m.awaitChange(ctx, wait)
		if ctx.Err() != nil {
			return
		}
	}
}

// holder is the state of the lock holder, owned by the goroutine of [MySQL.hold]:
// its dedicated connection and the names of the locks held on it.
type holder struct {
	m        *MySQL
	conn     *sql.Conn
	held     map[string]bool
	failures int
}

// wantedLocks returns the names of the locks of the terms this process leads.
func (m *MySQL) wantedLocks() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := make(map[string]bool, len(m.lead))
	for k, t := range m.lead {
		want[m.LockName(k, t)] = true
	}
	return want
}

// sync takes a connection if a lock is wanted, releases the locks held but not
// wanted, then tries once for each lock wanted but not held.
func (h *holder) sync(ctx context.Context, want map[string]bool) error {
	if h.conn == nil && len(want) > 0 {
		c, err := h.m.cfg.DB.Conn(ctx)
		if err != nil {
			return err
		}
		h.conn, h.held = c, map[string]bool{}
	}
	for name := range h.held {
		if !want[name] {
			if err := releaseLock(ctx, h.conn, name); err != nil {
				return err
			}
			delete(h.held, name)
		}
	}
	for name := range want {
		if h.held[name] {
			continue
		}
		// Followers hold the lock only for a moment when they are granted it.
		var got sql.NullInt64
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second+lockTimeout)
		err := h.conn.QueryRowContext(lctx, `SELECT GET_LOCK(?, 2)`, name).Scan(&got)
		cancel()
		if err != nil {
			return err
		}
		if got.Int64 == 1 {
			h.held[name] = true
		}
	}
	return nil
}

// fail counts a failure of sync, drops the connection and returns the wait before
// the next try.
func (h *holder) fail(err error) time.Duration {
	h.failures++
	wait := backoff(h.failures)
	h.m.cfg.Logger.Warn("casleader notify: lock holder connection failed", "table", h.m.cfg.Table, "error", err, "retry_in", wait)
	if h.conn != nil {
		// The server releases a connection's named locks when it
		// closes: none is held any more.
		discard(h.conn)
		h.conn, h.held = nil, map[string]bool{}
	}
	return wait
}

// close releases every lock held and discards the connection.
func (h *holder) close(ctx context.Context) {
	if h.conn != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_, _ = h.conn.ExecContext(rctx, `DO RELEASE_ALL_LOCKS()`)
		cancel()
		discard(h.conn)
	}
}

// awaitChange waits for a change of the terms led, for ctx, or for wait when it is
// not 0.
func (m *MySQL) awaitChange(ctx context.Context, wait time.Duration) {
	var t *time.Timer
	var tc <-chan time.Time
	if wait > 0 {
		t = time.NewTimer(wait)
		tc = t.C
	}
	select {
	case <-ctx.Done():
	case <-m.change:
	case <-tc:
	}
	if t != nil {
		t.Stop()
	}
}

// follow waits on the lock of the term armed for key and wakes the subscribers when
// the server grants it.
func (m *MySQL) follow(ctx context.Context, key string, rearm <-chan struct{}) {
	w := &waiter{m: m, key: key, rearm: rearm}
	defer func() {
		if w.conn != nil {
			discard(w.conn)
		}
	}()
	for ctx.Err() == nil {
		term := m.armedTerm(key)
		if term == 0 || (term == w.quickTerm && w.quick >= 3) {
			select {
			case <-ctx.Done():
				return
			case <-rearm:
			}
			continue
		}
		if w.conn == nil && !w.connect(ctx) {
			continue
		}
		if !w.round(ctx, term) {
			return
		}
	}
}

// waiter is the state of the lock waiter of one key, owned by the goroutine of
// [MySQL.follow].
type waiter struct {
	m     *MySQL
	key   string
	rearm <-chan struct{}
	conn  *sql.Conn

	quick     int // grants in a row that came at once, for term quickTerm
	quickTerm int64
	failures  int
}

// waited is the outcome of one wait on a lock.
type waited struct {
	granted     bool          // the server granted the lock
	took        time.Duration // how long the wait took
	woke        bool          // the subscribers were woken already
	moved       bool          // on Galera: the row moved on while the wait timed out
	interrupted bool          // a re-arm (or ctx) ended the wait
	galera      bool          // the wait was on a Galera node
}

// armedTerm returns the term armed for key, 0 if none.
func (m *MySQL) armedTerm(key string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.armed[key]
}

// wake wakes the subscribers of key and counts it: the lease was released, or
// handed over to any of them.
func (m *MySQL) wake(key string) {
	m.woken.Add(1)
	m.hub.Wake(key, HandedOver)
}

// disarmAndWake disarms the waiter of key if it is still armed on term, and wakes
// the subscribers.
func (m *MySQL) disarmAndWake(key string, term int64) {
	m.mu.Lock()
	if m.armed[key] == term {
		m.armed[key] = 0 // until the follower has read the row and armed again
	}
	m.mu.Unlock()
	m.wake(key)
}

// connect takes the waiter's connection and learns whether its server is a Galera
// node. On failure it backs off and returns false.
func (w *waiter) connect(ctx context.Context) bool {
	c, err := w.m.cfg.DB.Conn(ctx)
	if err == nil {
		err = w.m.detectGalera(ctx, c)
		if err != nil {
			discard(c)
		}
	}
	if err != nil {
		w.failures++
		sleep(ctx, backoff(w.failures))
		return false
	}
	w.conn = c
	return true
}

// round waits once on the lock of term and acts on the outcome. It returns false
// when follow must return.
func (w *waiter) round(ctx context.Context, term int64) bool {
	r, err := w.wait(ctx, term)
	if err != nil {
		discard(w.conn)
		w.conn = nil
		if ctx.Err() != nil {
			return false
		}
		if !r.interrupted {
			w.failures++
			w.m.cfg.Logger.Warn("casleader notify: lock waiter connection failed", "table", w.m.cfg.Table, "key", w.key, "error", err)
			sleep(ctx, backoff(w.failures))
		}
		return true
	}
	w.failures = 0
	if r.moved {
		w.m.disarmAndWake(w.key, term)
		return true
	}
	if !r.granted {
		return true // timed out: wait again
	}
	if w.m.armedTerm(w.key) != term {
		return true
	}
	if r.took > 20*time.Millisecond {
		// Granted after a real wait: the follower was woken above.
		w.quick, w.quickTerm = 0, 0
		if !r.woke {
			w.m.disarmAndWake(w.key, term)
		}
		return true
	}
	if r.galera {
		w.grantedOnGalera(ctx, term)
		return true
	}
	w.grantedAtOnce(ctx, term)
	return true
}

// wait waits on the lock of term; a re-arm for another term ends the wait (the
// driver then closes the connection, which ends the wait on the server too).
func (w *waiter) wait(ctx context.Context, term int64) (waited, error) {
	var r waited
	wait := w.m.cfg.WaitTimeout
	r.galera = w.m.Galera()
	if r.galera {
		wait = w.m.cfg.GaleraCheckInterval
	}
	name := w.m.LockName(w.key, term)
	// The server ends the wait after wait; a reply that has not come lockTimeout
	// later was lost (a cut link drops it and keeps the connection open), and the
	// connection is dropped instead of waited on for ever.
	wctx, cancel := context.WithTimeout(ctx, wait+lockTimeout)
	helper := make(chan struct{})
	go func() {
		defer close(helper)
		w.watchRearm(wctx, term, cancel)
	}()
	start := time.Now()
	var got sql.NullInt64
	err := w.conn.QueryRowContext(wctx, `SELECT GET_LOCK(?, ?)`, name, int(wait/time.Second)).Scan(&got)
	r.took = time.Since(start)
	r.granted = got.Int64 == 1
	if err == nil && r.granted {
		if r.took > 20*time.Millisecond {
			// Granted after a real wait: the leader released it, or its
			// connection dropped. Wake the follower before giving the lock
			// back, which costs a round trip the follower need not wait for.
			// The waiter then rests until the follower's read arms it again: a
			// lock granted at once meanwhile is no news, and woke a follower
			// still busy with the first wake-up into another election.
			if w.m.armedTerm(w.key) == term {
				r.woke = true
				w.m.disarmAndWake(w.key, term)
			}
		}
		err = releaseLock(ctx, w.conn, name)
	}
	if err == nil && !r.granted && r.galera && wctx.Err() == nil {
		// Timed out on a Galera node: the leader may have released on another node.
		r.moved, err = w.m.moved(wctx, w.conn, w.key, term)
	}
	r.interrupted = errors.Is(wctx.Err(), context.Canceled) // a re-arm, or ctx
	cancel()
	<-helper // no signal may be taken by a helper that is going away
	return r, err
}

// watchRearm cancels the wait on the lock of term when key is re-armed for another
// term, until wctx is done.
func (w *waiter) watchRearm(wctx context.Context, term int64, cancel context.CancelFunc) {
	for {
		select {
		case <-w.rearm:
			if w.m.armedTerm(w.key) != term {
				cancel()
				return
			}
		case <-wctx.Done():
			return
		}
	}
}

// grantedOnGalera handles a lock of term granted at once on a Galera node: the
// leader's lock, if any, is on another node. Read the row every
// GaleraCheckInterval instead.
func (w *waiter) grantedOnGalera(ctx context.Context, term int64) {
	moved, err := w.m.moved(ctx, w.conn, w.key, term)
	if err != nil {
		discard(w.conn)
		w.conn = nil
		return
	}
	if moved {
		w.m.disarmAndWake(w.key, term)
		return
	}
	t := time.NewTimer(w.m.cfg.GaleraCheckInterval)
	select {
	case <-ctx.Done():
	case <-w.rearm:
	case <-t.C:
	}
	t.Stop()
}

// grantedAtOnce handles a lock of term granted at once: the leader has not taken it
// yet (it just won), is gone, or runs without a notifier. Look again after a pause;
// after three such grants, wake the follower and stop waiting on this term.
func (w *waiter) grantedAtOnce(ctx context.Context, term int64) {
	if w.quickTerm != term {
		w.quick, w.quickTerm = 0, term
	}
	w.quick++
	if w.quick >= 3 {
		w.m.wake(w.key)
		return
	}
	sleep(ctx, 25*time.Millisecond<<w.quick)
}

// backoff is the wait after failure number n: from 50 ms, doubling up to 10 s.
func backoff(n int) time.Duration { return retry.Backoff(n, 50*time.Millisecond, 10*time.Second) }

func sleep(ctx context.Context, d time.Duration) { _ = retry.Sleep(ctx, d) }

// discard closes conn and keeps database/sql from reusing it: a connection that may
// still hold a named lock must never go back to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}
