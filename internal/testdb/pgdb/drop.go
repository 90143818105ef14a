package pgdb

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testname"
)

// A test binary that links this package drops its tests' tables on the PostgreSQL
// server of CASLEADER_POSTGRES_DSN when they end (see package testname).
func init() { testname.AddDropper("PostgreSQL", Drop) }

// Drop drops the tables whose names start with prefix on the PostgreSQL server of
// CASLEADER_POSTGRES_DSN and returns their names; with keep set it only lists them.
// Without the variable it does nothing. It uses a connection of its own, closed
// before it returns, and waits at most 10 s for a lock that a straggler holds.
func Drop(ctx context.Context, prefix string, keep bool) ([]string, error) {
	dsn := os.Getenv(testdb.EnvPostgres)
	if dsn == "" {
		return nil, nil
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, secret.RedactError(err, dsn)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
		WHERE tablename LIKE $1 AND schemaname NOT IN ('pg_catalog', 'information_schema')
		ORDER BY tablename DESC`, testname.LikePrefix(prefix))
	if err != nil {
		return nil, fmt.Errorf("list the tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || keep || len(tables) == 0 {
		return tables, err
	}
	if _, err := conn.Exec(ctx, "SET lock_timeout = '10s'"); err != nil {
		return nil, fmt.Errorf("set lock_timeout: %w", err)
	}
	for _, tb := range tables {
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+tb+" CASCADE"); err != nil {
			return tables, fmt.Errorf("drop table %s: %w", tb, err)
		}
	}
	return tables, nil
}
