package catalog_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/catalog"
	"github.com/casleader/casleader/schema"
)

var dialects = []schema.Dialect{schema.MySQL, schema.Postgres, schema.SQLite}

// ddlColumns is the columns of the table that DDL creates, as each database's catalog
// spells their types.
var ddlColumns = map[schema.Dialect][]catalog.FoundColumn{
	schema.MySQL: {
		{Name: "elect_key", Type: "varchar(255)", Collation: "utf8mb4_bin"},
		{Name: "version", Type: "bigint(20)"},
		{Name: "leader_id", Type: "varchar(255)", Collation: "utf8mb4_bin"},
		{Name: "term", Type: "bigint(20)"},
		{Name: "tick_time", Type: "timestamp(6)"},
		{Name: "handover_to", Type: "varchar(255)", Collation: "utf8mb4_bin"},
		{Name: "stepdown", Type: "smallint(6)"},
		{Name: "lease", Type: "bigint(20)"},
		{Name: "incarnation", Type: "varchar(255)", Collation: "utf8mb4_bin"},
		{Name: "create_time", Type: "timestamp(6)"},
		{Name: "update_time", Type: "timestamp(6)"},
	},
	schema.Postgres: {
		{Name: "elect_key", Type: "text"}, {Name: "version", Type: "bigint"}, {Name: "leader_id", Type: "text"},
		{Name: "term", Type: "bigint"}, {Name: "tick_time", Type: "timestamp with time zone"},
		{Name: "handover_to", Type: "text"}, {Name: "stepdown", Type: "smallint"},
		{Name: "lease", Type: "bigint"}, {Name: "incarnation", Type: "text"},
		{Name: "create_time", Type: "timestamp with time zone"}, {Name: "update_time", Type: "timestamp with time zone"},
	},
	schema.SQLite: {
		{Name: "elect_key", Type: "TEXT"}, {Name: "version", Type: "INTEGER"}, {Name: "leader_id", Type: "TEXT"},
		{Name: "term", Type: "INTEGER"}, {Name: "tick_time", Type: "INTEGER"}, {Name: "handover_to", Type: "TEXT"},
		{Name: "stepdown", Type: "INTEGER"}, {Name: "lease", Type: "INTEGER"}, {Name: "incarnation", Type: "TEXT"},
		{Name: "create_time", Type: "INTEGER"}, {Name: "update_time", Type: "INTEGER"},
	},
}

// with returns cols with the column name changed to c (removed when c.Name is "").
func with(cols []catalog.FoundColumn, name string, c catalog.FoundColumn) []catalog.FoundColumn {
	var out []catalog.FoundColumn
	for _, col := range cols {
		if col.Name != name {
			out = append(out, col)
		} else if c.Name != "" {
			out = append(out, c)
		}
	}
	return out
}

// TestUpgradeAddsTheNewColumns: a table made before the lease and incarnation
// columns gets them, with defaults that keep its rows; a current table needs none.
func TestUpgradeAddsTheNewColumns(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		stmts, err := catalog.Upgrade(d, "t", ddlColumns[d])
		require.NoError(t, err)
		assert.Empty(t, stmts, "%s: a current table needs nothing", d)
		old := with(with(ddlColumns[d], "lease", catalog.FoundColumn{}), "incarnation", catalog.FoundColumn{})
		stmts, err = catalog.Upgrade(d, "t", old)
		require.NoError(t, err)
		require.Len(t, stmts, 2, "%s", d)
		assert.Contains(t, stmts[0], "ADD COLUMN lease")
		assert.Contains(t, stmts[0], "DEFAULT 0")
		assert.Contains(t, stmts[1], "ADD COLUMN incarnation")
		assert.Contains(t, stmts[1], "DEFAULT ''")
	}
}

// TestUpgradeMembersAddsTheIncarnationColumn: a members table made before the
// incarnation column gets it, with a default that keeps its rows; a current one,
// a missing one and another's table need none.
func TestUpgradeMembersAddsTheIncarnationColumn(t *testing.T) {
	t.Parallel()
	var current, old []catalog.FoundColumn
	for _, name := range catalog.MembersColumns {
		current = append(current, catalog.FoundColumn{Name: name})
		if name != "incarnation" {
			old = append(old, catalog.FoundColumn{Name: name})
		}
	}
	for _, d := range dialects {
		for _, none := range [][]catalog.FoundColumn{current, nil, {{Name: "id"}, {Name: "name"}}} {
			stmts, err := catalog.UpgradeMembers(d, "t_members", none)
			require.NoError(t, err)
			assert.Empty(t, stmts, "%s: %v needs nothing", d, none)
		}
		stmts, err := catalog.UpgradeMembers(d, "t_members", old)
		require.NoError(t, err)
		require.Len(t, stmts, 1, "%s", d)
		assert.Contains(t, stmts[0], "ADD COLUMN incarnation")
		assert.Contains(t, stmts[0], "NOT NULL DEFAULT ''")
	}
}

