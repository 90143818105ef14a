package casleader_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// creator is a store that creates and checks its tables.
type creator interface {
	CreateTable(ctx context.Context) error
	Check(ctx context.Context) error
}

// freshStores opens n stores on one fresh table name (dropped when t ends) on
// each server.
func freshStores(t *testing.T, n int) map[string][]creator {
	out := map[string][]creator{}
	drop := func(d schema.Dialect, exec func(q string) error, table string) {
		t.Cleanup(func() {
			for _, name := range []string{table, table + "_members"} {
				q, _ := ident.Quote(d, name)
				assert.NoError(t, exec("DROP TABLE IF EXISTS "+q))
			}
		})
	}
	my := mydb.MySQL(t)
	pg := pgdb.Postgres(t)
	lite := litedb.SQLite(t)
	myTable, pgTable, liteTable := testdb.Name(t)+"_my", testdb.Name(t)+"_pg", testdb.Name(t)+"_lite"
	drop(schema.MySQL, func(q string) error { _, err := my.Exec(q); return err }, myTable)
	drop(schema.Postgres, func(q string) error { _, err := pg.Exec(context.Background(), q); return err }, pgTable)
	drop(schema.SQLite, func(q string) error { _, err := lite.Exec(q); return err }, liteTable)
	for range n {
		// One pool per replica, as separate processes would have.
		mdb, err := mysql.Open(testdb.MySQLDSN(t))
		require.NoError(t, err)
		t.Cleanup(func() { mdb.Close() })
		ms, err := mysql.New(mdb, myTable)
		require.NoError(t, err)
		pool, err := postgres.Open(t.Context(), testdb.PostgresDSN(t))
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		ps, err := postgres.New(pool, pgTable)
		require.NoError(t, err)
		ls, err := sqlite.New(lite, liteTable)
		require.NoError(t, err)
		out["MariaDB"] = append(out["MariaDB"], ms)
		out["PostgreSQL"] = append(out["PostgreSQL"], ps)
		out["SQLite"] = append(out["SQLite"], ls)
	}
	return out
}

// TestCreateTableFromEveryReplicaAtOnce: replicas that all call CreateTable at
// start-up on a table that does not exist yet all succeed (PostgreSQL's CREATE
// TABLE IF NOT EXISTS alone fails in all but one with a unique violation on
// pg_type).
func TestCreateTableFromEveryReplicaAtOnce(t *testing.T) {
	const replicas = 5
	for name, stores := range freshStores(t, replicas) {
		t.Run(name, func(t *testing.T) {
			for round := range 3 { // the race is won by timing: give it several chances
				if round > 0 {
					// Drop the tables again so that the next round also races.
					dropAll(t, name, stores[0])
				}
				createAtOnce(t, stores, round)
			}
		})
	}
}

// createAtOnce has every store call CreateTable at the same moment, and requires
// every call to succeed and the tables to pass Check then.
func createAtOnce(t *testing.T, stores []creator, round int) {
	t.Helper()
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, st := range stores {
		wg.Go(func() {
			<-start
			errs[i] = st.CreateTable(t.Context())
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "round %d, replica %d", round, i)
	}
	require.NoError(t, stores[0].Check(t.Context()))
}

// dropAll drops the election and members tables of st.
func dropAll(t *testing.T, name string, st creator) {
	t.Helper()
	var (
		d    schema.Dialect
		exec func(q string) error
	)
	switch name {
	case "MariaDB":
		d, exec = schema.MySQL, func(q string) error { _, err := mydb.MySQL(t).Exec(q); return err }
	case "PostgreSQL":
		d, exec = schema.Postgres, func(q string) error { _, err := pgdb.Postgres(t).Exec(t.Context(), q); return err }
	default:
		return // SQLite serialises its writers: one round shows it
	}
	tabler := st.(interface {
		Table() string
		MembersTable() string
	})
	for _, tb := range []string{tabler.Table(), tabler.MembersTable()} {
		q, _ := ident.Quote(d, tb)
		require.NoError(t, exec("DROP TABLE IF EXISTS "+q))
	}
}

// TestCreateTableOnSQLiteNeedsNoWriteWhenTheTablesExist: on SQLite, least
// privilege is a connection that may not write the schema: a read-only one.
// CreateTable on tables that exist and are right (or on a members table of an
// earlier version, which it may not upgrade) succeeds without writing; on a
// missing table it says to run `casleader migrate` once.
func TestCreateTableOnSQLiteNeedsNoWriteWhenTheTablesExist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.db")
	admin, err := sqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close() })
	require.NoError(t, schema.Apply(t.Context(), admin, schema.SQLite, "elect"))

	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	t.Cleanup(func() { ro.Close() })
	st, err := sqlite.New(ro, "elect")
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(t.Context()), "the tables exist and are right")

	// A members table of a version before its incarnation column stays as it is,
	// and is read without it.
	ddl, err := schema.DDL(schema.SQLite, "old")
	require.NoError(t, err)
	_, err = admin.Exec(ddl)
	require.NoError(t, err)
	_, err = admin.Exec(testdb.MembersDDLBeforeIncarnation(t, schema.SQLite, "old"))
	require.NoError(t, err)
	_, err = admin.Exec(`INSERT INTO old_members (elect_key, member_id, role, seen_at) VALUES ('k', 'a', 'leader', 0)`)
	require.NoError(t, err)
	old, err := sqlite.New(ro, "old")
	require.NoError(t, err)
	require.NoError(t, old.CreateTable(t.Context()), "a members table that this connection may not alter is no failure")
	ms, err := old.MembersOf(t.Context(), []string{"k"}, 100*365*24*time.Hour)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	assert.Empty(t, ms[0].Incarnation)

	missing, err := sqlite.New(ro, "absent")
	require.NoError(t, err)
	err = missing.CreateTable(t.Context())
	require.ErrorIs(t, err, store.ErrDeployment)
	assert.Contains(t, err.Error(), "run `casleader migrate` once as a user with CREATE")
}

