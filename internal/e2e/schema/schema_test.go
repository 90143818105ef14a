package schema_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/schema"
)

var dialects = []schema.Dialect{schema.MySQL, schema.Postgres, schema.SQLite}

func TestValidateTable(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		schema.DefaultTable, "t", "_", "_t1", "Elections", "ops.elections", "ops_1.t_2",
		strings.Repeat("a", 63), strings.Repeat("s", 63) + "." + strings.Repeat("t", 63),
	} {
		assert.NoError(t, schema.ValidateTable(name), "%q", name)
	}
	for _, name := range []string{
		"", "t; DROP TABLE users", "t;", "t`", "`t`", `t"`, `"t"`, "t'", "t--", "t/*",
		"t\x00", "t\n", " t", "t ", "a-b", "a b", "é", "t\u200b",
		"1t", strings.Repeat("a", 64), strings.Repeat("s", 64) + ".t",
		"a.b.c", ".t", "t.", "..", ".",
	} {
		err := schema.ValidateTable(name)
		assert.ErrorIs(t, err, schema.ErrInvalidTable, "%q", name)
	}
}

func TestQuote(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dialect     schema.Dialect
		name, want  string
		wantDotted  string
		dottedInput string
	}{
		{schema.MySQL, "t", "`t`", "`ops`.`t`", "ops.t"},
		{schema.Postgres, "t", `"t"`, `"ops"."t"`, "ops.t"},
		{schema.SQLite, "t", `"t"`, `"ops"."t"`, "ops.t"},
	} {
		got, err := schema.Quote(tc.dialect, tc.name)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%s", tc.dialect)
		got, err = schema.Quote(tc.dialect, tc.dottedInput)
		require.NoError(t, err)
		assert.Equal(t, tc.wantDotted, got, "%s", tc.dialect)
	}
	for _, d := range dialects {
		for _, name := range []string{"t`; DROP TABLE x; --", `t"; DROP TABLE x; --`, "", "a.b.c"} {
			_, err := schema.Quote(d, name)
			assert.ErrorIs(t, err, schema.ErrInvalidTable, "%s %q", d, name)
		}
	}
}

func TestDDLCreatesTheQuotedTableWithEveryColumn(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		for _, name := range []string{"elections", "ops.elections"} {
			ddl, err := schema.DDL(d, name)
			require.NoError(t, err, "%s", d)
			quoted, err := schema.Quote(d, name)
			require.NoError(t, err)
			assert.Contains(t, ddl, "CREATE TABLE IF NOT EXISTS "+quoted+" (", "%s", d)
			assert.NotContains(t, ddl, "{{", "%s: placeholder left", d)
			for _, col := range schema.Columns {
				assert.Regexp(t, `(?m)^\s+`+col+`\s`, ddl, "%s: column %s", d, col)
			}
		}
		_, err := schema.DDL(d, "t; DROP TABLE x")
		assert.ErrorIs(t, err, schema.ErrInvalidTable, "%s", d)
	}
}

// recorder is an Execer that records statements.
type recorder struct{ queries []string }

func (r *recorder) ExecContext(_ context.Context, query string, _ ...any) (sql.Result, error) {
	r.queries = append(r.queries, query)
	return nil, nil
}

func TestUnknownDialectIsAnError(t *testing.T) {
	t.Parallel()
	for _, d := range []schema.Dialect{"", "oracle", "MySQL", "postgresql", "../mysql"} {
		_, err := schema.Quote(d, "t")
		assert.ErrorIs(t, err, schema.ErrUnknownDialect, "Quote %q", d)
		_, err = schema.DDL(d, "t")
		assert.ErrorIs(t, err, schema.ErrUnknownDialect, "DDL %q", d)
		var r recorder
		err = schema.Apply(t.Context(), &r, d, "t")
		assert.ErrorIs(t, err, schema.ErrUnknownDialect, "Apply %q", d)
		assert.Empty(t, r.queries, "Apply %q ran SQL", d)
	}
}

func TestApplyRefusesInvalidTableWithoutRunningSQL(t *testing.T) {
	t.Parallel()
	var r recorder
	err := schema.Apply(t.Context(), &r, schema.Postgres, `t"; DROP TABLE users; --`)
	require.ErrorIs(t, err, schema.ErrInvalidTable)
	assert.Empty(t, r.queries)
}

func TestApplyIsIdempotentOnEachDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dialect schema.Dialect
		open    func(t *testing.T) *sql.DB
	}{
		{schema.MySQL, func(t *testing.T) *sql.DB { return mydb.MySQL(t) }},
		{schema.Postgres, func(t *testing.T) *sql.DB {
			db, err := sql.Open("pgx", testdb.PostgresDSN(t))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			return db
		}},
		{schema.SQLite, func(t *testing.T) *sql.DB { return litedb.SQLite(t) }},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			t.Parallel()
			db := tc.open(t)
			table := testdb.Name(t)
			quoted, err := schema.Quote(tc.dialect, table)
			require.NoError(t, err)
			members, err := schema.MembersTable(table)
			require.NoError(t, err)
			membersQuoted, err := schema.Quote(tc.dialect, members)
			require.NoError(t, err)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for _, q := range []string{quoted, membersQuoted} {
					if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+q); err != nil {
						t.Errorf("drop %s: %v", q, err)
					}
				}
			})

			ctx := t.Context()
			require.NoError(t, schema.Apply(ctx, db, tc.dialect, table), "first Apply")
			require.NoError(t, schema.Apply(ctx, db, tc.dialect, table), "second Apply")

			rows, err := db.QueryContext(ctx, "SELECT "+strings.Join(schema.Columns, ", ")+" FROM "+quoted)
			require.NoError(t, err, "the table has casleader's columns")
			defer rows.Close()
			cols, err := rows.Columns()
			require.NoError(t, err)
			assert.Equal(t, schema.Columns, cols)
			assert.False(t, rows.Next(), "the new table is empty")
			require.NoError(t, rows.Err())

			var n int
			require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+membersQuoted).Scan(&n), "Apply created the members table")
			assert.Zero(t, n)
		})
	}
}

// ddlColumns is the columns of the table that DDL creates, as each database's catalog
// spells their types.
var ddlColumns = map[schema.Dialect][]schema.FoundColumn{
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
func with(cols []schema.FoundColumn, name string, c schema.FoundColumn) []schema.FoundColumn {
	var out []schema.FoundColumn
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
		stmts, err := schema.Upgrade(d, "t", ddlColumns[d])
		require.NoError(t, err)
		assert.Empty(t, stmts, "%s: a current table needs nothing", d)
		old := with(with(ddlColumns[d], "lease", schema.FoundColumn{}), "incarnation", schema.FoundColumn{})
		stmts, err = schema.Upgrade(d, "t", old)
		require.NoError(t, err)
		require.Len(t, stmts, 2, "%s", d)
		assert.Contains(t, stmts[0], "ADD COLUMN lease")
		assert.Contains(t, stmts[0], "DEFAULT 0")
		assert.Contains(t, stmts[1], "ADD COLUMN incarnation")
		assert.Contains(t, stmts[1], "DEFAULT ''")
	}
}

