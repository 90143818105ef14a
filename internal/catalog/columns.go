// Package catalog checks an existing election table against what casleader needs,
// from the columns and primary key that the database's catalog describes: the
// stores refuse a table that would fail or store other values than they write
// (an error matching [schema.ErrWrongTable] that says how to fix it), and add the
// columns of a table made by an older version (Upgrade).
package catalog

import (
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/schema"

	"fmt"
	"strconv"
	"strings"
)

// FoundColumn is a column of an existing table as the database's catalog describes
// it.
type FoundColumn struct {
	Name string
	// Type is the column's type as the catalog spells it: MySQL's COLUMN_TYPE
	// ("bigint(20)", "timestamp(6)"), PostgreSQL's format_type ("bigint",
	// "timestamp with time zone"), SQLite's declared type ("INTEGER").
	Type string
	// Collation is the column's collation (MySQL; empty elsewhere).
	Collation string
}

// columnKind is what a column must hold.
type columnKind uint8

const (
	kindName    columnKind = iota + 1 // a key or candidate ID: up to 255 bytes, compared byte for byte
	kindCounter                       // version, term: a 64-bit signed integer
	kindTick                          // tick_time: the database clock, to the microsecond
	kindFlag                          // stepdown: any integer
	kindStamp                         // create_time, update_time: bookkeeping times
)

var columnKinds = map[string]columnKind{
	"elect_key": kindName, "version": kindCounter, "leader_id": kindName, "term": kindCounter,
	"tick_time": kindTick, "handover_to": kindName, "stepdown": kindFlag,
	"lease": kindCounter, "incarnation": kindName,
	"create_time": kindStamp, "update_time": kindStamp,
}

// added holds the columns that later versions added to the election table, with
// the default that every existing row gets: [Upgrade] adds them to a table made
// by an earlier version. A row whose lease is 0 was written by such a version:
// its lease is judged by the reader's own setting (see store.Record.Lease).
var added = map[string]string{"lease": "0", "incarnation": "''"}

// Upgrade returns the statements that add to table the columns of [Columns] that
// later versions added (lease, incarnation) and that found lacks, each with its
// default, so that a table made by an earlier version keeps its rows; nil when
// none is missing. Other wrong columns are left to [CheckColumns].
func Upgrade(d schema.Dialect, table string, found []FoundColumn) ([]string, error) {
	return upgrade(d, table, found, Columns, added)
}

// MembersColumns lists the members table's columns.
var MembersColumns = []string{"elect_key", "member_id", "role", "paused", "priority", "incarnation", "seen_at"}

// membersAdded holds the columns that later versions added to the members table,
// with the default that every existing row gets (see [UpgradeMembers]). A row
// whose incarnation is empty was written by such a version.
var membersAdded = map[string]string{"incarnation": "''"}

// UpgradeMembers is [Upgrade] for the members table table: the statements that
// add the columns of [MembersColumns] that later versions added (incarnation)
// and that found lacks; nil when none is missing, or when found is not a members
// table of an earlier version (missing, or another's).
func UpgradeMembers(d schema.Dialect, table string, found []FoundColumn) ([]string, error) {
	return upgrade(d, table, found, MembersColumns, membersAdded)
}

// upgrade returns the statements that add to table the columns of cols that are
// in later (with their defaults) and that found lacks, provided found has every
// other column of cols.
func upgrade(d schema.Dialect, table string, found []FoundColumn, cols []string, later map[string]string) ([]string, error) {
	quoted, err := ident.Quote(d, table)
	if err != nil {
		return nil, err
	}
	have := make(map[string]bool, len(found))
	for _, c := range found {
		have[strings.ToLower(c.Name)] = true
	}
	for _, name := range cols {
		if _, ok := later[name]; !ok && !have[name] {
			return nil, nil // not a table of an earlier version (missing, or another's): the checks say so
		}
	}
	var out []string
	for _, name := range cols {
		if def, ok := later[name]; ok && !have[name] {
			out = append(out, addColumn(d, quoted, name, columnKinds[name])+" DEFAULT "+def)
		}
	}
	return out, nil
}

