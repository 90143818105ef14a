package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/schema"
)

// SQL adapts a store of one of the SQL dialects to the suite: it drops the tables
// at the end of each subtest and writes the corruptions with raw SQL.
type SQL struct {
	// Dialect is the store's SQL dialect.
	Dialect schema.Dialect
	// Exec runs one statement on the store's database, bypassing the store, and
	// returns the number of rows it affected.
	Exec func(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	// Open returns a store for table on the database Exec writes to.
	Open func(table string) (Store, error)
}

// DBExec returns an [SQL.Exec] that runs statements on db.
func DBExec(db *sql.DB) func(ctx context.Context, query string, args ...any) (int64, error) {
	return func(ctx context.Context, query string, args ...any) (int64, error) {
		res, err := db.ExecContext(ctx, query, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
}

// Harness returns the harness of h, for [Run] and [RunBatch].
func (h SQL) Harness() Harness {
	return Harness{Open: h.openStore, Corrupt: h.corrupt}
}

func (h SQL) openStore(t *testing.T, table string) Store {
	t.Helper()
	s, err := h.Open(table)
	require.NoError(t, err)
	quoted, err := ident.Quote(h.Dialect, table)
	require.NoError(t, err)
	members, err := ident.MembersTable(table)
	require.NoError(t, err)
	membersQuoted, err := ident.Quote(h.Dialect, members)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := h.Exec(ctx, "DROP TABLE IF EXISTS "+quoted); err != nil {
			t.Errorf("drop table %s: %v", quoted, err)
		}
		if _, err := h.Exec(ctx, "DROP TABLE IF EXISTS "+membersQuoted); err != nil {
			t.Errorf("drop table %s: %v", membersQuoted, err)
		}
	})
	return s
}

// corrupt writes a row casleader never writes, with raw SQL.
func (h SQL) corrupt(t *testing.T, table, key, what string) {
	t.Helper()
	ctx := t.Context()
	quoted, err := ident.Quote(h.Dialect, table)
	require.NoError(t, err)
	param := "?"
	if h.Dialect == schema.Postgres {
		param = "$1"
	}
	var set string
	switch what {
	case NegativeVersion:
		set = "version = -1"
	case FutureTick:
		set = "tick_time = " + map[schema.Dialect]string{
			schema.MySQL:    "NOW(6) + INTERVAL 1 HOUR",
			schema.Postgres: "clock_timestamp() + interval '1 hour'",
			schema.SQLite:   "CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 3600000000",
		}[h.Dialect]
	case SkewedTick:
		set = "tick_time = " + map[schema.Dialect]string{
			schema.MySQL:    "NOW(6) + INTERVAL 2 SECOND",
			schema.Postgres: "clock_timestamp() + interval '2 seconds'",
			schema.SQLite:   "CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 2000000",
		}[h.Dialect]
	case RolledBack:
		set = "version = 1, term = 1, tick_time = " + map[schema.Dialect]string{
			schema.MySQL:    "NOW(6) - INTERVAL 1 HOUR",
			schema.Postgres: "clock_timestamp() - interval '1 hour'",
			schema.SQLite:   "CAST(unixepoch('subsec') * 1000000 AS INTEGER) - 3600000000",
		}[h.Dialect]
	case FarFutureTick:
		set = "tick_time = " + map[schema.Dialect]string{
			schema.MySQL:    "'2038-01-19 03:14:07.999999'",
			schema.Postgres: "'3000-01-01 00:00:00+00'",
			schema.SQLite:   "32503680000000000", // 3000-01-01 in microseconds
		}[h.Dialect]
	case TopVersion:
		set = "version = 9223372036854775807, term = 9223372036854775807"
	case NearVersionLimit:
		set = fmt.Sprintf("version = %d, term = %d", rules.VersionLimit-2, rules.VersionLimit-2)
	case NullLeader:
		switch h.Dialect {
		case schema.MySQL:
			_, err = h.Exec(ctx, "ALTER TABLE "+quoted+" MODIFY leader_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL DEFAULT ''")
		case schema.Postgres:
			_, err = h.Exec(ctx, "ALTER TABLE "+quoted+" ALTER COLUMN leader_id DROP NOT NULL")
		default:
			err = h.sqliteDropNotNull(ctx, table)
		}
		require.NoError(t, err, "make leader_id nullable")
		set = "leader_id = NULL"
	default:
		t.Fatalf("unknown corruption %q", what)
	}
	n, err := h.Exec(ctx, "UPDATE "+quoted+" SET "+set+" WHERE elect_key = "+param, key)
	require.NoError(t, err, "corrupt %s", what)
	require.EqualValues(t, 1, n, "corrupt %s: rows affected", what)
}

// sqliteDropNotNull rebuilds table with a nullable leader_id: SQLite's ALTER TABLE
// cannot change a column's constraints. The subtest owns the table, so the four
// statements need no transaction.
func (h SQL) sqliteDropNotNull(ctx context.Context, table string) error {
	ddl, err := schema.DDL(schema.SQLite, table+"_new")
	if err != nil {
		return err
	}
	re := regexp.MustCompile(`leader_id\s+TEXT NOT NULL`)
	if !re.MatchString(ddl) {
		return fmt.Errorf("SQLite DDL has no %q: update the suite", re)
	}
	ddl = re.ReplaceAllString(ddl, "leader_id TEXT")
	for _, q := range []string{
		ddl,
		`INSERT INTO "` + table + `_new" SELECT * FROM "` + table + `"`,
		`DROP TABLE "` + table + `"`,
		`ALTER TABLE "` + table + `_new" RENAME TO "` + table + `"`,
	} {
		if _, err := h.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}
