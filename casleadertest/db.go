package casleadertest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/internal/testname"
	"github.com/casleader/casleader/schema"
	mysqlstore "github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// Dialect names a database engine.
type Dialect string

// The database engines of [NewDB].
const (
	MySQL    Dialect = "mysql"    // MySQL or MariaDB, from CASLEADER_MYSQL_DSN
	Postgres Dialect = "postgres" // PostgreSQL, from CASLEADER_POSTGRES_DSN
	SQLite   Dialect = "sqlite"   // a file in the test's temporary directory
)

// Environment variables read by [NewDB].
const (
	EnvMySQL    = "CASLEADER_MYSQL_DSN"    // go-sql-driver format, e.g. root@tcp(127.0.0.1:3306)/test
	EnvPostgres = "CASLEADER_POSTGRES_DSN" // e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable
	EnvRequire  = "CASLEADER_REQUIRE_DB"   // "1": a database that is not available fails the test instead of skipping it
)

// DB is a database for one test: a fresh, empty election table on it.
type DB struct {
	Dialect Dialect
	DSN     string          // "" for SQLite
	SQL     *sql.DB         // open pool; closed by t.Cleanup
	Table   string          // a table name unique to the test, created, dropped at cleanup
	Store   casleader.Store // a store for Table on SQL
}

// NewDB returns a database for t of dialect d: from the DSN variable, else
// (SQLite) a file in t.TempDir(). It skips t with a message naming what to set, or
// fails it under CASLEADER_REQUIRE_DB=1.
func NewDB(t testing.TB, d Dialect) *DB {
	t.Helper()
	db := &DB{Dialect: d, Table: testname.Name(t)}
	var err error
	switch d {
	case MySQL, Postgres:
		env := EnvMySQL
		if d == Postgres {
			env = EnvPostgres
		}
		db.DSN = os.Getenv(env)
		if db.DSN == "" {
			msg := fmt.Sprintf("casleadertest: %s is not set: set it to the DSN of a test server (an account that may create tables) to run this test on %s", env, d)
			if os.Getenv(EnvRequire) == "1" {
				t.Fatalf("%s (%s=1 forbids skipping)", msg, EnvRequire)
			}
			t.Skip(msg)
		}
		if d == MySQL {
			db.SQL, err = mysqlstore.Open(db.DSN)
		} else {
			db.SQL, err = sql.Open("pgx", db.DSN)
		}
		err = secret.RedactError(err, db.DSN)
	case SQLite:
		db.SQL, err = sqlite.Open(filepath.Join(t.TempDir(), "casleader.db"))
	default:
		t.Fatalf("casleadertest: dialect %q: want mysql, postgres or sqlite", d)
	}
	if err != nil {
		t.Fatalf("casleadertest: open %s: %v", d, err)
	}
	db.SQL.SetMaxOpenConns(8)
	t.Cleanup(func() { db.SQL.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := schema.Apply(ctx, db.SQL, schema.Dialect(d), db.Table); err != nil {
		t.Fatalf("casleadertest: create the election table %s on %s: %v", db.Table, d, secret.RedactError(err, db.DSN))
	}
	t.Cleanup(func() {
		if d == SQLite {
			return // the file goes with the temporary directory
		}
		q, err := schema.Quote(schema.Dialect(d), db.Table)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.SQL.ExecContext(ctx, "DROP TABLE IF EXISTS "+q)
	})
	switch d {
	case MySQL:
		db.Store, err = mysqlstore.New(db.SQL, db.Table)
	case Postgres:
		db.Store, err = postgres.NewDB(db.SQL, db.Table)
	case SQLite:
		db.Store, err = sqlite.New(db.SQL, db.Table)
	}
	if err != nil {
		t.Fatalf("casleadertest: store on %s: %v", d, err)
	}
	return db
}
