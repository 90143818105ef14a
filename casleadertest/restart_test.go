package casleadertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/casleadertest"
	"github.com/casleader/casleader/store"
)

// TestNewRestartableDBSkipsADatabaseGivenByDSN: the kit never restarts a server
// it did not start; with the DSN variable set, the test skips (also under
// CASLEADER_REQUIRE_DB=1) and says what to do.
func TestNewRestartableDBSkipsADatabaseGivenByDSN(t *testing.T) {
	t.Setenv(casleadertest.EnvMySQL, "root@tcp(127.0.0.1:1)/test")
	t.Setenv(casleadertest.EnvRequire, "1")
	r := &recorder{TB: t}
	r.run(func(t testing.TB) { casleadertest.NewRestartableDB(t, casleadertest.MySQL) })
	require.True(t, r.skipped, "NewRestartableDB skips a database given by DSN (failed: %v, %q)", r.failed, r.msg)
	assert.Contains(t, r.msg, casleadertest.EnvMySQL+" is set")
	assert.Contains(t, r.msg, "unset "+casleadertest.EnvMySQL)
	assert.NotContains(t, r.msg, "127.0.0.1:1", "the DSN is not printed")
}

// TestNewRestartableDBFailsSQLite: SQLite has no server; asking to restart one is
// a mistake of the test, reported as such.
func TestNewRestartableDBFailsSQLite(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	r.run(func(t testing.TB) { casleadertest.NewRestartableDB(t, casleadertest.SQLite) })
	require.True(t, r.failed, "NewRestartableDB fails SQLite")
	assert.Contains(t, r.msg, "SQLite has no server to restart")
}

// TestRestartNeedsADatabaseOfItsOwn: DB.Restart and the Cluster's restart fault
// refuse a database the kit did not start for the test alone, and say where it
// came from.
func TestRestartNeedsADatabaseOfItsOwn(t *testing.T) {
	t.Parallel()
	db := casleadertest.NewDB(t, casleadertest.SQLite)
	err := db.Restart(t.Context(), time.Second)
	require.ErrorIs(t, err, casleadertest.ErrNotRestartable)
	assert.Contains(t, err.Error(), "SQLite file")

	r := &recorder{TB: t}
	r.run(func(t testing.TB) {
		casleadertest.Cluster{DB: db, Lead: func(context.Context, *casleadertest.Candidate) {},
			Kinds: []string{casleadertest.RestartDatabase}}.Run(t)
	})
	require.True(t, r.failed, "a Cluster refuses the restart fault on NewDB's database")
	assert.Contains(t, r.msg, "needs a database of NewRestartableDB")
	assert.Contains(t, r.msg, "SQLite file")
}

// TestRestartRestartsTheServerAndKeepsTheData: a restart is one of the server
// process (its connections drop, its start time changes), and what was committed
// before it is there after it.
func TestRestartRestartsTheServerAndKeepsTheData(t *testing.T) {
	t.Parallel()
	for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := casleadertest.NewRestartableDB(t, d)
			ctx := t.Context()
			term, inserted, err := db.Store.Insert(ctx, "job", store.Candidate{ID: "a"})
			require.NoError(t, err)
			require.True(t, inserted)

			// A mark of the server process: PostgreSQL's start time; on MySQL a
			// global variable set here, which a restart sets back to its default.
			mark := "SELECT CAST(pg_postmaster_start_time() AS TEXT)"
			if d == casleadertest.MySQL {
				_, err := db.SQL.ExecContext(ctx, "SET GLOBAL max_connect_errors = 4242")
				require.NoError(t, err)
				mark = "SELECT CAST(@@GLOBAL.max_connect_errors AS CHAR)"
			}
			var before, after string
			require.NoError(t, db.SQL.QueryRowContext(ctx, mark).Scan(&before))
			held, err := db.SQL.Conn(ctx)
			require.NoError(t, err)
			defer held.Close()
			require.NoError(t, held.PingContext(ctx))

			require.NoError(t, db.Restart(ctx, 200*time.Millisecond))

			var one int
			assert.Error(t, held.QueryRowContext(ctx, "SELECT 1").Scan(&one), "a connection of before the restart was dropped")
			require.NoError(t, db.SQL.QueryRowContext(ctx, mark).Scan(&after), "DB.SQL works after the restart")
			assert.NotEqual(t, before, after, "the server process was restarted")
			rec, found, err := db.Store.Observe(ctx, "job")
			require.NoError(t, err)
			require.True(t, found, "the row committed before the restart is kept")
			assert.Equal(t, "a", rec.LeaderID)
			assert.Equal(t, term, rec.Term)
		})
	}
}
