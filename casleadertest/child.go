//go:build linux

package casleadertest

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	mysqlstore "github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// Environment of a candidate process.
const (
	// EnvChild set to "1" makes the test binary's TestMain run [RunChild] instead of the tests
	// (see [Main]).
	EnvChild   = "CASLEADER_CHAOS_CHILD"
	envDialect = "CASLEADER_CHAOS_DIALECT"
	envDSN     = "CASLEADER_CHAOS_DSN"  // the database's DSN
	envAddr    = "CASLEADER_CHAOS_ADDR" // host:port of the candidate's proxies, one per host of the DSN, comma-separated
	envTable   = "CASLEADER_CHAOS_TABLE"
	envActions = "CASLEADER_CHAOS_ACTIONS"
	envKey     = "CASLEADER_CHAOS_KEY"
	// envKeys, when set to n > 0, makes the candidate run a group over n keys
	// (see [GroupKeys]) instead of an Elector on the one key envKey.
	envKeys    = "CASLEADER_CHAOS_KEYS"
	envID      = "CASLEADER_CHAOS_ID"      // the process's name in its reports and actions
	envCandID  = "CASLEADER_CHAOS_CAND_ID" // its candidate ID (Config.ID), which processes may share
	envTimings = "CASLEADER_CHAOS_TIMINGS" // lease,renew,heartbeat,poll
	envIdle    = "CASLEADER_CHAOS_IDLE"    // MySQL session variable that aborts idle transactions
	envDebug   = "CASLEADER_CHAOS_DEBUG"   // log at Debug level
	envLead    = "CASLEADER_CHAOS_LEAD"    // the name of the Lead function to run (see Main), if any
	envBalance = "CASLEADER_CHAOS_BALANCE" // "true": the group is a balanced one (ProcessConfig.Balance)
	// envMonoOffset is how far (in nanoseconds) the candidate's CLOCK_MONOTONIC is
	// ahead of the host's: the candidate runs in a time namespace of its own.
	envMonoOffset = "CASLEADER_CHAOS_MONO_OFFSET"
	// EnvLogDir names a directory where the parent keeps every candidate's log, as
	// <dialect>-<candidate>.log (<dialect>-group-<candidate>.log for a group's).
	EnvLogDir = "CASLEADER_CHAOS_LOGDIR"
)

// events writes the lines a candidate reports to the parent (file descriptor 3).
type events struct {
	mu sync.Mutex
	f  *os.File
}

func (e *events) emit(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.f, format+"\n", args...)
}

// childTx is a transaction of the candidate's application, of either driver family.
type childTx interface {
	guard(ctx context.Context, key string, token int64) error      // the elector's guard (a group's: local check, then the store's)
	guardStore(ctx context.Context, key string, token int64) error // the store's guard only (no local check)
	insert(ctx context.Context, key string, token, seq, check int64) error
	commit(ctx context.Context) error
	rollback()
}

// child is one candidate: an Elector on one key, or a group over many (g != nil).
type child struct {
	app         *DB                                     // the database through the proxy, for a Lead function
	user        func(ctx context.Context, c *Candidate) // the Lead function (nil: the suite's own actions)
	id          string                                  // the process's name in reports and actions
	candID      string                                  // its candidate ID (Config.ID)
	keys        []string                                // the Elector's one key, or the group's keys
	dialect     schema.Dialect
	lease       time.Duration
	el          *casleader.Elector
	g           *casleader.Group
	st          store.Driver
	begin       func(ctx context.Context) (childTx, error)
	ev          *events
	log         *slog.Logger
	seq         int64
	seqMu       sync.Mutex
	stale       sync.WaitGroup
	insertQuery string
	// targets are a group's keys to act on, kept by pollBelief (see actLoop).
	targetsMu sync.Mutex
	targets   map[string]target
}

// target is a key of a group that a candidate leads (until is zero) or led until
// recently: its careless writer goes on with the old token until until.
type target struct {
	token int64
	until time.Time
}