// TestQualifiedTableNameThatNamesNoDatabase: "public.x" (PostgreSQL's habit) on
// MySQL names a database "public", on SQLite an attached database: each is told
// clearly, not as a missing CREATE right.
func TestQualifiedTableNameThatNamesNoDatabase(t *testing.T) {
	my, err := mysql.New(mydb.MySQL(t), "public.x")
	require.NoError(t, err)
	err = my.CreateTable(t.Context())
	require.ErrorIs(t, err, store.ErrDeployment)
	assert.Contains(t, err.Error(), `on mysql the part before the dot names a database, and there is no database "public"`)
	assert.NotContains(t, err.Error(), "user with CREATE")

	pg, err := postgres.New(pgdb.Postgres(t), testdb.Name(t)+"_nosuch.x")
	require.NoError(t, err)
	err = pg.CreateTable(t.Context())
	require.ErrorIs(t, err, store.ErrDeployment)
	assert.Contains(t, err.Error(), `on postgres the part before the dot names a schema, and there is no schema`)

	_, err = sqlite.New(litedb.SQLite(t), "public.x")
	require.ErrorIs(t, err, schema.ErrInvalidTable)
	assert.Contains(t, err.Error(), `on SQLite the part before the dot names an attached database`)
}

// TestRunRefusesAnElectionTableWithoutItsKey: with no primary key on elect_key,
// two rows could hold one key and two candidates lead: Run stops at once with a
// deployment error that names the table and the fix.
func TestRunRefusesAnElectionTableWithoutItsKey(t *testing.T) {
	pool := pgdb.Postgres(t)
	lite := litedb.SQLite(t)
	for _, tc := range []struct {
		d    schema.Dialect
		exec func(q string) error
		open func(table string) (store.Driver, error)
	}{
		{schema.Postgres, func(q string) error { _, err := pool.Exec(context.Background(), q); return err },
			func(table string) (store.Driver, error) { return postgres.New(pool, table) }},
		{schema.SQLite, func(q string) error { _, err := lite.Exec(q); return err },
			func(table string) (store.Driver, error) { return sqlite.New(lite, table) }},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			table := testdb.Name(t)
			ddl, err := schema.DDL(tc.d, table)
			require.NoError(t, err)
			require.NoError(t, tc.exec(strings.Replace(ddl, " PRIMARY KEY", "", 1)))
			q, _ := ident.Quote(tc.d, table)
			t.Cleanup(func() { assert.NoError(t, tc.exec("DROP TABLE IF EXISTS "+q)) })
			st, err := tc.open(table)
			require.NoError(t, err)
			el, err := casleader.New(st, casleader.Config{Key: "k", ID: "a"})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			err = el.Run(ctx)
			require.ErrorIs(t, err, store.ErrDeployment)
			assert.Contains(t, err.Error(), "has no primary key, not (elect_key)")
			assert.Contains(t, err.Error(), table)
		})
	}
}

