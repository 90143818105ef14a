// Package pgdb gives tests a PostgreSQL pool; it imports only pgx, so the tests
// of a package that PostgreSQL users build load no other database driver.
package pgdb

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/internal/testdb"
)

// Postgres returns a pool on the PostgreSQL server, closed when t ends.
func Postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PostgresAt(t, testdb.PostgresDSN(t))
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
