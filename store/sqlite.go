package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/casleader/casleader/schema"
)

// SQLite is the store for SQLite 3.42+ through the pure-Go driver modernc.org/sqlite,
// for candidates on one host and for zero-setup use. The "database clock" is the host's
// clock; tick_time holds microseconds since the Unix epoch.
type SQLite struct{ core }

// NewSQLite returns a store on db for the election table (empty means
// [schema.DefaultTable]). Open db with [OpenSQLite], or set a busy timeout and WAL
// journal mode yourself: candidates in several processes write the same file.
func NewSQLite(db *sql.DB, table string) (*SQLite, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidArgument)
	}
	c, err := newCore(schema.SQLite, table, sqliteBackend{sqlBackend{db}}, classifySQLite, sqliteQueries)
	if err != nil {
		return nil, err
	}
	return &SQLite{c}, nil
}

// OpenSQLite opens the database file at path (created if missing) with WAL journal
// mode and a 5 s busy timeout, so that candidates in several processes can share it.
func OpenSQLite(path string) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: empty SQLite path", ErrInvalidArgument)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open SQLite %q: %w", path, err)
	}
	db.SetMaxOpenConns(defaultPoolSize)
	return db, nil
}

const (
	// sqliteNow is the database clock in microseconds since the Unix epoch (at
	// millisecond resolution). 'now' is fixed for the statement, so every use gives
	// the same value.
	sqliteNow = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`
	// sqliteNewTerm is a new term (see [core.Elect]). SQLite computes every
	// assignment from the old row.
	sqliteNewTerm = `max(version + 1, ` + sqliteNow + `)`
)

func sqliteQueries(t, _ string) queries {
	return queries{
		observe: `SELECT version, leader_id, term, ` + sqliteNow + ` - tick_time, handover_to, stepdown FROM ` + t + ` WHERE elect_key = ?`,
		insert: `INSERT INTO ` + t + ` (elect_key, version, leader_id, term, tick_time, handover_to, stepdown, create_time, update_time)` +
			` VALUES (?, ` + sqliteNow + `, ?, ` + sqliteNow + `, ` + sqliteNow + `, '', 0, ` + sqliteNow + `, ` + sqliteNow + `) ON CONFLICT (elect_key) DO NOTHING RETURNING term`,
		elect: `UPDATE ` + t + ` SET version = ` + sqliteNewTerm + `, term = ` + sqliteNewTerm + `, leader_id = ?, tick_time = ` + sqliteNow + `, handover_to = '', stepdown = 0, update_time = ` + sqliteNow +
			` WHERE elect_key = ? AND version = ? AND (leader_id = '' OR ` + sqliteNow + ` - tick_time >= ?) RETURNING term`,
		renew: `UPDATE ` + t + ` SET version = ?, tick_time = ` + sqliteNow + `, update_time = ` + sqliteNow +
			` WHERE elect_key = ? AND version = ? AND leader_id = ?`,
		release: `UPDATE ` + t + ` SET version = ?, leader_id = '', tick_time = ` + sqliteNow + `, handover_to = '', stepdown = 0, update_time = ` + sqliteNow +
			` WHERE elect_key = ? AND version = ? AND leader_id = ?`,
		handover: `UPDATE ` + t + ` SET version = ` + sqliteNewTerm + `, term = ` + sqliteNewTerm + `, leader_id = ?1, tick_time = ` + sqliteNow + `, handover_to = ?1, stepdown = 0, update_time = ` + sqliteNow +
			` WHERE elect_key = ?2 AND version = ?3 AND leader_id = ?4 RETURNING term`,
		request: `UPDATE ` + t + ` SET version = ?, handover_to = ?, stepdown = 1, update_time = ` + sqliteNow +
			` WHERE elect_key = ? AND version = ? AND leader_id <> ''`,
		check: `SELECT ` + strings.Join(schema.Columns, ", ") + ` FROM ` + t + ` WHERE 0`,
	}
}

func classifySQLite(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		msg := se.Error()
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_ERROR:
			switch {
			case strings.Contains(msg, "no such table"), strings.Contains(msg, "unknown database"):
				return fmt.Errorf("%w: %w", errMissingTable, err)
			case strings.Contains(msg, "no such column"), strings.Contains(msg, "has no column"):
				return fmt.Errorf("%w: %w", errWrongColumns, err)
			}
		case sqlite3.SQLITE_READONLY:
			return fmt.Errorf("%w: %w", ErrNotWritable, err)
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("%w: %w", ErrTransient, err)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
			return fmt.Errorf("%w: %w", ErrDeployment, err)
		case sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_CONSTRAINT:
			return fmt.Errorf("%w: %w", errWrongColumns, err)
		}
	}
	return classifyCommon(err)
}

// sqliteTick is the resolution of SQLite's clock, in microseconds.
const sqliteTick = 1000

// sqliteBackend runs every write in a transaction of its own. Opened by
// [OpenSQLite], its BEGIN IMMEDIATE takes the write lock before the statement reads
// anything, so the statement waits for the lock (busy_timeout) instead of failing at
// once with SQLITE_BUSY, as an autocommit write does when another connection commits
// between its read and its write.
//
// A write that starts terms keeps the lock until the database clock has moved past
// them. Terms follow that clock, which has millisecond resolution: without the wait,
// the next writer could issue the same term within the same millisecond from a
// rolled-back row. SQLite runs one writer at a time, so every later term-issuing
// write executes at a later clock reading than the terms it follows. The wait is at
// most one tick, and only after a write that started a term.
type sqliteBackend struct{ sqlBackend }

func (b sqliteBackend) exec(ctx context.Context, query string, args ...any) (int64, error) {
	return b.execTx(ctx, query, args...)
}

// query runs a read as it is, and a write (which returns (key) per row won, or
// (key, term) when it starts terms) in a transaction whose rows are read before it
// commits.
func (b sqliteBackend) query(ctx context.Context, query string, args ...any) (rowScanner, error) {
	if strings.HasPrefix(query, "SELECT") {
		return b.sqlBackend.query(ctx, query, args...)
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	cols, err := rows.Columns()
	if err != nil {
		rows.Close()
		return nil, err
	}
	var out bufRows
	var highest int64
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return nil, err
		}
		if len(vals) == 2 {
			if term, ok := vals[1].(int64); ok {
				highest = max(highest, term)
			}
		}
		out.rows = append(out.rows, vals)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if highest > 0 {
		if err := holdPast(ctx, tx, highest); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return &out, nil
}

// writeTerm runs a write that starts a term (see [core.writeTerm]) in a
// transaction that keeps the write lock until the clock has passed the term.
func (b sqliteBackend) writeTerm(ctx context.Context, query string, args ...any) (term int64, won bool, err error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	err = tx.QueryRowContext(ctx, query, args...).Scan(&term)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, tx.Commit()
	}
	if err != nil {
		return 0, false, err
	}
	if err := holdPast(ctx, tx, term); err != nil {
		return 0, false, err
	}
	if err := tx.Commit(); err != nil {
		return 0, false, err
	}
	return term, true, nil
}

// holdPast returns when the database clock, read inside tx, is past term. A term
// more than a tick ahead of the clock came from the row's version, and the next
// term from the row is above it anyway: no wait then.
func holdPast(ctx context.Context, tx *sql.Tx, term int64) error {
	for range 20 * sqliteTick / 100 { // bounded, should the clock stand still
		var now int64
		if err := tx.QueryRowContext(ctx, `SELECT `+sqliteNow).Scan(&now); err != nil {
			return err
		}
		if now > term || term-now > sqliteTick {
			return nil
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// execTx runs one statement in a transaction of its own.
func (b sqlBackend) execTx(ctx context.Context, query string, args ...any) (int64, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// bufRows are rows read before their transaction committed.
type bufRows struct {
	rows [][]any
	cur  []any
}

func (r *bufRows) Next() bool {
	if len(r.rows) == 0 {
		return false
	}
	r.cur, r.rows = r.rows[0], r.rows[1:]
	return true
}

func (r *bufRows) Scan(dest ...any) error {
	if len(dest) != len(r.cur) {
		return fmt.Errorf("store: scan %d values into %d", len(r.cur), len(dest))
	}
	for i, v := range r.cur {
		switch d := dest[i].(type) {
		case *string:
			switch v := v.(type) {
			case string:
				*d = v
			case []byte:
				*d = string(v)
			default:
				return fmt.Errorf("store: column %d is %T, not text", i, v)
			}
		case *int64:
			n, ok := v.(int64)
			if !ok {
				return fmt.Errorf("store: column %d is %T, not an integer", i, v)
			}
			*d = n
		default:
			return fmt.Errorf("store: cannot scan into %T", d)
		}
	}
	return nil
}

func (r *bufRows) Err() error { return nil }
func (r *bufRows) Close()     {}
