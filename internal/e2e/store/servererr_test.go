package store_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	mysqlstore "github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// Real server errors, each produced on a connection of its own so that no other test
// is disturbed: a read-only session, a lock wait that times out, a serialization
// failure. Each must reach the caller with the kind DESIGN.md asks for.

// mysqlWithParams opens a pool whose sessions set params (go-sql-driver sends unknown
// DSN parameters as SET statements).
func mysqlWithParams(t *testing.T, params map[string]string) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(testdb.MySQLDSN(t))
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k, v := range params {
		cfg.Params[k] = v
	}
	db, err := mysqlstore.Open(cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func pgWithParams(t *testing.T, params map[string]string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testdb.PostgresDSN(t))
	require.NoError(t, err)
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	if params["default_transaction_read_only"] == "on" {
		// A DSN with target_session_attrs=read-write (a primary + standby pair's)
		// refuses read-only sessions at connect time; these tests want one.
		// TestEveryHostReadOnlyIsNotWritable covers the refusal.
		cfg.ConnConfig.ValidateConnect = nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// errStore is the part of a store the tests below drive.
type errStore interface {
	CreateTable(ctx context.Context) error
	Observe(ctx context.Context, key string) (store.Record, bool, error)
	Insert(ctx context.Context, key string, cand store.Candidate) (int64, bool, error)
	Elect(ctx context.Context, key string, cand store.Candidate, version int64) (int64, bool, error)
	Renew(ctx context.Context, key, id string, version int64) (bool, error)
	Release(ctx context.Context, key, id string, version int64) (bool, error)
}

// dropLater drops table with exec when t ends.
func dropLater(t *testing.T, d schema.Dialect, table string, exec func(ctx context.Context, q string) error) {
	quoted, err := ident.Quote(d, table)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, exec(ctx, "DROP TABLE IF EXISTS "+quoted))
	})
}

// notWritable checks that every write of ro fails with ErrNotWritable (not a lost
// race, not transient, not deployment) and that reads still work.
func notWritable(t *testing.T, ro errStore, code string) {
	t.Helper()
	ctx := t.Context()
	rec, found, err := ro.Observe(ctx, "k")
	require.NoError(t, err, "reads work on a read-only server")
	require.True(t, found)
	for _, w := range []struct {
		name string
		err  error
	}{
		{"Insert", third(ro.Insert(ctx, "other", store.Candidate{ID: "b"}))},
		{"Elect", third(ro.Elect(ctx, "k", store.Candidate{ID: "b", Lease: time.Microsecond}, rec.Version))},
		{"Renew", second(ro.Renew(ctx, "k", "a", rec.Version))},
		{"Release", second(ro.Release(ctx, "k", "a", rec.Version))},
	} {
		require.ErrorIs(t, w.err, store.ErrNotWritable, w.name)
		assert.NotErrorIs(t, w.err, store.ErrTransient, w.name)
		assert.NotErrorIs(t, w.err, store.ErrDeployment, w.name)
		assert.Contains(t, w.err.Error(), code, w.name)
	}
}

// second returns the error of a compare-and-set; third that of a write that starts
// a term.
func second(_ bool, err error) error { return err }

func third(_ int64, _ bool, err error) error { return err }

func TestReadOnlyServerIsNotWritable(t *testing.T) {
	t.Run("MariaDBReadOnlySession", func(t *testing.T) {
		t.Parallel()
		table := testdb.Name(t)
		rw, err := mysqlstore.New(mydb.MySQL(t), table)
		require.NoError(t, err)
		dropLater(t, schema.MySQL, table, func(ctx context.Context, q string) error { _, err := mydb.MySQL(t).ExecContext(ctx, q); return err })
		require.NoError(t, rw.CreateTable(t.Context()))
		_, _, err = rw.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		// A read-only session: MariaDB answers 1792 (MySQL's --read-only server, 1290, is
		// global and would disturb other tests; its classification is unit-tested).
		ro, err := mysqlstore.New(mysqlWithParams(t, map[string]string{"tx_read_only": "1"}), table)
		require.NoError(t, err)
		notWritable(t, ro, "1792")
	})
	t.Run("PostgreSQLReadOnlySession", func(t *testing.T) {
		t.Parallel()
		table := testdb.Name(t)
		pool := pgdb.Postgres(t)
		rw, err := postgres.New(pool, table)
		require.NoError(t, err)
		dropLater(t, schema.Postgres, table, func(ctx context.Context, q string) error { _, err := pool.Exec(ctx, q); return err })
		require.NoError(t, rw.CreateTable(t.Context()))
		term, _, err := rw.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		// default_transaction_read_only, as ALTER ROLE … SET would give every session of
		// a role, or a standby does: SQLSTATE 25006.
		roPool := pgWithParams(t, map[string]string{"default_transaction_read_only": "on"})
		ro, err := postgres.New(roPool, table)
		require.NoError(t, err)
		notWritable(t, ro, "25006")

		// The guard takes a row lock: refused on a read-only server too.
		tx, err := roPool.Begin(t.Context())
		require.NoError(t, err)
		defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after the error
		err = ro.Guard(t.Context(), tx, "k", "a", term, time.Hour)
		require.ErrorIs(t, err, store.ErrNotWritable)
		assert.NotErrorIs(t, err, store.ErrFenced)
	})
	t.Run("SQLiteReadOnlyFile", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "casleader.db")
		db, err := sqlite.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		rw, err := sqlite.New(db, "")
		require.NoError(t, err)
		require.NoError(t, rw.CreateTable(t.Context()))
		_, _, err = rw.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		rodb, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
		require.NoError(t, err)
		t.Cleanup(func() { rodb.Close() })
		ro, err := sqlite.New(rodb, "")
		require.NoError(t, err)
		notWritable(t, ro, "readonly")
	})
}