// need returns the type that the DDL of dialect d gives a column of kind k.
func need(d schema.Dialect, k columnKind) string {
	switch d {
	case schema.MySQL:
		return map[columnKind]string{
			kindName: "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", kindCounter: "BIGINT",
			kindTick: "TIMESTAMP(6)", kindFlag: "SMALLINT", kindStamp: "TIMESTAMP(6)",
		}[k]
	case schema.Postgres:
		return map[columnKind]string{
			kindName: "TEXT", kindCounter: "BIGINT", kindTick: "TIMESTAMPTZ", kindFlag: "SMALLINT", kindStamp: "TIMESTAMPTZ",
		}[k]
	default:
		if k == kindName {
			return "TEXT"
		}
		return "INTEGER"
	}
}

// The type names below are matched by hand rather than with package regexp, which
// would add a third of a megabyte to every program that uses casleader on MySQL.

// myLength matches (var)char(n) and returns n.
func myLength(t string) (n int, ok bool) {
	t, ok = strings.CutPrefix(strings.TrimPrefix(t, "var"), "char")
	if !ok {
		return 0, false
	}
	return parenInt(t)
}

// myBigint matches bigint and bigint(n).
func myBigint(t string) bool {
	t, ok := strings.CutPrefix(t, "bigint")
	return ok && (t == "" || isParenInt(t))
}

// myInt matches the MySQL integer types: [tiny|small|medium|big]int[(n)]
// [unsigned] [zerofill].
func myInt(t string) bool {
	for _, size := range []string{"tiny", "small", "medium", "big"} {
		if strings.HasPrefix(t, size+"int") {
			t = t[len(size):]
			break
		}
	}
	t, ok := strings.CutPrefix(t, "int")
	if !ok {
		return false
	}
	if strings.HasPrefix(t, "(") {
		end := strings.IndexByte(t, ')')
		if end < 0 || !isParenInt(t[:end+1]) {
			return false
		}
		t = t[end+1:]
	}
	t = strings.TrimPrefix(t, " unsigned")
	t = strings.TrimPrefix(t, " zerofill")
	return t == ""
}

// pgLength matches character(n) and character varying(n) and returns n.
func pgLength(t string) (n int, ok bool) {
	t, ok = strings.CutPrefix(t, "character")
	if !ok {
		return 0, false
	}
	return parenInt(strings.TrimPrefix(t, " varying"))
}

// parenInt matches "(digits)" and returns the number (0 when it overflows an int).
func parenInt(s string) (int, bool) {
	if !isParenInt(s) {
		return 0, false
	}
	n, _ := strconv.Atoi(s[1 : len(s)-1])
	return n, true
}

