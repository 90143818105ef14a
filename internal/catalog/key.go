package catalog

import (
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/schema"

	"fmt"
	"slices"
	"strings"
)

// Columns lists the election table's columns in the order the stores read them.
var Columns = []string{
	"elect_key", "version", "leader_id", "term", "tick_time",
	"handover_to", "stepdown", "lease", "incarnation", "create_time", "update_time",
}

// Key is the primary key that the election table must have: one row per
// election key. Without it two rows could hold one key, and two candidates could
// each win one of them.
var Key = []string{"elect_key"}

// MembersKey is the primary key that the members table must have: one row per
// member of an election.
var MembersKey = []string{"elect_key", "member_id"}

// CheckKey checks that the primary key found in table (its columns, in any order)
// is want. The error wraps [schema.ErrWrongTable], names the table and the key found, and
// says how to fix it.
func CheckKey(d schema.Dialect, table string, found, want []string) error {
	same := len(found) == len(want)
	for _, c := range found {
		same = same && slices.Contains(want, strings.ToLower(c))
	}
	if same {
		return nil
	}
	has := "has no primary key"
	if len(found) > 0 {
		has = "has the primary key (" + strings.Join(found, ", ") + ")"
	}
	cols := strings.Join(want, ", ")
	how := "drop the table and re-create it with `casleader migrate` (or schema.Apply)"
	if d != schema.SQLite {
		quoted, err := ident.Quote(d, table)
		if err != nil {
			return err
		}
		drop := ""
		if len(found) > 0 {
			drop = "DROP PRIMARY KEY, "
			if d == schema.Postgres {
				drop = "DROP CONSTRAINT <its primary key>, "
			}
		}
		how = fmt.Sprintf("remove rows that share (%s), then ALTER TABLE %s %sADD PRIMARY KEY (%s) - or %s", cols, quoted, drop, cols, how)
	}
	return fmt.Errorf("%w: table %s (%s) %s, not (%s): two rows could then hold one election and two candidates lead at once: %s",
		schema.ErrWrongTable, table, d, has, cols, how)
}

// notOurs refuses a table that has none of casleader's [Columns] (an
// application's table named by mistake): advice to ALTER it would be wrong.
func notOurs(d schema.Dialect, table string, byName map[string]FoundColumn) error {
	for _, name := range Columns {
		if _, ok := byName[name]; ok {
			return nil
		}
	}
	return fmt.Errorf("%w: table %s (%s) has none of casleader's columns (%s): this is not a casleader table: wrong table name? Name the election table (%q when none is given) and create it with `casleader migrate`",
		schema.ErrWrongTable, table, d, strings.Join(Columns, ", "), schema.DefaultTable)
}