// TestLockConflictsAreTransient: a write that waits for a row lock held by another
// transaction until the server gives up is transient (retry within the deadline).
func TestLockConflictsAreTransient(t *testing.T) {
	t.Run("MariaDBLockWaitTimeout", func(t *testing.T) {
		t.Parallel()
		table := testdb.Name(t)
		admin := mydb.MySQL(t)
		rw, err := mysqlstore.New(admin, table)
		require.NoError(t, err)
		dropLater(t, schema.MySQL, table, func(ctx context.Context, q string) error { _, err := admin.ExecContext(ctx, q); return err })
		require.NoError(t, rw.CreateTable(t.Context()))
		term, _, err := rw.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		quoted, _ := ident.Quote(schema.MySQL, table)
		tx, err := admin.BeginTx(t.Context(), nil)
		require.NoError(t, err)
		defer tx.Rollback() //nolint:errcheck // the lock holder is rolled back
		_, err = tx.ExecContext(t.Context(), "SELECT version FROM "+quoted+" WHERE elect_key = 'k' FOR UPDATE")
		require.NoError(t, err)

		s, err := mysqlstore.New(mysqlWithParams(t, map[string]string{"innodb_lock_wait_timeout": "1"}), table)
		require.NoError(t, err)
		_, err = s.Renew(t.Context(), "k", "a", term)
		require.ErrorIs(t, err, store.ErrTransient)
		var me *mysql.MySQLError
		require.ErrorAs(t, err, &me)
		assert.EqualValues(t, 1205, me.Number)
	})
	t.Run("PostgreSQLLockNotAvailable", func(t *testing.T) {
		t.Parallel()
		table := testdb.Name(t)
		pool := pgdb.Postgres(t)
		rw, err := postgres.New(pool, table)
		require.NoError(t, err)
		dropLater(t, schema.Postgres, table, func(ctx context.Context, q string) error { _, err := pool.Exec(ctx, q); return err })
		require.NoError(t, rw.CreateTable(t.Context()))
		term, _, err := rw.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		quoted, _ := ident.Quote(schema.Postgres, table)
		tx, err := pool.Begin(t.Context())
		require.NoError(t, err)
		defer tx.Rollback(context.Background()) //nolint:errcheck // the lock holder is rolled back
		_, err = tx.Exec(t.Context(), "SELECT version FROM "+quoted+" WHERE elect_key = 'k' FOR UPDATE")
		require.NoError(t, err)

		s, err := postgres.New(pgWithParams(t, map[string]string{"lock_timeout": "200ms"}), table)
		require.NoError(t, err)
		_, err = s.Renew(t.Context(), "k", "a", term)
		require.ErrorIs(t, err, store.ErrTransient)
		assertPgCode(t, err, "55P03")
	})
	t.Run("PostgreSQLSerializationFailure", func(t *testing.T) {
		t.Parallel()
		table := testdb.Name(t)
		pool := pgdb.Postgres(t)
		rw, err := postgres.New(pool, table)
		require.NoError(t, err)
		dropLater(t, schema.Postgres, table, func(ctx context.Context, q string) error { _, err := pool.Exec(ctx, q); return err })
		require.NoError(t, rw.CreateTable(t.Context()))
		term, _, err := rw.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		quoted, _ := ident.Quote(schema.Postgres, table)
		// Another transaction updates the row and commits while the store's renewal,
		// in a REPEATABLE READ session, waits for the row: 40001.
		tx, err := pool.Begin(t.Context())
		require.NoError(t, err)
		defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
		_, err = tx.Exec(t.Context(), "UPDATE "+quoted+" SET update_time = clock_timestamp() WHERE elect_key = 'k'")
		require.NoError(t, err)

		s, err := postgres.New(pgWithParams(t, map[string]string{"default_transaction_isolation": "repeatable read"}), table)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { _, err := s.Renew(context.Background(), "k", "a", term); done <- err }()
		require.Eventually(t, func() bool {
			n, err := pgLockWaits(pool)(t.Context(), table)
			require.NoError(t, err)
			return n > 0
		}, 10*time.Second, 10*time.Millisecond, "the renewal does not wait for the row")
		require.NoError(t, tx.Commit(t.Context()))
		err = <-done
		require.ErrorIs(t, err, store.ErrTransient)
		assertPgCode(t, err, "40001")
	})
	t.Run("SQLiteBusy", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "casleader.db")
		db, err := sqlite.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		rw, err := sqlite.New(db, "")
		require.NoError(t, err)
		require.NoError(t, rw.CreateTable(t.Context()))
		term, _, err := rw.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		tx, err := db.BeginTx(t.Context(), nil) // BEGIN IMMEDIATE: the write lock
		require.NoError(t, err)
		defer tx.Rollback() //nolint:errcheck // the lock holder is rolled back
		other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(100)")
		require.NoError(t, err)
		t.Cleanup(func() { other.Close() })
		s, err := sqlite.New(other, "")
		require.NoError(t, err)
		_, err = s.Renew(t.Context(), "k", "a", term)
		require.ErrorIs(t, err, store.ErrTransient)
	})
}

func assertPgCode(t *testing.T, err error, code string) {
	t.Helper()
	var pe *pgconn.PgError
	if assert.True(t, errors.As(err, &pe), "a PgError in %v", err) {
		assert.Equal(t, code, pe.Code)
	}
}
