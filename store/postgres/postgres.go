// Package postgres is the election store for PostgreSQL 12+, through pgx: a
// *pgxpool.Pool ([New], [Open]) or a *sql.DB opened with pgx's stdlib driver
// ([NewDB]). It also holds the PostgreSQL guard for pgx transactions ([Guard]).
// The store's wake-ups go through LISTEN/NOTIFY (see [ListenDSN]). It is the only
// casleader package that imports pgx.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader/internal/dsn"
	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// Store is the store for PostgreSQL 12+, through a *pgxpool.Pool or a *sql.DB
// opened with pgx's stdlib driver.
//
// Every statement is a single autocommit statement without named prepared
// statements (the extended protocol's unnamed statement, as pgx's exec mode), so
// the store works through PgBouncer in transaction pooling mode. On a pool the
// statements go through pgconn, pgx's wire layer, with text-format values. tick_time
// is a timestamptz written with clock_timestamp().
//
// Its wake-ups: the release and handover statements notify channel "casleader" in
// the same statement, and one listener per store (started with the first elector
// or group that subscribes, stopped with the last) LISTENs on a connection taken
// from the pool, or on one of its own with [ListenDSN]. A store on a *sql.DB
// ([NewDB]) listens only with [ListenDSN]; otherwise it wakes only the electors and
// groups of this process.
type Store struct{ core sqlstore.Core }

// Option configures a [Store] in [New] or [NewDB].
type Option func(*options)

// options are the settings of [New] and [NewDB]. listener, when set, builds the
// store's listener (a closure, so that only programs that call [ListenDSN] link
// pgx's connection code).
type options struct {
	listener func(table string, hub *notify.Hub) (notify.Listener, error)
}

// ListenDSN makes the store listen for the releases and handovers of other
// processes on a connection of its own to dsn, instead of one taken from the pool.
// Give it a DSN that reaches PostgreSQL directly (or PgBouncer in session mode)
// when the pool goes through PgBouncer in transaction pooling mode, where LISTEN
// does not work (the store's listener then never listens, and followers poll).
// It replaces the postgres.Notifier of earlier versions.
func ListenDSN(dsn string) Option {
	return func(o *options) {
		o.listener = func(table string, hub *notify.Hub) (notify.Listener, error) {
			return dsnListener(listenConfig{DSN: dsn, Table: table}, hub)
		}
	}
}

// listen sets the listener of c: the one of [ListenDSN] when given, else one on a
// connection taken from pool when not nil.
func listen(c *sqlstore.Core, pool *pgxpool.Pool, opts []Option) error {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.listener != nil:
		l, err := o.listener(c.Table(), c.Hub())
		if err != nil {
			return fmt.Errorf("postgres: ListenDSN: %w", err)
		}
		c.Listen(l)
	case pool != nil:
		c.Listen(poolListener(pool, c.Table(), c.Hub()))
	}
	return nil
}

// New returns a store on pool for the election table (empty means
// [schema.DefaultTable]).
func New(pool *pgxpool.Pool, table string, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil *pgxpool.Pool", store.ErrInvalidArgument)
	}
	c, err := sqlstore.New(schema.Postgres, table, pgxBackend{pool}, classify)
	if err != nil {
		return nil, err
	}
	if err := listen(&c, pool, opts); err != nil {
		return nil, err
	}
	return &Store{c}, nil
}

// NewDB returns a store on a *sql.DB opened with pgx's stdlib driver
// (import _ "github.com/jackc/pgx/v5/stdlib"; sql.Open("pgx", dsn)).
func NewDB(db *sql.DB, table string, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", store.ErrInvalidArgument)
	}
	c, err := sqlstore.New(schema.Postgres, table, sqlstore.SQLBackend(db), classify)
	if err != nil {
		return nil, err
	}
	if err := listen(&c, nil, opts); err != nil {
		return nil, err
	}
	return &Store{c}, nil
}