// RunChild runs one candidate until SIGTERM and returns the process's exit code. The
// parent (a [Cluster]) sets its environment.
func RunChild() int {
	level := slog.LevelInfo
	if os.Getenv(envDebug) != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// Before the setup, which takes a while under load: the harness may stop a
	// candidate it has just started.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	c, closeAll, err := newChild(log)
	if err != nil {
		log.Error("casleadertest candidate: setup", "error", err)
		return 2
	}
	defer closeAll()

	// The recorder and the writers stop when Run returns, by a signal or early
	// (an error, ErrDuplicateID).
	rctx, ran := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	go func() { defer close(pollDone); c.pollBelief(rctx) }()
	if c.g != nil {
		for range groupActors {
			c.stale.Add(1)
			go func() { defer c.stale.Done(); c.actLoop(rctx) }()
		}
	}
	c.ev.emit("S")
	if c.g != nil {
		err = c.ran(c.g.Run(ctx))
	} else {
		err = c.ran(c.el.Run(ctx))
	}
	ran()
	<-pollDone
	c.stale.Wait()
	if err != nil {
		log.Error("casleadertest candidate: Run", "error", err)
		return 3
	}
	c.ev.emit("X")
	return 0
}

// ran reports how Run ended: a candidate that stopped with ErrDuplicateID says so
// first ("D"), so that the parent can tell it from a crash. ErrNotDrained at the
// end of Run (the Lead function ignored its cancelled context, as an unguarded job
// that finishes its round does) is the application's behaviour under test, not a
// failure of the candidate: the lease was left to expire, and the history judges
// what the work did meanwhile.
func (c *child) ran(err error) error {
	if errors.Is(err, casleader.ErrDuplicateID) {
		c.ev.emit("D %d", Mono())
	}
	if errors.Is(err, casleader.ErrNotDrained) {
		c.log.Warn("casleadertest candidate: the Lead function outlived Run; its lease was left to expire", "error", err)
		return nil
	}
	return err
}