// isParenInt reports whether s is "(" + one or more ASCII digits + ")".
func isParenInt(s string) bool {
	if len(s) < 3 || s[0] != '(' || s[len(s)-1] != ')' {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// fits reports whether a column of type t (and collation coll) in dialect d holds
// what a column of kind k must hold.
func fits(d schema.Dialect, k columnKind, t, coll string) bool {
	t = strings.ToLower(strings.TrimSpace(t))
	switch d {
	case schema.MySQL:
		switch k {
		case kindName:
			if n, ok := myLength(t); ok {
				return n >= 255 && binaryCollation(coll)
			}
			return (t == "text" || t == "mediumtext" || t == "longtext") && binaryCollation(coll)
		case kindCounter:
			return myBigint(t)
		case kindTick:
			// TIMESTAMP is stored in UTC whatever the session time zone; a coarser
			// precision would truncate tick_time and make a lease look older than it is.
			return t == "timestamp(6)"
		case kindFlag:
			return myInt(t)
		case kindStamp:
			return strings.HasPrefix(t, "timestamp") || strings.HasPrefix(t, "datetime")
		}
	case schema.Postgres:
		switch k {
		case kindName:
			if n, ok := pgLength(t); ok {
				return n >= 255
			}
			return t == "text" || t == "character varying"
		case kindCounter:
			return t == "bigint"
		case kindTick:
			return t == "timestamp with time zone" || t == "timestamp(6) with time zone"
		case kindFlag:
			return t == "smallint" || t == "integer" || t == "bigint"
		case kindStamp:
			return strings.HasPrefix(t, "timestamp")
		}
	case schema.SQLite:
		// SQLite's type affinity rules (https://www.sqlite.org/datatype3.html).
		t = strings.ToUpper(t)
		integer := strings.Contains(t, "INT")
		text := !integer && (strings.Contains(t, "CHAR") || strings.Contains(t, "CLOB") || strings.Contains(t, "TEXT"))
		if k == kindName {
			return text
		}
		return integer
	}
	return false
}

// binaryCollation reports whether a MySQL collation compares byte for byte, as keys
// and candidate IDs must be ("A" and "a" are two keys).
func binaryCollation(coll string) bool {
	coll = strings.ToLower(coll)
	return coll == "binary" || strings.HasSuffix(coll, "_bin")
}

// CheckColumns checks the columns found in table for dialect d against casleader's
// [Columns]: each must exist and have a type that holds what casleader writes.
// Other columns are ignored. The error wraps [schema.ErrWrongTable], names every wrong
// column with the type found and the type needed, and says how to fix the table.
func CheckColumns(d schema.Dialect, table string, found []FoundColumn) error {
	byName := make(map[string]FoundColumn, len(found))
	for _, c := range found {
		byName[strings.ToLower(c.Name)] = c
	}
	if err := notOurs(d, table, byName); err != nil {
		return err
	}
	var wrong, fixes []string
	quoted, err := ident.Quote(d, table)
	if err != nil {
		return err
	}
	for _, name := range Columns {
		k := columnKinds[name]
		want := need(d, k)
		c, ok := byName[name]
		switch {
		case !ok:
			wrong = append(wrong, fmt.Sprintf("column %s is missing (needs %s)", name, want))
			fix := addColumn(d, quoted, name, k)
			if def, ok := added[name]; ok {
				fix += " DEFAULT " + def
			}
			fixes = append(fixes, fix)
		case !fits(d, k, c.Type, c.Collation):
			got := c.Type
			if got == "" {
				got = "no declared type"
			}
			if c.Collation != "" && k == kindName {
				got += " COLLATE " + c.Collation
			}
			wrong = append(wrong, fmt.Sprintf("column %s is %s, needs %s", name, got, want))
			fixes = append(fixes, alterColumn(d, quoted, name, k))
		}
	}
	if len(wrong) == 0 {
		return nil
	}
	how := "drop the table and re-create it with `casleader migrate` (or schema.Apply)"
	if d != schema.SQLite {
		how = "fix it with " + strings.Join(fixes, "; ") + " - or " + how
	}
	return fmt.Errorf("%w: table %s (%s): %s: %s", schema.ErrWrongTable, table, d, strings.Join(wrong, "; "), how)
}

// alterColumn and addColumn return the statement that gives table's column name
// the type of kind k. A conversion that needs care (a number into a timestamp) is
// left to the operator: the statement names the target type.
func alterColumn(d schema.Dialect, quoted, name string, k columnKind) string {
	if d == schema.Postgres {
		return fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s TYPE %s", quoted, name, need(d, k))
	}
	return fmt.Sprintf("ALTER TABLE %s MODIFY %s %s NOT NULL", quoted, name, need(d, k))
}

func addColumn(d schema.Dialect, quoted, name string, k columnKind) string {
	return fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s NOT NULL", quoted, name, need(d, k))
}
