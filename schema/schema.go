// Package schema owns the election table: its dialects, its name rules and its DDL.
//
// The DDL for each dialect is embedded from sql/*.sql. [Apply] creates the table (and
// its members table, see [MembersDDL]) if it does not exist and is safe to run any
// number of times. Table names are checked ([ErrInvalidTable]) and quoted before
// they reach any SQL text: a name is never pasted into a statement unchecked.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/casleader/casleader/internal/ident"
)

// Dialect names a SQL dialect that casleader speaks.
type Dialect string

// The supported dialects.
const (
	MySQL    Dialect = "mysql"    // MySQL 8.0+ and MariaDB 10.6+
	Postgres Dialect = "postgres" // PostgreSQL 12+
	SQLite   Dialect = "sqlite"   // SQLite 3.42+
)

// DefaultTable is the table used when none is configured.
const DefaultTable = "casleader_election"

// ErrInvalidTable is returned for a table name that is not a plain SQL identifier:
// casleader's tables are named by 1 to 63 ASCII letters, digits and underscores,
// not starting with a digit, optionally qualified by a schema (database) name of
// the same form and a dot, as in "ops.elections"; the members table's name, the
// election table's with "_members" appended, must fit too.
var ErrInvalidTable = ident.ErrInvalidTable

// ErrWrongTable is returned by the stores' checks (CreateTable, Check) for a table
// that lacks one of casleader's columns or has one of another type, or another
// primary key. Elections on such a table would fail on every statement, or worse,
// silently store other values than they wrote (a MySQL INT clamps a BIGINT term),
// so it is refused before any election starts. The error says how to fix the table.
var ErrWrongTable = errors.New("schema: the table's columns are not casleader's")

// ErrUnknownDialect is returned for a dialect other than [MySQL], [Postgres] and [SQLite].
var ErrUnknownDialect = ident.ErrUnknownDialect

//go:embed sql/*.sql
var files embed.FS

// DDL returns the CREATE TABLE IF NOT EXISTS statement for dialect d and table name.
func DDL(d Dialect, table string) (string, error) {
	quoted, err := ident.Quote(d, table)
	if err != nil {
		return "", err
	}
	b, err := files.ReadFile("sql/" + string(d) + ".sql")
	if err != nil {
		return "", fmt.Errorf("%w %q", ErrUnknownDialect, string(d))
	}
	return strings.ReplaceAll(string(b), "{{TABLE}}", quoted), nil
}

// MembersDDL returns the CREATE TABLE IF NOT EXISTS statement of the members table
// of the election table table for dialect d. The members table records who takes
// part in each election, and when each was last seen; its name is the election
// table's with "_members" appended, a schema qualifier kept ("ops.elections" gives
// "ops.elections_members").
func MembersDDL(d Dialect, table string) (string, error) {
	name, err := ident.MembersTable(table)
	if err != nil {
		return "", err
	}
	quoted, err := ident.Quote(d, name)
	if err != nil {
		return "", err
	}
	b, err := files.ReadFile("sql/" + string(d) + "_members.sql")
	if err != nil {
		return "", fmt.Errorf("%w %q", ErrUnknownDialect, string(d))
	}
	return strings.ReplaceAll(string(b), "{{TABLE}}", quoted), nil
}

// Execer is the part of *sql.DB, *sql.Conn and *sql.Tx that [Apply] needs.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Apply creates the election table for dialect d, and its members table (see
// [MembersDDL]), if they do not exist yet. It is idempotent. It needs the right to
// create tables; running elections afterwards needs only SELECT, INSERT and UPDATE
// on the election table, and SELECT, INSERT, UPDATE and DELETE on the members table.
func Apply(ctx context.Context, db Execer, d Dialect, table string) error {
	ddl, err := DDL(d, table)
	if err != nil {
		return err
	}
	mddl, err := MembersDDL(d, table)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("schema: create table %q (%s): %w", table, d, err)
	}
	if _, err := db.ExecContext(ctx, mddl); err != nil {
		name, _ := ident.MembersTable(table)
		return fmt.Errorf("schema: create members table %q (%s): %w", name, d, err)
	}
	return nil
}
