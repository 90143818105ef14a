// Package testdb gives tests real databases.
//
// DSNs come from CASLEADER_MYSQL_DSN (go-sql-driver format, e.g.
// "root@tcp(127.0.0.1:3306)/test") and CASLEADER_POSTGRES_DSN (e.g.
// "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"). Where a variable is unset
// the test is skipped with a message naming the variable, unless
// CASLEADER_REQUIRE_DB=1, which turns every such skip into a failure: CI sets it so it
// can never go green by skipping. SQLite needs no server and is always available.
//
// Each test gets its own table ([Table]) so tests run in parallel.
package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/casleader/casleader/internal/testname"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/sqlite"
)

// Environment variables read by this package.
const (
	EnvMySQL    = "CASLEADER_MYSQL_DSN"
	EnvPostgres = "CASLEADER_POSTGRES_DSN"
	EnvRequire  = "CASLEADER_REQUIRE_DB"
)

// Unavailable skips t with msg, or fails it when CASLEADER_REQUIRE_DB=1.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s (%s=1 forbids skipping)", msg, EnvRequire)
	}
	t.Skip(msg)
}

// MySQLDSN returns the DSN of a MySQL or MariaDB server, or skips t.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	return dsn(t, EnvMySQL)
}

// PostgresDSN returns the DSN of a PostgreSQL server, or skips t.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return dsn(t, EnvPostgres)
}

// MySQL returns a pool on the MySQL or MariaDB server, closed when t ends.
func MySQL(t testing.TB) *sql.DB {
	t.Helper()
	db, err := mysql.Open(MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(32)
	t.Cleanup(func() { db.Close() })
	return db
}

// Postgres returns a pool on the PostgreSQL server, closed when t ends.
func Postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PostgresAt(t, PostgresDSN(t))
}

// PostgresAt returns a pool on dsn, closed when t ends.
func PostgresAt(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(secret.RedactError(err, dsn))
	}
	cfg.MaxConns = 32
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(secret.RedactError(err, dsn))
	}
	t.Cleanup(pool.Close)
	return pool
}

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

// Name returns a unique identifier for t, usable as a table name or an election key:
// "t_" + a readable part of the test name + a random suffix.
func Name(t testing.TB) string { return testname.Name(t) }

func dsn(t testing.TB, env string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	Unavailable(t, fmt.Sprintf("%s is not set: set it to the DSN of a test server to run this test (%s and %s; `bash .ci/run` starts both and sets them)", env, EnvMySQL, EnvPostgres))
	return ""
}
