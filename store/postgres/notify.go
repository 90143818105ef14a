package postgres

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// listenConfig configures a [listener]. Zero values get the defaults given per field.
type listenConfig struct {
	// DSN reaches PostgreSQL directly: LISTEN needs a server session of its own.
	// Through a pooling proxy (PgBouncer, in any pool mode) the listener finds
	// that its connection does not reach the backend it opened, never listens,
	// and followers poll.
	DSN string
	// Table is the election table, spelled as the stores are given it.
	Table string
	// SelfTestTimeout bounds the wait for the self-test notification. Default 2 s.
	SelfTestTimeout time.Duration
	// RetestInterval is the wait before connecting and testing again after the
	// self-test failed. Default 1 min.
	RetestInterval time.Duration
	// PingInterval is how often an idle listening connection is checked. Default 30 s.
	PingInterval time.Duration
	// Logger receives connection and self-test outcomes. nil means discard.
	Logger *slog.Logger
}

// listener listens for release and handover notifications on one dedicated
// connection and wakes the subscribers of the store's hub: the cross-process part
// of a [Store]'s wake-ups (see [ListenDSN]).
type listener struct {
	cfg       listenConfig
	connect   func(ctx context.Context) (*pgx.Conn, func(), error) // a dedicated connection and how to close it
	send      func(ctx context.Context, payload string) error      // a notification through another connection
	hub       *notify.Hub
	listening atomic.Bool
	warned    atomic.Bool
	received  atomic.Int64
}

// dsnListener validates cfg and returns a listener on connections of its own to
// cfg.DSN, delivering to hub. It does no I/O.
func dsnListener(cfg listenConfig, hub *notify.Hub) (*listener, error) {
	cfg.Table = cmp.Or(cfg.Table, schema.DefaultTable)
	if err := ident.ValidateTable(cfg.Table); err != nil {
		return nil, err
	}
	cfg.SelfTestTimeout = cmp.Or(cfg.SelfTestTimeout, 2*time.Second)
	cfg.RetestInterval = cmp.Or(cfg.RetestInterval, time.Minute)
	cfg.PingInterval = cmp.Or(cfg.PingInterval, 30*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cc, err := parseConfig(cfg.DSN, pgx.ParseConfig)
	if err != nil {
		return nil, err
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = 5 * time.Second
	}
	// No statement cache: the listener runs only LISTEN, pg_notify and SELECT 1.
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	p := &listener{cfg: cfg, hub: hub}
	p.connect = func(ctx context.Context) (*pgx.Conn, func(), error) {
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			return nil, nil, err
		}
		return conn, func() { closeConn(ctx, conn) }, nil
	}
	p.send = func(ctx context.Context, payload string) error {
		other, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			return err
		}
		defer closeConn(ctx, other)
		_, err = other.Exec(ctx, `SELECT pg_notify($1, $2)`, sqlstore.NotifyChannel, payload)
		return err
	}
	return p, nil
}

// poolListener returns the listener built into a store on pool: it takes its
// dedicated connection from the pool (which then no longer counts it) and sends its
// self-test through the pool.
func poolListener(pool *pgxpool.Pool, table string, hub *notify.Hub) *listener {
	cfg := listenConfig{Table: table, SelfTestTimeout: 2 * time.Second, RetestInterval: time.Minute, PingInterval: 30 * time.Second,
		Logger: slog.New(slog.DiscardHandler)}
	p := &listener{cfg: cfg, hub: hub}
	p.connect = func(ctx context.Context) (*pgx.Conn, func(), error) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		conn := c.Hijack()
		return conn, func() { closeConn(ctx, conn) }, nil
	}
	p.send = func(ctx context.Context, payload string) error {
		// Through the store's wire layer (pgconn, text values): pgx's typed Exec
		// would link its type map into every program that uses a store.
		_, err := pgxBackend{pool}.Exec(ctx, `SELECT pg_notify($1::text, $2::text)`, sqlstore.NotifyChannel, payload)
		return err
	}
	return p
}

// closeConn closes conn within a second, even after ctx ended.
func closeConn(ctx context.Context, conn *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = conn.Close(cctx)
}

// Announce does nothing: the release statements notify by themselves.
func (p *listener) Announce(string, int64) {}

// AnnounceHandover does nothing: the handover statements notify by themselves.
func (p *listener) AnnounceHandover(string, string) {}

// Observed does nothing: PostgreSQL followers need no arming.
func (p *listener) Observed(string, store.Record) {}

// Leading does nothing: the release and handover statements notify by themselves.
func (p *listener) Leading(string, int64, bool) {}

// Listening reports whether the notifier holds a connection on which the self-test
// notification arrived: notifications are being delivered.
func (p *listener) Listening() bool { return p.listening.Load() }

// Received returns how many election notifications for this table have arrived.
func (p *listener) Received() int64 { return p.received.Load() }