func newChild(log *slog.Logger) (*child, func(), error) {
	var lease, renew, beat, poll time.Duration
	parts := strings.Split(os.Getenv(envTimings), ",")
	if len(parts) != 4 {
		return nil, nil, fmt.Errorf("%s=%q: want lease,renew,heartbeat,poll", envTimings, os.Getenv(envTimings))
	}
	for i, p := range []*time.Duration{&lease, &renew, &beat, &poll} {
		d, err := time.ParseDuration(parts[i])
		if err != nil {
			return nil, nil, err
		}
		*p = d
	}
	nkeys := 0
	if v := os.Getenv(envKeys); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, nil, fmt.Errorf("%s=%q: want a number of keys (0: one Elector)", envKeys, v)
		}
		nkeys = n
	}
	c := &child{
		id:      os.Getenv(envID),
		candID:  cmp.Or(os.Getenv(envCandID), os.Getenv(envID)),
		keys:    []string{os.Getenv(envKey)},
		dialect: schema.Dialect(os.Getenv(envDialect)),
		lease:   lease,
		ev:      &events{f: os.NewFile(3, "events")},
		log:     log.With("id", os.Getenv(envID)),
		targets: map[string]target{},
	}
	if nkeys > 0 {
		c.keys = GroupKeys(os.Getenv(envKey), nkeys)
	}
	table, actions := os.Getenv(envTable), os.Getenv(envActions)
	qa, err := ident.Quote(c.dialect, actions)
	if err != nil {
		return nil, nil, err
	}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	dsn, addr := os.Getenv(envDSN), os.Getenv(envAddr)
	switch c.dialect {
	case schema.MySQL:
		c.insertQuery = "INSERT INTO " + qa + " (ekey, token, cand, seq, chk) VALUES (?, ?, ?, ?, ?)"
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, nil, err
		}
		cfg.Addr = addr
		edb, err := mysqlstore.Open(cfg.FormatDSN())
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, func() { edb.Close() })
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		// A frozen or cut-off candidate's transaction would hold the guard's row lock
		// until the server notices; abort idle transactions after a second, as
		// docs/SAFETY.md recommends for guarded transactions.
		cfg.Params[os.Getenv(envIdle)] = "1"
		adb, err := mysqlstore.Open(cfg.FormatDSN())
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, func() { adb.Close() })
		st, err := mysqlstore.New(edb, table)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		c.st = st
		c.app = &DB{Dialect: MySQL, DSN: cfg.FormatDSN(), SQL: adb, Table: table, Store: st}
		c.begin = func(ctx context.Context) (childTx, error) {
			tx, err := adb.BeginTx(ctx, nil)
			return &sqlChildTx{c: c, tx: tx, st: st}, err
		}
	case schema.Postgres:
		c.insertQuery = "INSERT INTO " + qa + " (ekey, token, cand, seq, chk) VALUES ($1, $2, $3, $4, $5)"
		pool, err := pgPool(dsn, addr, nil)
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, pool.Close)
		apool, err := pgPool(dsn, addr, map[string]string{"idle_in_transaction_session_timeout": "1000"})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, apool.Close)
		st, err := postgres.New(pool, table)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		c.st = st
		sqlDB := stdlib.OpenDBFromPool(apool)
		closers = append(closers, func() { sqlDB.Close() })
		c.app = &DB{Dialect: Postgres, DSN: dsn, SQL: sqlDB, Table: table, Store: st}
		c.begin = func(ctx context.Context) (childTx, error) {
			tx, err := apool.Begin(ctx)
			return &pgxChildTx{c: c, tx: tx, st: st}, err
		}
	case schema.SQLite:
		// The file itself, in two pools as on a server: the election's and the
		// application's. No proxy, no idle-transaction timeout: a frozen candidate
		// is stopped outside its writes (see ProcessCluster), and a killed one's
		// locks go with it.
		c.insertQuery = "INSERT INTO " + qa + " (ekey, token, cand, seq, chk) VALUES (?, ?, ?, ?, ?)"
		edb, err := sqlite.Open(dsn)
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, func() { edb.Close() })
		adb, err := sqlite.Open(dsn)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, func() { adb.Close() })
		st, err := sqlite.New(edb, table)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		c.st = st
		c.app = &DB{Dialect: SQLite, DSN: dsn, SQL: adb, Table: table, Store: st}
		c.begin = func(ctx context.Context) (childTx, error) {
			tx, err := adb.BeginTx(ctx, nil)
			return &sqlChildTx{c: c, tx: tx, st: st}, err
		}
	default:
		return nil, nil, fmt.Errorf("%s=%q: want mysql, postgres or sqlite", envDialect, c.dialect)
	}
	if name := os.Getenv(envLead); name != "" {
		if c.user = leads[name]; c.user == nil || nkeys > 0 {
			closeAll()
			return nil, nil, fmt.Errorf("%s=%q: not a Lead function that TestMain passed to casleadertest.Main (or a group's candidate, which runs none)", envLead, name)
		}
	}
	lead := c.lead
	if c.user != nil {
		lead = func(ctx context.Context, token int64) {
			c.user(ctx, &Candidate{ID: c.candID, Token: token, Elector: c.el, DB: c.app, record: func(check, done int64, err error) {
				if err != nil {
					c.reject(err)
					return
				}
				c.ev.emit("A %d %d %d %s", check, done, token, c.keys[0])
			}})
		}
	}
	priority, err := strconv.Atoi(cmp.Or(os.Getenv(envPriority), "0"))
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("%s=%q: want a priority", envPriority, os.Getenv(envPriority))
	}
	if nkeys > 0 {
		c.g, err = casleader.NewGroup(missStore{c.st, c}, casleader.GroupConfig{
			ID: c.candID, Keys: c.keys, Priority: priority, Balance: os.Getenv(envBalance) == "true",
			LeaseDuration: lease, RenewDeadline: renew, HeartbeatInterval: beat, PollInterval: poll,
			Logger: log, Hooks: []casleader.Hooks{c.missHooks()},
		})
	} else {
		c.el, err = casleader.New(missStore{c.st, c}, casleader.Config{
			Key: c.keys[0], ID: c.candID, Priority: priority,
			LeaseDuration: lease, RenewDeadline: renew, HeartbeatInterval: beat, PollInterval: poll,
			Logger:           log,
			OnStartedLeading: lead,
			Hooks:            []casleader.Hooks{c.missHooks()},
		})
	}
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return c, closeAll, nil
}

// GroupKeys returns the n keys of a group's elections, named after key.
func GroupKeys(key string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%03d", key, i)
	}
	return keys
}

// token returns the fencing token of key while this candidate leads it, else 0.
func (c *child) token(key string) int64 {
	if c.g != nil {
		return c.g.Token(key)
	}
	return c.el.Token()
}

