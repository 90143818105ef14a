package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/casleader/casleader/internal/catalog"
)

const (
	// sqliteNow is the database clock in microseconds since the Unix epoch (at
	// millisecond resolution). 'now' is fixed for the statement, so every use gives
	// the same value.
	sqliteNow = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`
	// sqliteNewTerm is a new term (see [Core.Elect]). SQLite computes every
	// assignment from the old row.
	sqliteNewTerm = `max(version + 1, ` + sqliteNow + `)`
)

// sqliteTakeable is the condition under which an election takes the row (see
// mysqlTakeable), with the elector's ID and lease in microseconds as the given
// numbered placeholders.
func sqliteTakeable(id, lease string) string {
	return `(leader_id = '' OR ` + sqliteNow + ` - tick_time >= CASE WHEN lease > 0 THEN lease ELSE ` + lease + ` END` +
		` OR ` + sqliteHanded(id) + `)`
}

// sqliteHanded is the condition of a lease handed over to the elector whose ID is
// the given numbered placeholder and not yet claimed.
func sqliteHanded(id string) string {
	return `(leader_id = ` + id + ` AND handover_to = ` + id + ` AND stepdown = 0)`
}

func sqliteQueries(t, _ string) queries {
	return queries{
		observe: `SELECT version, leader_id, term, ` + sqliteNow + ` - tick_time, handover_to, stepdown, lease, incarnation FROM ` + t + ` WHERE elect_key = ?`,
		insert: `INSERT INTO ` + t + ` (elect_key, version, leader_id, incarnation, lease, term, tick_time, handover_to, stepdown, create_time, update_time)` +
			` VALUES (?, ` + sqliteNow + `, ?, ?, ?, ` + sqliteNow + `, ` + sqliteNow + `, '', 0, ` + sqliteNow + `, ` + sqliteNow + `) ON CONFLICT (elect_key) DO NOTHING RETURNING term`,
		elect: `UPDATE ` + t + ` SET version = ` + sqliteNewTerm + `, term = ` + sqliteNewTerm + `, leader_id = ?1, incarnation = ?2, lease = ?3, tick_time = ` + sqliteNow + `, handover_to = '', stepdown = 0, update_time = ` + sqliteNow +
			` WHERE elect_key = ?4 AND version = ?5 AND ` + sqliteTakeable("?1", "?3") + ` RETURNING term`,
		electReleased: `UPDATE ` + t + ` SET version = ` + sqliteNewTerm + `, term = ` + sqliteNewTerm + `, leader_id = ?1, incarnation = ?2, lease = ?3, tick_time = ` + sqliteNow + `, handover_to = '', stepdown = 0, update_time = ` + sqliteNow +
			` WHERE elect_key = ?4 AND ` + releasedVersions + ` AND (leader_id = '' OR ` + sqliteHanded("?1") + `) RETURNING term`,
		renew: `UPDATE ` + t + ` SET version = ?, tick_time = ` + sqliteNow + `, update_time = ` + sqliteNow +
			` WHERE elect_key = ? AND version = ? AND leader_id = ?`,
		release: `UPDATE ` + t + ` SET version = ?, leader_id = '', incarnation = '', tick_time = ` + sqliteNow + `, handover_to = '', stepdown = 0, update_time = ` + sqliteNow +
			` WHERE elect_key = ? AND version = ? AND leader_id = ?`,
		handover: `UPDATE ` + t + ` SET version = ` + sqliteNewTerm + `, term = ` + sqliteNewTerm + `, leader_id = ?1, incarnation = ?5, tick_time = ` + sqliteNow + `, handover_to = ?6, stepdown = 0, update_time = ` + sqliteNow +
			` WHERE elect_key = ?2 AND version = ?3 AND leader_id = ?4 RETURNING term`,
		request: `UPDATE ` + t + ` SET version = ?, handover_to = ?, stepdown = 1, update_time = ` + sqliteNow +
			` WHERE elect_key = ? AND version = ? AND leader_id <> ''`,
		check: `SELECT ` + strings.Join(catalog.Columns, ", ") + ` FROM ` + t + ` WHERE 0`,
	}
}

// sqliteTick is the resolution of SQLite's clock, in microseconds.
const sqliteTick = 1000

// sqliteBackend runs every write in a transaction of its own. Opened by
// sqlite.Open, its BEGIN IMMEDIATE takes the write lock before the statement reads
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

// SQLiteBackend returns the backend for a SQLite database opened with
// modernc.org/sqlite (see above).
func SQLiteBackend(db *sql.DB) Backend { return sqliteBackend{sqlBackend{db}} }

func (b sqliteBackend) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return b.execTx(ctx, query, args...)
}

// query runs a read as it is, and a write (which returns (key) per row won, or
// (key, term) when it starts terms) in a transaction whose rows are read before it
// commits.
func (b sqliteBackend) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	if strings.HasPrefix(query, "SELECT") {
		return b.sqlBackend.Query(ctx, query, args...)
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

// writeTerm runs a write that starts a term (see [Core.writeTerm]) in a
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