// Open opens a small pool for elections from a DSN in any form that the
// casleader command takes ("postgres://user:pass@host:5432/db", also
// postgresql://) or pgx's own (a key=value DSN). It connects lazily. Its errors
// never quote the DSN.
//
// The pool pings a connection before handing it out only when it has been idle
// for at least a minute. pgxpool's default pings every connection idle for more
// than a second: at a heartbeat or poll interval of a second or more that is every
// statement, so each renewal and read cost two round trips. A connection that
// broke while idle for less fails its statement instead, which the elector treats
// as a transient error (retried within the renew deadline, an ambiguous write
// settled by one read), and pgxpool then drops it.
func Open(ctx context.Context, s string) (*pgxpool.Pool, error) {
	cfg, err := openConfig(s)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open PostgreSQL: %w", secret.RedactError(err, s))
	}
	return pool, nil
}

// pingIdle is how long a connection of a pool from [Open] must have been idle
// before the pool pings it on acquire: longer than the elector's heartbeat and
// poll intervals (2 s, 5 s, and the 15 s lease by default) and than any sensible
// setting of them, so that steady-state statements cost one round trip.
const pingIdle = time.Minute

// openConfig is the pool configuration of [Open].
func openConfig(s string) (*pgxpool.Config, error) {
	cfg, err := parseConfig(s, pgxpool.ParseConfig)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = sqlstore.DefaultPoolSize
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = sqlstore.DefaultDialTimeout
	}
	cfg.ShouldPing = shouldPing
	return cfg, nil
}

// parseConfig reads s with dsn.ForDialect, then with parse (pgx's), and describes
// a failure in words: pgx's messages quote the DSN.
func parseConfig[C any](s string, parse func(string) (C, error)) (C, error) {
	t, err := dsn.ForDialect(schema.Postgres, s)
	if err != nil {
		var zero C
		return zero, fmt.Errorf("postgres: %w: %w", store.ErrInvalidArgument, err)
	}
	cfg, err := parse(t.Driver)
	if err != nil {
		return cfg, fmt.Errorf("postgres: %w: %w: PostgreSQL DSN: %s: %s", store.ErrInvalidArgument, dsn.ErrBad, dsn.Problem(err), dsn.EncodeHint)
	}
	return cfg, nil
}

// shouldPing is the pool's ShouldPing: ping only connections idle for pingIdle.
func shouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool {
	return p.IdleDuration >= pingIdle
}

// classify marks pgx's and the server's errors with the kinds of package store.
func classify(err error) error {
	if errors.Is(err, pgconn.ErrReadOnlyConnection) {
		// pgx's target_session_attrs=read-write tried every host of a multi-host DSN
		// and found none writable (each one read-only, or down): a failover in
		// progress, before the standby is promoted. Not a lost race and not a
		// deployment error: the elector retries until a primary is back.
		return fmt.Errorf("%w: no host of the DSN accepts writes (target_session_attrs=read-write found only read-only or unreachable servers: a failover in progress, or no primary among the hosts; retrying): %w", store.ErrNotWritable, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "42P01": // undefined_table
			return fmt.Errorf("%w: %w", sqlstore.ErrMissingTable, err)
		case pe.Code == "3F000": // invalid_schema_name
			return fmt.Errorf("%w: %w", sqlstore.ErrNoSchema, err)
		case pe.Code == "42703", pe.Code == "42804", pe.Code == "23502", // undefined_column, datatype_mismatch, not_null_violation
			pe.Code == "42883", pe.Code == "22003", pe.Code == "22001": // undefined_function (an operator on a column of another type), numeric_value_out_of_range, string_data_right_truncation
			return fmt.Errorf("%w: %w", sqlstore.ErrWrongColumns, err)
		case pe.Code == "42501": // insufficient_privilege
			return fmt.Errorf("%w: %w", sqlstore.ErrNoPrivilege, err)
		case strings.HasPrefix(pe.Code, "28"), pe.Code == "3D000": // invalid authorization, invalid_catalog_name
			return fmt.Errorf("%w: %w", store.ErrDeployment, err)
		case pe.Code == "25006": // read_only_sql_transaction
			return fmt.Errorf("%w: %w", store.ErrNotWritable, err)
		case pe.Code == "40001", pe.Code == "40P01", pe.Code == "55P03", // serialization, deadlock, lock not available
			strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"), // connection, operator intervention
			pe.Code == "53300", pe.Code == "57014": // too many connections, query canceled
			return fmt.Errorf("%w: %w", store.ErrTransient, err)
		}
	}
	return sqlstore.ClassifyCommon(err)
}
