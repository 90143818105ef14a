package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// electionStore is what the commands need from a store: the elector's operations
// ([store.Driver]) and the members table's creation and name. *mysql.Store,
// *postgres.Store and *sqlite.Store implement it.
type electionStore interface {
	store.Driver
	CreateMembersTable(ctx context.Context) error
	MembersTable() string
	Table() string
}

var (
	_ electionStore = (*mysql.Store)(nil)
	_ electionStore = (*postgres.Store)(nil)
	_ electionStore = (*sqlite.Store)(nil)
)

// database is an open election store.
type database struct {
	target
	mode openMode
	st   electionStore
	// keys lists the election keys in the table. The store has no such method yet,
	// so the command runs its own SELECT (see listKeys).
	keys  func(ctx context.Context) ([]string, error)
	close func()
}

// openMode says whether a command may create the database (SQLite file) or needs it.
type openMode int

const (
	mustExist openMode = iota // status, run, resign, handover: a missing SQLite file is an error
	mayCreate                 // migrate, demo: create the SQLite file
)

// open resolves --dsn and opens the store. It does no I/O (pools connect lazily, and
// a SQLite file is created at the first statement); call check to find out whether
// the table is usable.
func (a *app) open(ctx context.Context, mode openMode) (*database, error) {
	t, err := a.target()
	if err != nil {
		return nil, err
	}
	d := &database{target: t, mode: mode}
	switch t.dialect {
	case schema.SQLite:
		db, err := sqlite.Open(t.driver)
		if err != nil {
			return nil, a.storeError("open SQLite", t, err)
		}
		st, err := sqlite.New(db, a.table)
		if err != nil {
			db.Close()
			return nil, usageError(a.cmd, err)
		}
		d.st, d.close = st, func() { db.Close() }
		d.keys = func(ctx context.Context) ([]string, error) { return listKeysSQL(ctx, db, schema.SQLite, a.table) }
	case schema.MySQL:
		db, err := mysql.Open(t.driver)
		if err != nil {
			return nil, a.storeError("open MySQL", t, err)
		}
		st, err := mysql.New(db, a.table)
		if err != nil {
			db.Close()
			return nil, usageError(a.cmd, err)
		}
		d.st, d.close = st, func() { db.Close() }
		d.keys = func(ctx context.Context) ([]string, error) { return listKeysSQL(ctx, db, schema.MySQL, a.table) }
	case schema.Postgres:
		pool, err := postgres.Open(ctx, t.driver)
		if err != nil {
			return nil, a.storeError("open PostgreSQL", t, err)
		}
		st, err := postgres.New(pool, a.table)
		if err != nil {
			pool.Close()
			return nil, usageError(a.cmd, err)
		}
		d.st, d.close = st, pool.Close
		d.keys = func(ctx context.Context) ([]string, error) { return listKeysPgx(ctx, pool, a.table) }
	default:
		return nil, usagef(a.cmd, "--dsn: unsupported dialect %q", t.dialect)
	}
	return d, nil
}

// check verifies that the election table exists with casleader's columns.
func (a *app) check(ctx context.Context, d *database) error {
	if d.dialect == schema.SQLite && d.mode == mustExist {
		// Do not leave an empty database file behind for a mistyped path.
		if _, err := os.Stat(d.driver); errors.Is(err, fs.ErrNotExist) {
			return &exitError{code: exitDatabase,
				err:  fmt.Errorf("the SQLite database %s does not exist", d.driver),
				hint: fmt.Sprintf("create it with 'casleader --dsn %s migrate', or point --dsn (or $%s) at your database", redact(d.raw), envDSN)}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := d.st.Check(ctx); err != nil {
		return a.storeError(fmt.Sprintf("table %s in %s", d.st.Table(), redact(d.raw)), d.target, err)
	}
	return nil
}

// listKeysSQL lists the election keys through database/sql.
//
// TODO(store): this belongs in package store (e.g. Keys(ctx) ([]string, error) per
// dialect, with its error classification); it is here because the command may not
// change the store.
func listKeysSQL(ctx context.Context, db *sql.DB, d schema.Dialect, table string) ([]string, error) {
	q, err := keysQuery(d, table)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list keys in %s: %w", table, err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("list keys in %s: %w", table, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys in %s: %w", table, err)
	}
	return keys, nil
}

// listKeysPgx lists the election keys through pgx, in exec mode (no named prepared
// statements, as the store does, so it works through PgBouncer).
func listKeysPgx(ctx context.Context, pool *pgxpool.Pool, table string) ([]string, error) {
	q, err := keysQuery(schema.Postgres, table)
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, q, pgx.QueryExecModeExec)
	if err != nil {
		return nil, fmt.Errorf("list keys in %s: %w", table, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list keys in %s: %w", table, err)
	}
	return keys, nil
}

func keysQuery(d schema.Dialect, table string) (string, error) {
	quoted, err := ident.Quote(d, table)
	if err != nil {
		return "", err
	}
	return "SELECT elect_key FROM " + quoted + " ORDER BY elect_key", nil
}