func TestCheckColumns(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		require.NoError(t, schema.CheckColumns(d, "t", ddlColumns[d]), "%s: the DDL's own columns", d)
		extra := append(append([]schema.FoundColumn(nil), ddlColumns[d]...), schema.FoundColumn{Name: "note", Type: "text"})
		require.NoError(t, schema.CheckColumns(d, "t", extra), "%s: an extra column", d)
	}
	my, pg, lite := ddlColumns[schema.MySQL], ddlColumns[schema.Postgres], ddlColumns[schema.SQLite]
	for _, tc := range []struct {
		name    string
		d       schema.Dialect
		cols    []schema.FoundColumn
		mention []string // what the error must say
	}{
		{"MySQLIntVersion", schema.MySQL, with(with(my, "version", schema.FoundColumn{Name: "version", Type: "int(11)"}), "term", schema.FoundColumn{Name: "term", Type: "int(11)"}),
			[]string{"column version is int(11), needs BIGINT", "column term is int(11), needs BIGINT", "ALTER TABLE `t` MODIFY version BIGINT NOT NULL", "casleader migrate"}},
		{"MySQLSecondTick", schema.MySQL, with(my, "tick_time", schema.FoundColumn{Name: "tick_time", Type: "timestamp"}),
			[]string{"column tick_time is timestamp, needs TIMESTAMP(6)"}},
		{"MySQLDatetimeTick", schema.MySQL, with(my, "tick_time", schema.FoundColumn{Name: "tick_time", Type: "datetime(6)"}),
			[]string{"column tick_time is datetime(6), needs TIMESTAMP(6)"}},
		{"MySQLCaseInsensitiveKey", schema.MySQL, with(my, "elect_key", schema.FoundColumn{Name: "elect_key", Type: "varchar(255)", Collation: "utf8mb4_general_ci"}),
			[]string{"column elect_key is varchar(255) COLLATE utf8mb4_general_ci, needs VARCHAR(255)"}},
		{"MySQLShortKey", schema.MySQL, with(my, "leader_id", schema.FoundColumn{Name: "leader_id", Type: "varchar(50)", Collation: "utf8mb4_bin"}),
			[]string{"column leader_id is varchar(50)"}},
		{"PostgresBigintTick", schema.Postgres, with(pg, "tick_time", schema.FoundColumn{Name: "tick_time", Type: "bigint"}),
			[]string{"column tick_time is bigint, needs TIMESTAMPTZ", `ALTER TABLE "t" ALTER COLUMN tick_time TYPE TIMESTAMPTZ`}},
		{"PostgresBooleanStepdown", schema.Postgres, with(pg, "stepdown", schema.FoundColumn{Name: "stepdown", Type: "boolean"}),
			[]string{"column stepdown is boolean, needs SMALLINT"}},
		{"PostgresTickWithoutTimeZone", schema.Postgres, with(pg, "tick_time", schema.FoundColumn{Name: "tick_time", Type: "timestamp without time zone"}),
			[]string{"column tick_time is timestamp without time zone, needs TIMESTAMPTZ"}},
		{"PostgresIntegerTerm", schema.Postgres, with(pg, "term", schema.FoundColumn{Name: "term", Type: "integer"}),
			[]string{"column term is integer, needs BIGINT"}},
		{"SQLiteTextVersion", schema.SQLite, with(lite, "version", schema.FoundColumn{Name: "version", Type: "TEXT"}),
			[]string{"column version is TEXT, needs INTEGER", "drop the table and re-create it"}},
		{"SQLiteUntypedKey", schema.SQLite, with(lite, "elect_key", schema.FoundColumn{Name: "elect_key"}),
			[]string{"column elect_key is no declared type, needs TEXT"}},
		{"OtherNames", schema.Postgres, []schema.FoundColumn{{Name: "id", Type: "bigint"}, {Name: "name", Type: "text"}},
			[]string{"has none of casleader's columns", "this is not a casleader table: wrong table name?"}},
		{"SomeColumns", schema.Postgres, []schema.FoundColumn{{Name: "elect_key", Type: "text"}, {Name: "name", Type: "text"}},
			[]string{"column version is missing (needs BIGINT)", "column update_time is missing (needs TIMESTAMPTZ)", "ADD COLUMN version"}},
		{"MissingColumn", schema.MySQL, with(my, "handover_to", schema.FoundColumn{}),
			[]string{"column handover_to is missing", "ALTER TABLE `t` ADD COLUMN handover_to"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := schema.CheckColumns(tc.d, "t", tc.cols)
			require.ErrorIs(t, err, schema.ErrWrongTable)
			for _, m := range tc.mention {
				assert.Contains(t, err.Error(), m)
			}
		})
	}
}

func TestMembersTableNameIsDerivedAndChecked(t *testing.T) {
	name, err := schema.MembersTable("ops.elections")
	require.NoError(t, err)
	assert.Equal(t, "ops.elections_members", name)
	_, err = schema.MembersTable(strings.Repeat("a", 60))
	require.ErrorIs(t, err, schema.ErrInvalidTable)
	assert.Contains(t, err.Error(), "shorter election table name")
	_, err = schema.MembersDDL(schema.Postgres, "t; DROP TABLE x")
	require.ErrorIs(t, err, schema.ErrInvalidTable)
}
