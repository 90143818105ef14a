package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// planRows and planKeys size the plan tests: a batch of planKeys keys on a table of
// planRows rows, the shape where a plan that scans the table costs O(table) per batch.
const planRows, planKeys = 100_000, 1_000

// planTable creates an election table of planRows rows on db and returns its name and
// a batch of planKeys of its keys at their versions.
func planTable(t *testing.T, db *sql.DB, d schema.Dialect) (string, []store.KeyVersion) {
	t.Helper()
	ctx := t.Context()
	table := testdb.Name(t)
	quoted, err := ident.Quote(d, table)
	require.NoError(t, err)
	members, err := ident.MembersTable(table)
	require.NoError(t, err)
	membersQuoted, err := ident.Quote(d, members)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, q := range []string{quoted, membersQuoted} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+q); err != nil {
				t.Errorf("drop %s: %v", q, err)
			}
		}
	})
	require.NoError(t, schema.Apply(ctx, db, d, table))
	fill, err := sqlstore.FillStatement(d, table, planRows)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, fill)
	require.NoError(t, err, "fill the table")
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+quoted).Scan(&n))
	require.Equal(t, planRows, n, "rows in the table")
	analyze := map[schema.Dialect]string{schema.Postgres: "ANALYZE ", schema.MySQL: "ANALYZE TABLE ", schema.SQLite: "ANALYZE "}[d]
	_, err = db.ExecContext(ctx, analyze+quoted)
	require.NoError(t, err)
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT elect_key, version FROM %s ORDER BY elect_key LIMIT %d", quoted, planKeys))
	require.NoError(t, err)
	defer rows.Close()
	var kvs []store.KeyVersion
	for rows.Next() {
		var kv store.KeyVersion
		require.NoError(t, rows.Scan(&kv.Key, &kv.Version))
		kvs = append(kvs, kv)
	}
	require.NoError(t, rows.Err())
	require.Len(t, kvs, planKeys)
	return table, kvs
}

// TestBatchesProbeThePrimaryKey EXPLAINs every batched statement a store sends for
// 1,000 keys of a 100,000-row table, and fails on a plan that reads the whole table:
// a batch must cost what its keys cost, not what the table holds (PostgreSQL's planner
// picks a hash join over a sequential scan for a plain join on the keys).
func TestBatchesProbeThePrimaryKey(t *testing.T) {
	for _, tc := range []struct {
		dialect schema.Dialect
		open    func(*testing.T) *sql.DB
		// scans returns the table scans that read every row, from the plan's lines.
		scans func(t *testing.T, db *sql.DB, table string, st sqlstore.Statement) []string
	}{
		{schema.Postgres, func(t *testing.T) *sql.DB {
			db, err := sql.Open("pgx", testdb.PostgresDSN(t))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			return db
		}, postgresScans},
		{schema.MySQL, func(t *testing.T) *sql.DB { return mydb.MySQL(t) }, mysqlScans},
		{schema.SQLite, func(t *testing.T) *sql.DB { return litedb.SQLite(t) }, sqliteScans},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			t.Parallel()
			db := tc.open(t)
			table, kvs := planTable(t, db, tc.dialect)
			sts, err := sqlstore.BatchStatements(tc.dialect, table, kvs)
			require.NoError(t, err)
			require.NotEmpty(t, sts)
			for _, st := range sts {
				assert.Empty(t, tc.scans(t, db, table, st), "%s: the plan reads every row of the table", st.Name)
			}
		})
	}
}

// explain returns the column names and the rows of query's reply.
func explain(t *testing.T, db *sql.DB, query string, args []any) ([]string, [][]sql.NullString) {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query, args...)
	require.NoError(t, err, "%s", query)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out [][]sql.NullString
	for rows.Next() {
		row := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range row {
			dest[i] = &row[i]
		}
		require.NoError(t, rows.Scan(dest...))
		out = append(out, row)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, out, "no plan for %s", query)
	return cols, out
}

func postgresScans(t *testing.T, db *sql.DB, table string, st sqlstore.Statement) []string {
	var scans []string
	_, rows := explain(t, db, "EXPLAIN "+st.Query, st.Args)
	for _, row := range rows {
		line := row[0].String
		t.Logf("%s: %s", st.Name, line)
		if strings.Contains(line, "Seq Scan on "+table) || strings.Contains(line, `Seq Scan on "`+table+`"`) {
			scans = append(scans, line)
		}
	}
	return scans
}

// mysqlScans reads EXPLAIN's tabular plan: a row of the table whose access type is
// ALL reads every row.
func mysqlScans(t *testing.T, db *sql.DB, table string, st sqlstore.Statement) []string {
	cols, rows := explain(t, db, "EXPLAIN "+st.Query, st.Args)
	col := func(name string) int {
		i := slices.Index(cols, name)
		require.GreaterOrEqual(t, i, 0, "EXPLAIN has no column %q: %v", name, cols)
		return i
	}
	ti, ty := col("table"), col("type")
	var scans []string
	for _, row := range rows {
		t.Logf("%s: %v", st.Name, row)
		if row[ti].String == table && row[ty].String == "ALL" {
			scans = append(scans, fmt.Sprint(row))
		}
	}
	return scans
}

// sqliteScans reads EXPLAIN QUERY PLAN: "SCAN <table>" reads every row, "SEARCH" uses
// an index.
func sqliteScans(t *testing.T, db *sql.DB, table string, st sqlstore.Statement) []string {
	var scans []string
	_, rows := explain(t, db, "EXPLAIN QUERY PLAN "+st.Query, st.Args)
	for _, row := range rows {
		detail := row[len(row)-1].String
		t.Logf("%s: %s", st.Name, detail)
		if detail == "SCAN "+table || strings.HasPrefix(detail, "SCAN "+table+" ") {
			scans = append(scans, detail)
		}
	}
	return scans
}
