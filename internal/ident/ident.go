// Package ident checks and quotes the table names that casleader puts into SQL
// text: a name is never pasted into a statement unchecked. Package schema (DDL,
// Apply), the stores and the tools use it; schema re-exports its errors
// (schema.ErrInvalidTable, schema.ErrUnknownDialect), which users match.
//
// It is a leaf package, apart from schema, because internal/catalog (the checks of
// an existing table) imports schema, and schema's DDL needs the quoting.
package ident

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidTable is returned for a table name that is not a plain SQL identifier
// (schema.ErrInvalidTable).
var ErrInvalidTable = errors.New("schema: invalid table name")

// ErrUnknownDialect is returned for a dialect other than "mysql", "postgres" and
// "sqlite" (schema.ErrUnknownDialect).
var ErrUnknownDialect = errors.New("schema: unknown dialect")

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

// Quote validates name and returns it quoted for dialect d (a schema.Dialect).
func Quote[D ~string](d D, name string) (string, error) {
	if err := ValidateTable(name); err != nil {
		return "", err
	}
	q := `"`
	switch d {
	case "mysql":
		q = "`"
	case "postgres", "sqlite":
	default:
		return "", fmt.Errorf("%w %q: use \"mysql\", \"postgres\" or \"sqlite\"", ErrUnknownDialect, string(d))
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, "."), nil
}

// membersSuffix is appended to the election table's name to name its members table.
const membersSuffix = "_members"

// MembersTable returns the name of the members table of the election table table:
// a schema qualifier is kept, and "_members" appended ("ops.elections" gives
// "ops.elections_members"). It fails when the name would not be a valid table name
// (longer than 63 characters).
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