// viaProxies points every host of cfg (the first, and each fallback) at its proxy:
// addrs lists one host:port per host of the DSN, comma-separated, in the DSN's
// order (see PgHosts), so that a multi-host DSN's candidate still picks the
// primary among them (target_session_attrs) after a switchover.
func viaProxies(cfg *pgconn.Config, addrs string) error {
	ups := []string{net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
	for _, f := range cfg.Fallbacks {
		if h := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))); !slices.Contains(ups, h) {
			ups = append(ups, h)
		}
	}
	list := strings.Split(addrs, ",")
	if len(list) != len(ups) {
		return fmt.Errorf("%s=%q: want %d proxies, one per host of the DSN", envAddr, addrs, len(ups))
	}
	type hostPort struct {
		host string
		port uint16
	}
	proxy := map[string]hostPort{}
	for i, a := range list {
		host, port, ok := strings.Cut(a, ":")
		p, err := strconv.ParseUint(port, 10, 16)
		if !ok || err != nil {
			return fmt.Errorf("%s=%q: want host:port", envAddr, a)
		}
		proxy[ups[i]] = hostPort{host, uint16(p)}
	}
	to := func(host string, port uint16) (string, uint16) {
		x := proxy[net.JoinHostPort(host, strconv.Itoa(int(port)))]
		return x.host, x.port
	}
	cfg.Host, cfg.Port = to(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		f.Host, f.Port = to(f.Host, f.Port)
	}
	return nil
}

