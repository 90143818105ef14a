// Package litedb gives tests SQLite databases; it imports only the SQLite driver.
package litedb

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/casleader/casleader/store/sqlite"
)

// SQLite returns a database in a new file under t.TempDir, closed when t ends.
func SQLite(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "casleader.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(32)
	t.Cleanup(func() { db.Close() })
	return db
}
