package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader/schema"
)

// Postgres is the store for PostgreSQL 12+, through a *pgxpool.Pool or a *sql.DB
// opened with pgx's stdlib driver.
//
// Every statement is a single autocommit statement without server-side prepared
// statements (pgx's exec mode), so the store works through PgBouncer in transaction
// pooling mode. tick_time is a timestamptz written with clock_timestamp().
type Postgres struct{ core }

// NewPostgres returns a store on pool for the election table (empty means
// [schema.DefaultTable]).
func NewPostgres(pool *pgxpool.Pool, table string) (*Postgres, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil *pgxpool.Pool", ErrInvalidArgument)
	}
	c, err := newCore(schema.Postgres, table, pgxBackend{pool}, classifyPostgres, postgresQueries)
	if err != nil {
		return nil, err
	}
	return &Postgres{c}, nil
}

// NewPostgresDB returns a store on a *sql.DB opened with pgx's stdlib driver
// (import _ "github.com/jackc/pgx/v5/stdlib"; sql.Open("pgx", dsn)).
func NewPostgresDB(db *sql.DB, table string) (*Postgres, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidArgument)
	}
	c, err := newCore(schema.Postgres, table, sqlBackend{db}, classifyPostgres, postgresQueries)
	if err != nil {
		return nil, err
	}
	return &Postgres{c}, nil
}

// OpenPostgres opens a small pool for elections from a libpq-style URL or key=value
// DSN. It connects lazily.
func OpenPostgres(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: parse PostgreSQL DSN: %w", RedactError(err, dsn))
	}
	cfg.MaxConns = defaultPoolSize
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultDialTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open PostgreSQL: %w", RedactError(err, dsn))
	}
	return pool, nil
}

// NotifyChannel is the PostgreSQL notification channel on which release and
// handover writes announce a free (or handed-over) lease, with the payload given by
// [NotifyPayload]. Package notify listens on it.
const NotifyChannel = "casleader"

// NotifyPayload returns the payload of the notification sent when the lease of key in
// table is released or handed over: the table name as configured, a space, the key.
// Table names hold no space, so the first space separates the two.
func NotifyPayload(table, key string) string { return table + " " + key }

// pgNotify is the SELECT that follows a release or handover's CTE u: one
// notification per row u returns, and one result row per notification, holding the
// columns cols of u (u must return elect_key too).
func pgNotify(table, cols string) string {
	// table passed schema.ValidateTable: letters, digits, underscores and one dot,
	// safe inside a string literal.
	return `SELECT ` + cols + ` FROM (SELECT ` + cols + `, pg_notify('` + NotifyChannel + `', '` + table + ` ' || elect_key) FROM u) AS n`
}

const (
	// pgAge is the age of tick_time by the database clock, in microseconds.
	pgAge = `(EXTRACT(EPOCH FROM (clock_timestamp() - tick_time)) * 1000000)::bigint`
	// pgEpochMicros is the database clock in microseconds since the Unix epoch:
	// statement_timestamp() is fixed for the statement, so every use gives the same
	// value. It is the first term of an inserted row.
	pgEpochMicros = `(EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::bigint`
	// pgNewTerm is a new term (see [core.Elect]). PostgreSQL computes every
	// assignment from the old row.
	pgNewTerm = `GREATEST(version + 1, ` + pgEpochMicros + `)`
)