func pgPool(dsn, addr string, params map[string]string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, secret.RedactError(err, dsn)
	}
	if err := viaProxies(&cfg.ConnConfig.Config, addr); err != nil {
		return nil, err
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.MaxConns = 4
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

// pollBelief reports belief intervals, per key: "B <mono> <token> <key>" when
// IsLeader() is first seen true, "E <mono> <key>" with the last instant it was seen
// true once it is false. It samples every millisecond while leading some key, every
// 5 ms otherwise. For a group it keeps the targets of actLoop too.
func (c *child) pollBelief(ctx context.Context) {
	type belief struct {
		token, last int64 // token 0: not leading
	}
	beliefs := make([]belief, len(c.keys))
	for {
		leading := false
		for i, key := range c.keys {
			now := Mono()
			tok := c.token(key)
			b := &beliefs[i]
			switch {
			case tok != 0 && b.token == 0:
				b.token, b.last = tok, now
				c.ev.emit("B %d %d %s", now, tok, key)
				c.setTarget(key, target{token: tok})
			case tok != 0:
				b.last = now
			case b.token != 0:
				c.ev.emit("E %d %s", b.last, key)
				c.setTarget(key, target{token: b.token, until: time.Now().Add(c.lease)})
				b.token = 0
			}
			leading = leading || b.token != 0
		}
		if ctx.Err() != nil && !leading {
			return
		}
		if leading {
			time.Sleep(time.Millisecond)
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func (c *child) setTarget(key string, t target) {
	if c.g == nil {
		return // an Elector acts from OnStartedLeading (lead)
	}
	c.targetsMu.Lock()
	defer c.targetsMu.Unlock()
	c.targets[key] = t
}

const actionEvery = 15 * time.Millisecond

// groupActors is how many fenced actions a group's candidate runs at once.
const groupActors = 2

// lead is OnStartedLeading: fenced actions until the leadership context ends, half
// through the elector's guard with that context, half through the store's guard
// alone. Then a careless writer goes on for one lease with the store's guard and a
// context of its own: the database must refuse every one of its writes.
func (c *child) lead(ctx context.Context, token int64) {
	key := c.keys[0]
	for i := 0; ctx.Err() == nil; i++ {
		c.act(ctx, key, token, i%2 == 1)
		_ = retry.Sleep(ctx, actionEvery)
	}
	c.stale.Add(1)
	go func() {
		defer c.stale.Done()
		until := time.Now().Add(c.lease)
		for time.Now().Before(until) {
			actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c.act(actx, key, token, true)
			cancel()
			time.Sleep(actionEvery + rand.N(actionEvery))
		}
	}()
}

// actLoop is one of a group's fenced writers, until ctx ends and no careless write
// is left: a group has no leadership context per key, so its writers pick a key at
// random among those it leads (half through the group's local check and the store's
// guard, half through the store's guard alone) or, as often when there are some,
// among those it stopped leading less than a lease ago, with their old token, the
// store's guard alone and a context that leadership does not cancel, as a careless
// application would: the database must refuse those writes.
func (c *child) actLoop(ctx context.Context) {
	for i := 0; ; i++ {
		now := time.Now()
		var leading, stale []string
		c.targetsMu.Lock()
		for key, t := range c.targets {
			switch {
			case t.until.IsZero():
				leading = append(leading, key)
			case now.Before(t.until):
				stale = append(stale, key)
			default:
				delete(c.targets, key)
			}
		}
		c.targetsMu.Unlock()
		if ctx.Err() != nil && len(stale) == 0 {
			return
		}
		pickStale := len(stale) > 0 && (ctx.Err() != nil || len(leading) == 0 || rand.N(2) == 0)
		switch {
		case pickStale:
			key := stale[rand.N(len(stale))]
			actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c.act(actx, key, c.targetToken(key), true)
			cancel()
		case len(leading) > 0 && ctx.Err() == nil:
			key := leading[rand.N(len(leading))]
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			c.act(actx, key, c.targetToken(key), i%2 == 1)
			cancel()
		}
		time.Sleep(actionEvery + rand.N(actionEvery))
	}
}

func (c *child) targetToken(key string) int64 {
	c.targetsMu.Lock()
	defer c.targetsMu.Unlock()
	return c.targets[key].token
}

// localGuard is the check of the elector's guard that does not ask the database:
// does this candidate lead key in the term of token now?
func (c *child) localGuard(key string, token int64) error {
	if c.token(key) != token {
		return casleader.ErrNotLeader
	}
	return nil
}

// act runs one fenced action on key: check, begin, guard, insert, commit.
func (c *child) act(ctx context.Context, key string, token int64, storeOnly bool) {
	check := Mono()
	if !storeOnly && c.localGuard(key, token) != nil {
		return
	}
	tx, err := c.begin(ctx)
	if err != nil {
		c.reject(err)
		return
	}
	defer tx.rollback()
	if storeOnly {
		err = tx.guardStore(ctx, key, token)
	} else {
		err = tx.guard(ctx, key, token)
	}
	if err != nil {
		c.reject(err)
		return
	}
	c.seqMu.Lock()
	c.seq++
	seq := c.seq
	c.seqMu.Unlock()
	if err := tx.insert(ctx, key, token, seq, check); err != nil {
		c.reject(err)
		return
	}
	if err := tx.commit(ctx); err != nil {
		c.reject(err)
	}
}

func (c *child) reject(err error) {
	switch {
	case errors.Is(err, store.ErrFenced):
		c.ev.emit("R database")
	case errors.Is(err, casleader.ErrNotLeader):
		c.ev.emit("R local")
	default:
		c.ev.emit("R error")
	}
}

type sqlChildTx struct {
	c  *child
	tx *sql.Tx
	st sqlGuarder
}

// sqlGuarder is the store's guard in a database/sql transaction (store/mysql,
// store/sqlite).
type sqlGuarder interface {
	Guard(ctx context.Context, tx any, key, id string, token int64, lease time.Duration) error
}

func (x *sqlChildTx) guard(ctx context.Context, key string, token int64) error {
	if x.c.g == nil {
		return x.c.el.Guard(ctx, x.tx, token)
	}
	if err := x.c.localGuard(key, token); err != nil {
		return err
	}
	return x.guardStore(ctx, key, token)
}
func (x *sqlChildTx) guardStore(ctx context.Context, key string, token int64) error {
	return x.st.Guard(ctx, x.tx, key, x.c.candID, token, x.c.lease)
}
func (x *sqlChildTx) insert(ctx context.Context, key string, token, seq, check int64) error {
	_, err := x.tx.ExecContext(ctx, x.c.insertQuery, key, token, x.c.id, seq, check)
	return err
}
func (x *sqlChildTx) commit(context.Context) error { return x.tx.Commit() }
func (x *sqlChildTx) rollback()                    { _ = x.tx.Rollback() }

type pgxChildTx struct {
	c  *child
	tx pgx.Tx
	st *postgres.Store
}

func (x *pgxChildTx) guard(ctx context.Context, key string, token int64) error {
	if x.c.g == nil {
		return postgres.Guard(ctx, x.c.el.Fence(token), x.tx)
	}
	if err := x.c.localGuard(key, token); err != nil {
		return err
	}
	return x.guardStore(ctx, key, token)
}
func (x *pgxChildTx) guardStore(ctx context.Context, key string, token int64) error {
	return x.st.Guard(ctx, x.tx, key, x.c.candID, token, x.c.lease)
}
func (x *pgxChildTx) insert(ctx context.Context, key string, token, seq, check int64) error {
	_, err := x.tx.Exec(ctx, x.c.insertQuery, pgx.QueryExecModeExec, key, token, x.c.id, seq, check)
	return err
}
func (x *pgxChildTx) commit(ctx context.Context) error { return x.tx.Commit(ctx) }
func (x *pgxChildTx) rollback()                        { _ = x.tx.Rollback(context.Background()) }
