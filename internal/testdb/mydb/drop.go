package mydb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"

	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testname"
	"github.com/casleader/casleader/store/mysql"
)

// A test binary that links this package drops its tests' tables on the MySQL or
// MariaDB server of CASLEADER_MYSQL_DSN when they end (see package testname).
func init() { testname.AddDropper("MySQL/MariaDB", Drop) }

// Drop drops the tables whose names start with prefix in the database of
// CASLEADER_MYSQL_DSN and returns their names; with keep set it only lists them.
// Without the variable it does nothing. It uses a pool of its own, closed before it
// returns, and waits at most 10 s for a metadata lock that a straggler holds.
func Drop(ctx context.Context, prefix string, keep bool) ([]string, error) {
	dsn := os.Getenv(testdb.EnvMySQL)
	if dsn == "" {
		return nil, nil
	}
	db, err := mysql.Open(dsn)
	if err != nil {
		return nil, secret.RedactError(err, dsn)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, secret.RedactError(err, dsn)
	}
	defer conn.Close()
	tables, err := list(ctx, conn, prefix)
	if err != nil || keep || len(tables) == 0 {
		return tables, err
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 10"); err != nil {
		return nil, fmt.Errorf("set lock_wait_timeout: %w", err)
	}
	for _, tb := range tables {
		q := "DROP TABLE IF EXISTS `" + strings.ReplaceAll(tb, "`", "``") + "`"
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return tables, fmt.Errorf("drop table %s: %w", tb, err)
		}
	}
	return tables, nil
}

// list returns the tables of the current database whose names start with prefix.
func list(ctx context.Context, conn *sql.Conn, prefix string) ([]string, error) {
	rows, err := conn.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name LIKE ? ORDER BY table_name DESC`, testname.LikePrefix(prefix))
	if err != nil {
		return nil, fmt.Errorf("list the tables: %w", err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var tb string
		if err := rows.Scan(&tb); err != nil {
			return nil, fmt.Errorf("list the tables: %w", err)
		}
		tables = append(tables, tb)
	}
	return tables, rows.Err()
}
