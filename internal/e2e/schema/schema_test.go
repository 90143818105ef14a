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

	"github.com/casleader/casleader/internal/catalog"
	"github.com/casleader/casleader/internal/ident"
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
		assert.NoError(t, ident.ValidateTable(name), "%q", name)
	}
	for _, name := range []string{
		"", "t; DROP TABLE users", "t;", "t`", "`t`", `t"`, `"t"`, "t'", "t--", "t/*",
		"t\x00", "t\n", " t", "t ", "a-b", "a b", "é", "t\u200b",
		"1t", strings.Repeat("a", 64), strings.Repeat("s", 64) + ".t",
		"a.b.c", ".t", "t.", "..", ".",
	} {
		err := ident.ValidateTable(name)
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
		got, err := ident.Quote(tc.dialect, tc.name)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%s", tc.dialect)
		got, err = ident.Quote(tc.dialect, tc.dottedInput)
		require.NoError(t, err)
		assert.Equal(t, tc.wantDotted, got, "%s", tc.dialect)
	}
	for _, d := range dialects {
		for _, name := range []string{"t`; DROP TABLE x; --", `t"; DROP TABLE x; --`, "", "a.b.c"} {
			_, err := ident.Quote(d, name)
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
			quoted, err := ident.Quote(d, name)
			require.NoError(t, err)
			assert.Contains(t, ddl, "CREATE TABLE IF NOT EXISTS "+quoted+" (", "%s", d)
			assert.NotContains(t, ddl, "{{", "%s: placeholder left", d)
			for _, col := range catalog.Columns {
				assert.Regexp(t, `(?m)^\s+`+col+`\s`, ddl, "%s: column %s", d, col)
			}
		}
		_, err := schema.DDL(d, "t; DROP TABLE x")
		assert.ErrorIs(t, err, schema.ErrInvalidTable, "%s", d)
		ddl, err := schema.MembersDDL(d, "elections")
		require.NoError(t, err, "%s", d)
		for _, col := range catalog.MembersColumns {
			assert.Regexp(t, `(?m)^\s+`+col+`\s`, ddl, "%s: members column %s", d, col)
		}
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
		_, err := ident.Quote(d, "t")
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
			quoted, err := ident.Quote(tc.dialect, table)
			require.NoError(t, err)
			members, err := ident.MembersTable(table)
			require.NoError(t, err)
			membersQuoted, err := ident.Quote(tc.dialect, members)
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

			rows, err := db.QueryContext(ctx, "SELECT "+strings.Join(catalog.Columns, ", ")+" FROM "+quoted)
			require.NoError(t, err, "the table has casleader's columns")
			defer rows.Close()
			cols, err := rows.Columns()
			require.NoError(t, err)
			assert.Equal(t, catalog.Columns, cols)
			assert.False(t, rows.Next(), "the new table is empty")
			require.NoError(t, rows.Err())

			var n int
			require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+membersQuoted).Scan(&n), "Apply created the members table")
			assert.Zero(t, n)
		})
	}
}

func TestMembersTableNameIsDerivedAndChecked(t *testing.T) {
	name, err := ident.MembersTable("ops.elections")
	require.NoError(t, err)
	assert.Equal(t, "ops.elections_members", name)
	_, err = ident.MembersTable(strings.Repeat("a", 60))
	require.ErrorIs(t, err, schema.ErrInvalidTable)
	assert.Contains(t, err.Error(), "shorter election table name")
	_, err = schema.MembersDDL(schema.Postgres, "t; DROP TABLE x")
	require.ErrorIs(t, err, schema.ErrInvalidTable)
}
