//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// Environment of a candidate process.
const (
	// EnvChild set to "1" makes the test binary's TestMain run [Child] instead of the tests.
	EnvChild   = "CASLEADER_CHAOS_CHILD"
	envDialect = "CASLEADER_CHAOS_DIALECT"
	envDSN     = "CASLEADER_CHAOS_DSN"  // the database's DSN
	envAddr    = "CASLEADER_CHAOS_ADDR" // host:port of the candidate's proxy, replacing the DSN's
	envTable   = "CASLEADER_CHAOS_TABLE"
	envActions = "CASLEADER_CHAOS_ACTIONS"
	envKey     = "CASLEADER_CHAOS_KEY"
	envID      = "CASLEADER_CHAOS_ID"
	envTimings = "CASLEADER_CHAOS_TIMINGS" // lease,renew,heartbeat,poll
	envIdle    = "CASLEADER_CHAOS_IDLE"    // MySQL session variable that aborts idle transactions
	envDebug   = "CASLEADER_CHAOS_DEBUG"   // log at Debug level
	// envMonoOffset is how far (in nanoseconds) the candidate's CLOCK_MONOTONIC is
	// ahead of the host's: the candidate runs in a time namespace of its own.
	envMonoOffset = "CASLEADER_CHAOS_MONO_OFFSET"
	// EnvLogDir names a directory where the parent keeps every candidate's log, as
	// <dialect>-<candidate>.log.
	EnvLogDir = "CASLEADER_CHAOS_LOGDIR"
)

// Mono returns the host's CLOCK_MONOTONIC in nanoseconds: one timeline for every
// process on the host. A candidate whose clocks are offset (see
// [Config.ClockOffsets]) subtracts its offset, which only the harness's own stamps
// use: the elector in that process sees the offset clock.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // cannot happen on Linux
	}
	return ts.Nano() - monoOffset
}

// monoOffset is this process's envMonoOffset (0 in the parent).
var monoOffset, _ = strconv.ParseInt(os.Getenv(envMonoOffset), 10, 64)

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
	guard(ctx context.Context, token int64) error      // the elector's guard
	guardStore(ctx context.Context, token int64) error // the store's guard only (no local check)
	insert(ctx context.Context, token, seq, check int64) error
	commit(ctx context.Context) error
	rollback()
}

type child struct {
	id, key     string
	dialect     schema.Dialect
	lease       time.Duration
	el          *casleader.Elector
	st          casleader.Store
	begin       func(ctx context.Context) (childTx, error)
	ev          *events
	log         *slog.Logger
	seq         int64
	seqMu       sync.Mutex
	stale       sync.WaitGroup
	insertQuery string
}

// Child runs one candidate until SIGTERM and returns the process's exit code. The
// parent (a [Cluster]) sets its environment.
func Child() int {
	level := slog.LevelInfo
	if os.Getenv(envDebug) != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	c, closeAll, err := newChild(log)
	if err != nil {
		log.Error("chaos child: setup", "error", err)
		return 2
	}
	defer closeAll()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	pollDone := make(chan struct{})
	go func() { defer close(pollDone); c.pollBelief(ctx) }()
	err = c.el.Run(ctx)
	<-pollDone
	c.stale.Wait()
	if err != nil {
		log.Error("chaos child: Run", "error", err)
		return 3
	}
	c.ev.emit("X")
	return 0
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
	c := &child{
		id:      os.Getenv(envID),
		key:     os.Getenv(envKey),
		dialect: schema.Dialect(os.Getenv(envDialect)),
		lease:   lease,
		ev:      &events{f: os.NewFile(3, "events")},
		log:     log.With("id", os.Getenv(envID)),
	}
	table, actions := os.Getenv(envTable), os.Getenv(envActions)
	qa, err := schema.Quote(c.dialect, actions)
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
		c.insertQuery = "INSERT INTO " + qa + " (token, cand, seq, chk) VALUES (?, ?, ?, ?)"
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, nil, err
		}
		cfg.Addr = addr
		edb, err := store.OpenMySQL(cfg.FormatDSN())
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
		adb, err := store.OpenMySQL(cfg.FormatDSN())
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, func() { adb.Close() })
		st, err := store.NewMySQL(edb, table)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		c.st = st
		c.begin = func(ctx context.Context) (childTx, error) {
			tx, err := adb.BeginTx(ctx, nil)
			return &sqlChildTx{c: c, tx: tx, st: st}, err
		}
	case schema.Postgres:
		c.insertQuery = "INSERT INTO " + qa + " (token, cand, seq, chk) VALUES ($1, $2, $3, $4)"
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
		st, err := store.NewPostgres(pool, table)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		c.st = st
		c.begin = func(ctx context.Context) (childTx, error) {
			tx, err := apool.Begin(ctx)
			return &pgxChildTx{c: c, tx: tx, st: st}, err
		}
	default:
		return nil, nil, fmt.Errorf("%s=%q: want mysql or postgres", envDialect, c.dialect)
	}
	el, err := casleader.New(c.st, casleader.Config{
		Key: c.key, ID: c.id,
		LeaseDuration: lease, RenewDeadline: renew, HeartbeatInterval: beat, PollInterval: poll,
		Logger:           log,
		OnStartedLeading: c.lead,
	})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	c.el = el
	return c, closeAll, nil
}

