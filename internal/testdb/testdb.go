// Package testdb gives tests real databases.
//
// DSNs come from CASLEADER_MYSQL_DSN (go-sql-driver format, e.g.
// "root@tcp(127.0.0.1:3306)/test") and CASLEADER_POSTGRES_DSN (e.g.
// "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"). Where a variable is unset
// and a Docker engine answers, mysql:8.4 or postgres:17 is started once per test binary
// with dockertest (and expires by itself after ten minutes). Otherwise the test is
// skipped with a message naming the variable, unless CASLEADER_REQUIRE_DB=1, which
// turns every such skip into a failure: CI sets it so it can never go green by skipping.
//
// Each test gets its own table ([Table]) so tests run in parallel.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ory/dockertest/v3"

	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
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
	return dsn(t, EnvMySQL, &mysqlDocker)
}

// PostgresDSN returns the DSN of a PostgreSQL server, or skips t.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return dsn(t, EnvPostgres, &postgresDocker)
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

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// Name returns a unique identifier for t, usable as a table name or an election key:
// "t_" + a readable part of the test name + a random suffix.
func Name(t testing.TB) string {
	n := nonIdent.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "t_" + strings.Trim(n, "_") + "_" + hex.EncodeToString(b)
}

type docker struct {
	once sync.Once
	dsn  string
	err  error
}

var mysqlDocker, postgresDocker docker

func dsn(t testing.TB, env string, d *docker) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	d.once.Do(func() {
		if env == EnvMySQL {
			d.dsn, d.err = startMySQL()
		} else {
			d.dsn, d.err = startPostgres()
		}
	})
	if d.err != nil {
		Unavailable(t, fmt.Sprintf("%s is not set and no Docker engine could start a server (%v): set %s (and %s) to run this test", env, d.err, env, map[string]string{EnvMySQL: EnvPostgres, EnvPostgres: EnvMySQL}[env]))
	}
	return d.dsn
}

func dockerPool() (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, err
	}
	if err := pool.Client.Ping(); err != nil {
		return nil, fmt.Errorf("docker engine does not answer: %w", err)
	}
	pool.MaxWait = 2 * time.Minute
	return pool, nil
}

func startMySQL() (string, error) {
	pool, err := dockerPool()
	if err != nil {
		return "", err
	}
	res, err := pool.Run("mysql", "8.4", []string{"MYSQL_ALLOW_EMPTY_PASSWORD=yes", "MYSQL_DATABASE=test"})
	if err != nil {
		return "", err
	}
	_ = res.Expire(600)
	dsn := fmt.Sprintf("root@tcp(127.0.0.1:%s)/test", res.GetPort("3306/tcp"))
	err = pool.Retry(func() error {
		db, err := mysql.Open(dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.Ping()
	})
	return dsn, err
}

func startPostgres() (string, error) {
	pool, err := dockerPool()
	if err != nil {
		return "", err
	}
	res, err := pool.Run("postgres", "17", []string{"POSTGRES_HOST_AUTH_METHOD=trust", "POSTGRES_DB=test"})
	if err != nil {
		return "", err
	}
	_ = res.Expire(600)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%s/test?sslmode=disable", res.GetPort("5432/tcp"))
	err = pool.Retry(func() error {
		p, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			return err
		}
		defer p.Close()
		return p.Ping(context.Background())
	})
	return dsn, err
}