func TestCheckColumns(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		require.NoError(t, catalog.CheckColumns(d, "t", ddlColumns[d]), "%s: the DDL's own columns", d)
		extra := append(append([]catalog.FoundColumn(nil), ddlColumns[d]...), catalog.FoundColumn{Name: "note", Type: "text"})
		require.NoError(t, catalog.CheckColumns(d, "t", extra), "%s: an extra column", d)
	}
	my, pg, lite := ddlColumns[schema.MySQL], ddlColumns[schema.Postgres], ddlColumns[schema.SQLite]
	for _, tc := range []struct {
		name    string
		d       schema.Dialect
		cols    []catalog.FoundColumn
		mention []string // what the error must say
	}{
		{"MySQLIntVersion", schema.MySQL, with(with(my, "version", catalog.FoundColumn{Name: "version", Type: "int(11)"}), "term", catalog.FoundColumn{Name: "term", Type: "int(11)"}),
			[]string{"column version is int(11), needs BIGINT", "column term is int(11), needs BIGINT", "ALTER TABLE `t` MODIFY version BIGINT NOT NULL", "casleader migrate"}},
		{"MySQLSecondTick", schema.MySQL, with(my, "tick_time", catalog.FoundColumn{Name: "tick_time", Type: "timestamp"}),
			[]string{"column tick_time is timestamp, needs TIMESTAMP(6)"}},
		{"MySQLDatetimeTick", schema.MySQL, with(my, "tick_time", catalog.FoundColumn{Name: "tick_time", Type: "datetime(6)"}),
			[]string{"column tick_time is datetime(6), needs TIMESTAMP(6)"}},
		{"MySQLCaseInsensitiveKey", schema.MySQL, with(my, "elect_key", catalog.FoundColumn{Name: "elect_key", Type: "varchar(255)", Collation: "utf8mb4_general_ci"}),
			[]string{"column elect_key is varchar(255) COLLATE utf8mb4_general_ci, needs VARCHAR(255)"}},
		{"MySQLShortKey", schema.MySQL, with(my, "leader_id", catalog.FoundColumn{Name: "leader_id", Type: "varchar(50)", Collation: "utf8mb4_bin"}),
			[]string{"column leader_id is varchar(50)"}},
		{"PostgresBigintTick", schema.Postgres, with(pg, "tick_time", catalog.FoundColumn{Name: "tick_time", Type: "bigint"}),
			[]string{"column tick_time is bigint, needs TIMESTAMPTZ", `ALTER TABLE "t" ALTER COLUMN tick_time TYPE TIMESTAMPTZ`}},
		{"PostgresBooleanStepdown", schema.Postgres, with(pg, "stepdown", catalog.FoundColumn{Name: "stepdown", Type: "boolean"}),
			[]string{"column stepdown is boolean, needs SMALLINT"}},
		{"PostgresTickWithoutTimeZone", schema.Postgres, with(pg, "tick_time", catalog.FoundColumn{Name: "tick_time", Type: "timestamp without time zone"}),
			[]string{"column tick_time is timestamp without time zone, needs TIMESTAMPTZ"}},
		{"PostgresIntegerTerm", schema.Postgres, with(pg, "term", catalog.FoundColumn{Name: "term", Type: "integer"}),
			[]string{"column term is integer, needs BIGINT"}},
		{"SQLiteTextVersion", schema.SQLite, with(lite, "version", catalog.FoundColumn{Name: "version", Type: "TEXT"}),
			[]string{"column version is TEXT, needs INTEGER", "drop the table and re-create it"}},
		{"SQLiteUntypedKey", schema.SQLite, with(lite, "elect_key", catalog.FoundColumn{Name: "elect_key"}),
			[]string{"column elect_key is no declared type, needs TEXT"}},
		{"OtherNames", schema.Postgres, []catalog.FoundColumn{{Name: "id", Type: "bigint"}, {Name: "name", Type: "text"}},
			[]string{"has none of casleader's columns", "this is not a casleader table: wrong table name?"}},
		{"SomeColumns", schema.Postgres, []catalog.FoundColumn{{Name: "elect_key", Type: "text"}, {Name: "name", Type: "text"}},
			[]string{"column version is missing (needs BIGINT)", "column update_time is missing (needs TIMESTAMPTZ)", "ADD COLUMN version"}},
		{"MissingColumn", schema.MySQL, with(my, "handover_to", catalog.FoundColumn{}),
			[]string{"column handover_to is missing", "ALTER TABLE `t` ADD COLUMN handover_to"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := catalog.CheckColumns(tc.d, "t", tc.cols)
			require.ErrorIs(t, err, schema.ErrWrongTable)
			for _, m := range tc.mention {
				assert.Contains(t, err.Error(), m)
			}
		})
	}
}