// Run listens until ctx ends, reconnecting with backoff and retesting as configured,
// and returns nil then. Subscribers are woken after every (re)connection, in case a
// notification was missed while disconnected.
func (p *listener) Run(ctx context.Context) error {
	log := p.cfg.Logger
	failures := 0
	for ctx.Err() == nil {
		err := p.session(ctx)
		p.listening.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		wait := p.cfg.RetestInterval
		if errors.Is(err, errSelfTest) {
			failures = 0
			level := slog.LevelDebug
			if !p.warned.Swap(true) {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "casleader notify: LISTEN/NOTIFY does not work on this connection (PgBouncer in transaction mode?): followers poll",
				"table", p.cfg.Table, "retest_in", wait, "error", err)
		} else {
			failures++
			wait = min(100*time.Millisecond<<min(failures-1, 10), p.cfg.RetestInterval)
			wait = wait/2 + rand.N(wait/2+1)
			log.Warn("casleader notify: listener connection failed, reconnecting", "table", p.cfg.Table, "error", secret.RedactError(err, p.cfg.DSN), "retry_in", wait)
		}
		p.hub.WakeAll() // notifications may have been lost meanwhile
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

var errSelfTest = errors.New("postgres: notify: self-test notification did not arrive")

// session connects, listens, self-tests and dispatches until an error or ctx ends.
func (p *listener) session(ctx context.Context) error {
	conn, closeIt, err := p.connect(ctx)
	if err != nil {
		return err
	}
	defer closeIt()
	if err := ownBackend(ctx, conn); err != nil {
		return err
	}
	// pgconn's simple protocol: no statement cache, no type map.
	if _, err := conn.PgConn().Exec(ctx, `LISTEN `+pgx.Identifier{sqlstore.NotifyChannel}.Sanitize()).ReadAll(); err != nil {
		return err
	}
	if err := p.selfTest(ctx, conn); err != nil {
		return err
	}
	p.hub.WakeAll() // a release may have come before the LISTEN
	p.listening.Store(true)
	p.cfg.Logger.Info("casleader notify: listening", "table", p.cfg.Table, "channel", sqlstore.NotifyChannel)
	for {
		wctx, cancel := context.WithTimeout(ctx, p.cfg.PingInterval)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if pl, ok := sqlstore.ParseNotifyPayload(p.cfg.Table, n.Payload); ok {
				p.received.Add(1)
				pl.Wake(p.hub)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) || pgconnTimeout(err):
			// Idle: make sure the connection is still alive.
			pctx, pcancel := context.WithTimeout(ctx, p.cfg.SelfTestTimeout)
			err := conn.PgConn().Ping(pctx)
			pcancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// ownBackend checks, before any LISTEN, that conn talks to the server backend it
// started (the process ID of the server's BackendKeyData is pg_backend_pid()). A
// pooling proxy such as PgBouncer gives its clients keys of its own and hands their
// statements to backends of its pool: a LISTEN sent through it would stay on a
// pooled server connection that other clients then share, and the notifications
// that arrive on that connection between two clients' transactions make
// PgBouncer 1.18 close it and exit ("server in bad state"). Through a proxy the
// listener therefore never listens; followers poll, and [ListenDSN] with a DSN
// that reaches PostgreSQL directly restores the wake-ups.
func ownBackend(ctx context.Context, conn *pgx.Conn) error {
	rs, err := conn.PgConn().Exec(ctx, `SELECT pg_backend_pid()`).ReadAll()
	if err != nil {
		return err
	}
	if len(rs) != 1 || len(rs[0].Rows) != 1 || len(rs[0].Rows[0]) != 1 {
		return fmt.Errorf("postgres: notify: SELECT pg_backend_pid() returned no row")
	}
	pid, err := strconv.ParseUint(string(rs[0].Rows[0][0]), 10, 32)
	if err != nil {
		return fmt.Errorf("postgres: notify: SELECT pg_backend_pid() returned %q: %w", rs[0].Rows[0][0], err)
	}
	if uint32(pid) != conn.PgConn().PID() {
		return fmt.Errorf("%w: the connection reaches backend %d, not the backend %d it was opened with (a pooling proxy such as PgBouncer): LISTEN would stay on a pooled server connection, so followers poll",
			errSelfTest, pid, conn.PgConn().PID())
	}
	return nil
}

// selfTest sends a notification through a second connection and waits for it on
// conn. Through PgBouncer in transaction mode the LISTEN session is not ours after
// its transaction, and nothing arrives.
func (p *listener) selfTest(ctx context.Context, conn *pgx.Conn) error {
	b := make([]byte, 8)
	_, _ = crand.Read(b)
	payload := "casleader-selftest " + hex.EncodeToString(b)
	if err := p.send(ctx, payload); err != nil {
		return err
	}
	deadline := time.Now().Add(p.cfg.SelfTestTimeout)
	for {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) || pgconnTimeout(err) {
				return errSelfTest
			}
			return err
		}
		if n.Payload == payload {
			return nil
		}
	}
}

// pgconnTimeout reports whether err is a timeout that leaves the connection usable.
func pgconnTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
