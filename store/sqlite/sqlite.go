// Package sqlite is the election store for SQLite 3.42+ through the pure-Go driver
// modernc.org/sqlite, for candidates on one host and for zero-setup use. It is the
// only casleader package that imports that driver (which registers the
// database/sql driver name "sqlite").
//
// Wake-ups between processes go through a file next to the database file, named
// after it plus "-casleader": every release or handover appends a line to it, and
// the stores of other processes watch it.
package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// Store is the store for SQLite 3.42+ through the pure-Go driver modernc.org/sqlite,
// for candidates on one host and for zero-setup use. The "database clock" is the host's
// clock; tick_time holds microseconds since the Unix epoch.
type Store struct{ core sqlstore.Core }

// New returns a store on db for the election table (empty means
// [schema.DefaultTable]). Open db with [Open], or set a busy timeout and WAL
// journal mode yourself: candidates in several processes write the same file.
func New(db *sql.DB, table string) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", store.ErrInvalidArgument)
	}
	c, err := sqlstore.New(schema.SQLite, table, sqlstore.SQLiteBackend(db), classify)
	if err != nil {
		return nil, err
	}
	c.Listen(&fileWake{db: db, table: c.Table(), hub: c.Hub()})
	return &Store{c}, nil
}

// Open opens the database file at path (created if missing) with WAL journal
// mode and a 5 s busy timeout, so that candidates in several processes can share it.
func Open(path string) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: empty SQLite path", store.ErrInvalidArgument)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open SQLite %q: %w", path, err)
	}
	db.SetMaxOpenConns(sqlstore.DefaultPoolSize)
	return db, nil
}

// classify marks the driver's errors with the kinds of package store.
func classify(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		msg := se.Error()
		switch code := se.Code() & 0xff; code {
		case sqlite3.SQLITE_ERROR, sqlite3.SQLITE_SCHEMA:
			// SQLITE_SCHEMA: another connection changed the schema (a CREATE or
			// DROP of any table) while this statement was prepared, and the message
			// is what its last prepare found: a missing table is still missing.
			switch {
			case strings.Contains(msg, "no such table"), strings.Contains(msg, "unknown database"):
				return fmt.Errorf("%w: %w", sqlstore.ErrMissingTable, err)
			case strings.Contains(msg, "no such column"), strings.Contains(msg, "has no column"):
				return fmt.Errorf("%w: %w", sqlstore.ErrWrongColumns, err)
			case code == sqlite3.SQLITE_SCHEMA:
				// The next try prepares the statement again.
				return fmt.Errorf("%w: %w", store.ErrTransient, err)
			}
		case sqlite3.SQLITE_READONLY:
			return fmt.Errorf("%w: %w", store.ErrNotWritable, err)
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("%w: %w", store.ErrTransient, err)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
			return fmt.Errorf("%w: %w", store.ErrDeployment, err)
		case sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_CONSTRAINT:
			return fmt.Errorf("%w: %w", sqlstore.ErrWrongColumns, err)
		}
	}
	return sqlstore.ClassifyCommon(err)
}
