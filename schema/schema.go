// Package schema owns the election table: its dialects, its name rules and its DDL.
//
// The DDL for each dialect is embedded from sql/*.sql. [Apply] creates the table (and
// its members table, [MembersTable]) if it does not exist and is safe to run any number of times. Table names are checked by
// [ValidateTable] and quoted by [Quote] before they reach any SQL text: a name is never
// pasted into a statement unchecked.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
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

// ErrInvalidTable is returned for a table name that is not a plain SQL identifier.
var ErrInvalidTable = errors.New("schema: invalid table name")

// ErrWrongTable is returned by the stores' checks (CreateTable, Check) for a table
// that lacks one of casleader's columns or has one of another type, or another
// primary key. Elections on such a table would fail on every statement, or worse,
// silently store other values than they wrote (a MySQL INT clamps a BIGINT term),
// so it is refused before any election starts. The error says how to fix the table.
var ErrWrongTable = errors.New("schema: the table's columns are not casleader's")

// ErrUnknownDialect is returned for a dialect other than [MySQL], [Postgres] and [SQLite].
var ErrUnknownDialect = errors.New("schema: unknown dialect")

//go:embed sql/*.sql
var files embed.FS

// isIdent reports whether s is 1 to 63 ASCII letters, digits and underscores, not
// starting with a digit. (Hand-written rather than a regexp: package regexp would
// add a third of a megabyte to every program that uses casleader on MySQL.)
func isIdent(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidateTable checks that name is a table name casleader can use: an identifier of
// 1 to 63 letters, digits and underscores not starting with a digit, optionally
// qualified by a schema (database) name of the same form, as in "ops.elections".
func ValidateTable(name string) error {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return fmt.Errorf("%w %q: at most one dot (schema.table) is allowed", ErrInvalidTable, name)
	}
	for _, p := range parts {
		if !isIdent(p) {
			return fmt.Errorf("%w %q: use 1-63 ASCII letters, digits or underscores, not starting with a digit (on MySQL and PostgreSQL a database or schema name of the same form and a dot may come first, as in ops.elections)", ErrInvalidTable, name)
		}
	}
	return nil
}

// Quote validates name and returns it quoted for dialect d.
func Quote(d Dialect, name string) (string, error) {
	if err := ValidateTable(name); err != nil {
		return "", err
	}
	q := `"`
	switch d {
	case MySQL:
		q = "`"
	case Postgres, SQLite:
	default:
		return "", fmt.Errorf("%w %q: use %q, %q or %q", ErrUnknownDialect, string(d), MySQL, Postgres, SQLite)
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, "."), nil
}

// DDL returns the CREATE TABLE IF NOT EXISTS statement for dialect d and table name.
func DDL(d Dialect, table string) (string, error) {
	quoted, err := Quote(d, table)
	if err != nil {
		return "", err
	}
	b, err := files.ReadFile("sql/" + string(d) + ".sql")
	if err != nil {
		return "", fmt.Errorf("%w %q", ErrUnknownDialect, string(d))
	}
	return strings.ReplaceAll(string(b), "{{TABLE}}", quoted), nil
}

// membersSuffix is appended to the election table's name to name its members table.
const membersSuffix = "_members"

// MembersTable returns the name of the members table of the election table table:
// who takes part in each election, and when each was last seen. A schema
// qualifier is kept, and "_members" appended ("ops.elections" gives
// "ops.elections_members"). It fails when
// the name would not be a valid table name (longer than 63 characters).
func MembersTable(table string) (string, error) {
	if err := ValidateTable(table); err != nil {
		return "", err
	}
	name := table + membersSuffix
	if err := ValidateTable(name); err != nil {
		return "", fmt.Errorf("%w: the members table of %q would be %q, longer than 63 characters: use a shorter election table name", ErrInvalidTable, table, name)
	}
	return name, nil
}

// MembersDDL returns the CREATE TABLE IF NOT EXISTS statement of the members table
// of the election table table (named by [MembersTable]) for dialect d.
func MembersDDL(d Dialect, table string) (string, error) {
	name, err := MembersTable(table)
	if err != nil {
		return "", err
	}
	quoted, err := Quote(d, name)
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
// [MembersTable]), if they do not exist yet. It is idempotent. It needs the right to
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
		name, _ := MembersTable(table)
		return fmt.Errorf("schema: create members table %q (%s): %w", name, d, err)
	}
	return nil
}
