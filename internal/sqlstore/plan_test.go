package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// The batched statements must find each key through the primary key, whatever the
// size of the table: a plan that reads the whole table makes every batch cost
// O(rows) and a round of renewals O(rows²/batch). PostgreSQL's planner chose a hash
// join over a sequential scan of a 100,000-row table for the earlier
// `UPDATE … FROM unnest(…) WHERE elect_key = v.k AND version = v.ver`; SQLite
// 3.40 scans the table for `(elect_key, version) IN (VALUES …)`, while the 3.53
// that modernc.org/sqlite v1.60 bundles searches the primary key. These tests
// EXPLAIN the statements the store sends for a batch of 1,000 keys on a table of
// planRows rows, and fail on a plan that scans it.
const (
	planRows  = 100_000
	planBatch = 1000
)

// recorder is a Backend that sends nothing: it keeps the last statement it was
// given and its arguments. Its writes change no row, but Exec reports changed
// rows when told to (a partial count makes a MySQL write read its rows back).
type recorder struct {
	changed int64
	query   string
	args    []any
}

func (r *recorder) Exec(_ context.Context, query string, args ...any) (int64, error) {
	r.query, r.args = query, args
	return r.changed, nil
}

func (r *recorder) QueryRow(_ context.Context, query string, args ...any) sqlstore.Scanner {
	r.query, r.args = query, args
	return noRow{}
}

func (r *recorder) Query(_ context.Context, query string, args ...any) (sqlstore.Rows, error) {
	r.query, r.args = query, args
	return noRows{}, nil
}

type noRow struct{}

func (noRow) Scan(...any) error { return sql.ErrNoRows }

type noRows struct{}

func (noRows) Next() bool        { return false }
func (noRows) Scan(...any) error { return sql.ErrNoRows }
func (noRows) Err() error        { return nil }
func (noRows) Close()            {}
func identity(err error) error   { return err }
func planKey(i int) string       { return fmt.Sprintf("plan-%06d", i) }
func planVersion(i int) int64    { return int64(1_000_000 + i) }
func planTime() time.Duration    { return 5 * time.Second }
func planKeys(n int) []string    { return planKV(n, planKey) }
func newKeys(n int) []string {
	return planKV(n, func(i int) string { return fmt.Sprintf("new-%06d", i) })
}
func planKV(n int, f func(int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = f(i * (planRows / n))
	}
	return out
}

// statement is one batched call and the statement it sends.
type statement struct {
	name    string
	changed int64 // rows the recorder's Exec reports changed
	call    func(ctx context.Context, c *sqlstore.Core) error
}

func statements() []statement {
	held := make([]store.KeyVersion, planBatch)
	for i, k := range planKeys(planBatch) {
		held[i] = store.KeyVersion{Key: k, Version: planVersion(i * (planRows / planBatch))}
	}
	return []statement{
		{name: "ObserveMany", call: func(ctx context.Context, c *sqlstore.Core) error {
			_, err := c.ObserveMany(ctx, planKeys(planBatch))
			return err
		}},
		{name: "RenewMany", call: func(ctx context.Context, c *sqlstore.Core) error {
			_, err := c.RenewMany(ctx, "me", held)
			return err
		}},
		{name: "ElectMany", call: func(ctx context.Context, c *sqlstore.Core) error {
			_, err := c.ElectMany(ctx, "me", held, planTime())
			return err
		}},
		{name: "ReleaseMany", call: func(ctx context.Context, c *sqlstore.Core) error {
			_, err := c.ReleaseMany(ctx, "me", held)
			return err
		}},
		// A MySQL write whose count of changed rows is partial reads its rows back.
		{name: "RenewManyReadBack", changed: 1, call: func(ctx context.Context, c *sqlstore.Core) error {
			_, err := c.RenewMany(ctx, "me", held)
			return err
		}},
		{name: "InsertMany", call: func(ctx context.Context, c *sqlstore.Core) error {
			_, err := c.InsertMany(ctx, "me", newKeys(planBatch))
			return err
		}},
	}
}

func members(t *testing.T, table string) string {
	t.Helper()
	m, err := schema.MembersTable(table)
	require.NoError(t, err)
	return m
}

// sent returns the statement that c's call sends, and its arguments.
func sent(t *testing.T, d schema.Dialect, table string, s statement) (string, []any) {
	t.Helper()
	rec := &recorder{changed: s.changed}
	c, err := sqlstore.New(d, table, rec, identity)
	require.NoError(t, err)
	require.NoError(t, s.call(t.Context(), &c))
	require.NotEmpty(t, rec.query)
	return rec.query, rec.args
}

func TestPostgresBatchesProbeThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testdb.Postgres(t)
	table := testdb.Name(t)
	st, err := postgres.New(pool, table)
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(ctx))
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table+`, `+members(t, table)) })
	_, err = pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (elect_key, version, leader_id, term)
		SELECT 'plan-' || lpad(g::text, 6, '0'), %d + g, 'me', %d + g FROM generate_series(0, %d) AS g`, table, planVersion(0), planVersion(0), planRows-1))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE `+table)
	require.NoError(t, err)
	for _, s := range statements() {
		if s.changed != 0 {
			continue // PostgreSQL writes return their rows: no read-back
		}
		t.Run(s.name, func(t *testing.T) {
			q, args := sent(t, schema.Postgres, table, s)
			rows, err := pool.Query(ctx, `EXPLAIN `+q, args...)
			require.NoError(t, err)
			var plan []string
			for rows.Next() {
				var line string
				require.NoError(t, rows.Scan(&line))
				plan = append(plan, line)
			}
			require.NoError(t, rows.Err())
			text := strings.Join(plan, "\n")
			require.NotContains(t, text, "Seq Scan on "+table, "the plan reads the whole table:\n%s", text)
			if s.name == "InsertMany" {
				require.Contains(t, text, "Conflict Arbiter Indexes: "+table+"_pkey", "the insert checks the primary key:\n%s", text)
				return
			}
			require.Regexp(t, `(Index Scan|Index Only Scan) using `+table+`_pkey on `+table+`|Bitmap Index Scan on `+table+`_pkey`,
				text, "the plan finds the keys through the primary key:\n%s", text)
		})
	}
}

func TestMySQLBatchesProbeThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := testdb.MySQL(t)
	table := testdb.Name(t)
	st, err := mysql.New(db, table)
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(ctx))
	t.Cleanup(func() { _, _ = db.Exec(`DROP TABLE IF EXISTS ` + table + `, ` + members(t, table)) })
	// 100,000 numbers from five digits, on MySQL and MariaDB alike.
	digit := `(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)`
	_, err = db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (elect_key, version, leader_id, term)
		SELECT CONCAT('plan-', LPAD(n, 6, '0')), %d + n, 'me', %d + n FROM (
			SELECT a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS n FROM %s a, %s b, %s c, %s e, %s f) AS g`,
		table, planVersion(0), planVersion(0), digit, digit, digit, digit, digit))
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `ANALYZE TABLE `+table)
	require.NoError(t, err)
	for _, s := range statements() {
		t.Run(s.name, func(t *testing.T) {
			q, args := sent(t, schema.MySQL, table, s)
			rows, err := db.QueryContext(ctx, `EXPLAIN `+q, args...)
			require.NoError(t, err)
			defer rows.Close()
			cols, err := rows.Columns()
			require.NoError(t, err)
			var plan []map[string]string
			for rows.Next() {
				vals := make([]sql.NullString, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				require.NoError(t, rows.Scan(ptrs...))
				row := map[string]string{}
				for i, c := range cols {
					row[strings.ToLower(c)] = vals[i].String
				}
				plan = append(plan, row)
			}
			require.NoError(t, rows.Err())
			reads := 0
			for _, row := range plan {
				if row["table"] != table {
					continue
				}
				if s.name == "InsertMany" && strings.EqualFold(row["select_type"], "INSERT") {
					continue // the row of the insert's target reads nothing
				}
				reads++
				require.NotContains(t, []string{"ALL", "index"}, row["type"], "the plan reads the whole table: %v", plan)
				require.Equal(t, "PRIMARY", row["key"], "the plan finds the keys through the primary key: %v", plan)
			}
			if s.name != "InsertMany" {
				require.Positive(t, reads, "the plan reads the table: %v", plan)
			}
		})
	}
}

func TestSQLiteBatchesProbeThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := testdb.SQLite(t)
	table := testdb.Name(t)
	st, err := sqlite.New(db, table)
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(ctx))
	_, err = db.ExecContext(ctx, fmt.Sprintf(`WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < %d)
		INSERT INTO %s (elect_key, version, leader_id, term, tick_time, create_time, update_time)
		SELECT 'plan-' || printf('%%06d', n), %d + n, 'me', %d + n, 0, 0, 0 FROM g`, planRows-1, table, planVersion(0), planVersion(0)))
	require.NoError(t, err)
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			_, err = db.ExecContext(ctx, `ANALYZE `+table)
			require.NoError(t, err)
		}
		for _, s := range statements() {
			if s.changed != 0 {
				continue // SQLite writes return their rows: no read-back
			}
			t.Run(fmt.Sprintf("%s/analyzed=%v", s.name, analyzed), func(t *testing.T) {
				q, args := sent(t, schema.SQLite, table, s)
				rows, err := db.QueryContext(ctx, `EXPLAIN QUERY PLAN `+q, args...)
				require.NoError(t, err)
				defer rows.Close()
				var plan []string
				for rows.Next() {
					var id, parent, unused int
					var detail string
					require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
					plan = append(plan, detail)
				}
				require.NoError(t, rows.Err())
				text := strings.Join(plan, "\n")
				for _, line := range plan {
					require.False(t, strings.HasPrefix(line, "SCAN "+table), "the plan reads the whole table:\n%s", text)
				}
				if s.name != "InsertMany" {
					require.Contains(t, text, "SEARCH "+table+" USING", "the plan finds the keys through the primary key:\n%s", text)
				}
			})
		}
	}
}