func postgresQueries(t, table string) queries {
	const now = "clock_timestamp()"
	return queries{
		observe: `SELECT version, leader_id, term, ` + pgAge + `, handover_to, stepdown FROM ` + t + ` WHERE elect_key = $1`,
		insert: `INSERT INTO ` + t + ` (elect_key, version, leader_id, term, tick_time, handover_to, stepdown, create_time, update_time)` +
			` VALUES ($1, ` + pgEpochMicros + `, $2, ` + pgEpochMicros + `, ` + now + `, '', 0, ` + now + `, ` + now + `) ON CONFLICT (elect_key) DO NOTHING RETURNING term`,
		elect: `UPDATE ` + t + ` SET version = ` + pgNewTerm + `, term = ` + pgNewTerm +
			`, leader_id = $1, tick_time = ` + now + `, handover_to = '', stepdown = 0, update_time = ` + now +
			` WHERE elect_key = $2 AND version = $3 AND (leader_id = '' OR tick_time <= clock_timestamp() - $4::bigint * interval '1 microsecond') RETURNING term`,
		renew: `UPDATE ` + t + ` SET version = $1, tick_time = ` + now + `, update_time = ` + now +
			` WHERE elect_key = $2 AND version = $3 AND leader_id = $4`,
		release: `WITH u AS (UPDATE ` + t + ` SET version = $1, leader_id = '', tick_time = ` + now + `, handover_to = '', stepdown = 0, update_time = ` + now +
			` WHERE elect_key = $2 AND version = $3 AND leader_id = $4 RETURNING elect_key) ` + pgNotify(table, "elect_key"),
		handover: `WITH u AS (UPDATE ` + t + ` SET version = ` + pgNewTerm + `, term = ` + pgNewTerm +
			`, leader_id = $1, tick_time = ` + now + `, handover_to = $1, stepdown = 0, update_time = ` + now +
			` WHERE elect_key = $2 AND version = $3 AND leader_id = $4 RETURNING elect_key, term) ` + pgNotify(table, "term"),
		request: `UPDATE ` + t + ` SET version = $1, handover_to = $2, stepdown = 1, update_time = ` + now +
			` WHERE elect_key = $3 AND version = $4 AND leader_id <> ''`,
		check: `SELECT ` + strings.Join(schema.Columns, ", ") + ` FROM ` + t + ` WHERE false`,
	}
}

func classifyPostgres(err error) error {
	if errors.Is(err, pgconn.ErrReadOnlyConnection) {
		// pgx's target_session_attrs=read-write tried every host of a multi-host DSN
		// and found none writable (each one read-only, or down): a failover in
		// progress, before the standby is promoted. Not a lost race and not a
		// deployment error: the elector retries until a primary is back.
		return fmt.Errorf("%w: no host of the DSN accepts writes (target_session_attrs=read-write found only read-only or unreachable servers: a failover in progress, or no primary among the hosts; retrying): %w", ErrNotWritable, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "42P01", pe.Code == "3F000": // undefined_table, invalid_schema_name
			return fmt.Errorf("%w: %w", errMissingTable, err)
		case pe.Code == "42703", pe.Code == "42804", pe.Code == "23502", // undefined_column, datatype_mismatch, not_null_violation
			pe.Code == "42883", pe.Code == "22003", pe.Code == "22001": // undefined_function (an operator on a column of another type), numeric_value_out_of_range, string_data_right_truncation
			return fmt.Errorf("%w: %w", errWrongColumns, err)
		case pe.Code == "42501": // insufficient_privilege
			return fmt.Errorf("%w: %w", errNoPrivilege, err)
		case strings.HasPrefix(pe.Code, "28"), pe.Code == "3D000": // invalid authorization, invalid_catalog_name
			return fmt.Errorf("%w: %w", ErrDeployment, err)
		case pe.Code == "25006": // read_only_sql_transaction
			return fmt.Errorf("%w: %w", ErrNotWritable, err)
		case pe.Code == "40001", pe.Code == "40P01", pe.Code == "55P03", // serialization, deadlock, lock not available
			strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"), // connection, operator intervention
			pe.Code == "53300", pe.Code == "57014": // too many connections, query canceled
			return fmt.Errorf("%w: %w", ErrTransient, err)
		}
	}
	return classifyCommon(err)
}

// pgxBackend runs statements through a pgx pool in exec mode: one round trip, no
// named prepared statements, so PgBouncer's transaction pooling works.
type pgxBackend struct{ pool *pgxpool.Pool }

func (b pgxBackend) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := b.pool.Exec(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (b pgxBackend) queryRow(ctx context.Context, query string, args ...any) scanner {
	return b.pool.QueryRow(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...)
}