// TestCreateTableUpgradesATableOfAnEarlierVersion: a table made before the lease
// and incarnation columns gets them from CreateTable, and then passes Check; an
// application's table is never altered.
func TestCreateTableUpgradesATableOfAnEarlierVersion(t *testing.T) {
	my, pool, lite := mydb.MySQL(t), pgdb.Postgres(t), litedb.SQLite(t)
	for _, tc := range []struct {
		d    schema.Dialect
		exec func(q string) error
		open func(table string) (creator, error)
	}{
		{schema.MySQL, func(q string) error { _, err := my.Exec(q); return err },
			func(table string) (creator, error) { return mysql.New(my, table) }},
		{schema.Postgres, func(q string) error { _, err := pool.Exec(context.Background(), q); return err },
			func(table string) (creator, error) { return postgres.New(pool, table) }},
		{schema.SQLite, func(q string) error { _, err := lite.Exec(q); return err },
			func(table string) (creator, error) { return sqlite.New(lite, table) }},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			table, app := testdb.Name(t), testdb.Name(t)+"_users"
			for _, name := range []string{table, table + "_members", app} {
				q, _ := ident.Quote(tc.d, name)
				t.Cleanup(func() { assert.NoError(t, tc.exec("DROP TABLE IF EXISTS "+q)) })
			}
			require.NoError(t, tc.exec(earlierDDL(t, tc.d, table)))
			st, err := tc.open(table)
			require.NoError(t, err)
			require.NoError(t, st.CreateTable(t.Context()))
			require.NoError(t, st.Check(t.Context()))

			qa, _ := ident.Quote(tc.d, app)
			require.NoError(t, tc.exec("CREATE TABLE "+qa+" (id INTEGER PRIMARY KEY, name TEXT)"))
			st, err = tc.open(app)
			require.NoError(t, err)
			err = st.CreateTable(t.Context())
			require.ErrorIs(t, err, schema.ErrWrongTable)
			assert.Contains(t, err.Error(), "this is not a casleader table")
		})
	}
}

// earlierDDL is the DDL of an election table made before the lease and
// incarnation columns.
func earlierDDL(t *testing.T, d schema.Dialect, table string) string {
	t.Helper()
	ddl, err := schema.DDL(d, table)
	require.NoError(t, err)
	var old []string
	for _, l := range strings.Split(ddl, "\n") {
		if f := strings.Fields(l); len(f) == 0 || (f[0] != "lease" && f[0] != "incarnation") {
			old = append(old, l)
		}
	}
	return strings.Join(old, "\n")
}

// TestCreateTableUpgradesAnEarlierTableFromEveryReplicaAtOnce: replicas of a new
// version that all start at once on a table of an earlier version all succeed:
// one adds each column, and the others, whose ALTER fails because the column is
// there by then, find it there.
func TestCreateTableUpgradesAnEarlierTableFromEveryReplicaAtOnce(t *testing.T) {
	const replicas = 5
	my, pool, path := mydb.MySQL(t), pgdb.Postgres(t), filepath.Join(t.TempDir(), "e.db")
	lite, err := sqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { lite.Close() })
	for _, tc := range []struct {
		d    schema.Dialect
		exec func(q string) error
		open func(t *testing.T, table string) creator // a replica, with a pool of its own
	}{
		{schema.MySQL, func(q string) error { _, err := my.Exec(q); return err }, func(t *testing.T, table string) creator {
			db, err := mysql.Open(testdb.MySQLDSN(t))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			st, err := mysql.New(db, table)
			require.NoError(t, err)
			return st
		}},
		{schema.Postgres, func(q string) error { _, err := pool.Exec(context.Background(), q); return err }, func(t *testing.T, table string) creator {
			p, err := postgres.Open(t.Context(), testdb.PostgresDSN(t))
			require.NoError(t, err)
			t.Cleanup(p.Close)
			st, err := postgres.New(p, table)
			require.NoError(t, err)
			return st
		}},
		{schema.SQLite, func(q string) error { _, err := lite.Exec(q); return err }, func(t *testing.T, table string) creator {
			db, err := sqlite.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			st, err := sqlite.New(db, table)
			require.NoError(t, err)
			return st
		}},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			table := testdb.Name(t)
			drop := func() {
				for _, name := range []string{table, table + "_members"} {
					q, _ := ident.Quote(tc.d, name)
					assert.NoError(t, tc.exec("DROP TABLE IF EXISTS "+q))
				}
			}
			t.Cleanup(drop)
			stores := make([]creator, replicas)
			for i := range stores {
				stores[i] = tc.open(t, table)
			}
			for round := range 3 { // the race is won by timing: give it several chances
				drop()
				require.NoError(t, tc.exec(earlierDDL(t, tc.d, table)))
				createAtOnce(t, stores, round)
			}
		})
	}
}