func pgPool(dsn, addr string, params map[string]string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, store.RedactError(err, dsn)
	}
	host, port, ok := strings.Cut(addr, ":")
	p, err := strconv.ParseUint(port, 10, 16)
	if !ok || err != nil {
		return nil, fmt.Errorf("%s=%q: want host:port", envAddr, addr)
	}
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.MaxConns = 4
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

// pollBelief reports belief intervals: "B <mono> <token>" when IsLeader() is first
// seen true, "E <mono>" with the last instant it was seen true once it is false.
// It samples every millisecond while leading, every 5 ms otherwise.
func (c *child) pollBelief(ctx context.Context) {
	leading := false
	var last int64
	for {
		now := Mono()
		tok := c.el.Token()
		switch {
		case tok != 0 && !leading:
			leading, last = true, now
			c.ev.emit("B %d %d", now, tok)
		case tok != 0:
			last = now
		case leading:
			leading = false
			c.ev.emit("E %d", last)
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

const actionEvery = 15 * time.Millisecond

// lead is OnStartedLeading: fenced actions until the leadership context ends, half
// through the elector's guard with that context, half through the store's guard
// alone. Then a careless writer goes on for one lease with the store's guard and a
// context of its own: the database must refuse every one of its writes.
func (c *child) lead(ctx context.Context, token int64) {
	for i := 0; ctx.Err() == nil; i++ {
		c.act(ctx, token, i%2 == 1)
		sleep(ctx, actionEvery)
	}
	c.stale.Add(1)
	go func() {
		defer c.stale.Done()
		until := time.Now().Add(c.lease)
		for time.Now().Before(until) {
			actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c.act(actx, token, true)
			cancel()
			time.Sleep(actionEvery + rand.N(actionEvery))
		}
	}()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// act runs one fenced action: check, begin, guard, insert, commit.
func (c *child) act(ctx context.Context, token int64, storeOnly bool) {
	check := Mono()
	if !storeOnly && !c.el.IsLeader() {
		return
	}
	tx, err := c.begin(ctx)
	if err != nil {
		c.reject(err)
		return
	}
	defer tx.rollback()
	if storeOnly {
		err = tx.guardStore(ctx, token)
	} else {
		err = tx.guard(ctx, token)
	}
	if err != nil {
		c.reject(err)
		return
	}
	c.seqMu.Lock()
	c.seq++
	seq := c.seq
	c.seqMu.Unlock()
	if err := tx.insert(ctx, token, seq, check); err != nil {
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
	st *store.MySQL
}

func (x *sqlChildTx) guard(ctx context.Context, token int64) error {
	return x.c.el.Guard(ctx, x.tx, token)
}
func (x *sqlChildTx) guardStore(ctx context.Context, token int64) error {
	return x.st.Guard(ctx, x.tx, x.c.key, x.c.id, token, x.c.lease)
}
func (x *sqlChildTx) insert(ctx context.Context, token, seq, check int64) error {
	_, err := x.tx.ExecContext(ctx, x.c.insertQuery, token, x.c.id, seq, check)
	return err
}
func (x *sqlChildTx) commit(context.Context) error { return x.tx.Commit() }
func (x *sqlChildTx) rollback()                    { _ = x.tx.Rollback() }

type pgxChildTx struct {
	c  *child
	tx pgx.Tx
	st *store.Postgres
}

func (x *pgxChildTx) guard(ctx context.Context, token int64) error {
	return x.c.el.GuardPgx(ctx, x.tx, token)
}
func (x *pgxChildTx) guardStore(ctx context.Context, token int64) error {
	return x.st.GuardPgx(ctx, x.tx, x.c.key, x.c.id, token, x.c.lease)
}
func (x *pgxChildTx) insert(ctx context.Context, token, seq, check int64) error {
	_, err := x.tx.Exec(ctx, x.c.insertQuery, pgx.QueryExecModeExec, token, x.c.id, seq, check)
	return err
}
func (x *pgxChildTx) commit(ctx context.Context) error { return x.tx.Commit(ctx) }
func (x *pgxChildTx) rollback()                        { _ = x.tx.Rollback(context.Background()) }
