// Package testdb gives tests real databases.
//
// DSNs come from CASLEADER_MYSQL_DSN (go-sql-driver format, e.g.
// "root@tcp(127.0.0.1:3306)/test") and CASLEADER_POSTGRES_DSN (e.g.
// "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"). Where a variable is unset
// the test is skipped with a message naming the variable, unless
// CASLEADER_REQUIRE_DB=1, which turns every such skip into a failure: CI sets it so it
// can never go green by skipping. SQLite needs no server and is always available.
//
// Each test gets its own table ([Name]) so tests run in parallel. The tables named
// after it are dropped when the test ends, on the databases whose pool package
// (pgdb, mydb) the test binary links, and kept, with a log line, when it failed
// (see package testname).
package testdb

import (
	"fmt"
	"os"
	"testing"

	"github.com/casleader/casleader/internal/testname"
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

// Name returns a unique identifier for t, usable as a table name or an election key:
// "t_" + a readable part of the test name + a random suffix. The tables whose names
// start with it are dropped when t ends, unless t failed.
func Name(t testing.TB) string { return testname.Name(t) }

func dsn(t testing.TB, env string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	Unavailable(t, fmt.Sprintf("%s is not set: set it to the DSN of a test server to run this test (%s and %s; `bash .ci/run` starts both and sets them)", env, EnvMySQL, EnvPostgres))
	return ""
}
