package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// guardStore is a store with a guard for database/sql transactions.
type guardStore interface {
	CreateTable(ctx context.Context) error
	Insert(ctx context.Context, key string, cand store.Candidate) (int64, bool, error)
	Elect(ctx context.Context, key string, cand store.Candidate, version int64) (int64, bool, error)
	Release(ctx context.Context, key, id string, version int64) (bool, error)
	Renew(ctx context.Context, key, id string, version int64) (bool, error)
}

var (
	_ store.Driver = (*mysql.Store)(nil)
	_ store.Driver = (*postgres.Store)(nil)
	_ store.Driver = (*sqlite.Store)(nil)
)

// guardTx is one of the user's transactions, of either driver family.
type guardTx interface {
	guard(ctx context.Context, key, id string, token int64, lease time.Duration) error
	exec(ctx context.Context, query string, args ...any) error
	commit() error
	rollback()
}

type sqlTx struct {
	tx *sql.Tx
	g  func(ctx context.Context, tx any, key, id string, token int64, lease time.Duration) error
}

func (x sqlTx) guard(ctx context.Context, key, id string, token int64, lease time.Duration) error {
	return x.g(ctx, x.tx, key, id, token, lease)
}
func (x sqlTx) exec(ctx context.Context, q string, args ...any) error {
	_, err := x.tx.ExecContext(ctx, q, args...)
	return err
}
func (x sqlTx) commit() error { return x.tx.Commit() }
func (x sqlTx) rollback()     { _ = x.tx.Rollback() }

type pgxTx struct {
	tx pgx.Tx
	s  *postgres.Store
}

func (x pgxTx) guard(ctx context.Context, key, id string, token int64, lease time.Duration) error {
	return x.s.Guard(ctx, x.tx, key, id, token, lease)
}
func (x pgxTx) exec(ctx context.Context, q string, args ...any) error {
	_, err := x.tx.Exec(ctx, q, args...)
	return err
}
func (x pgxTx) commit() error { return x.tx.Commit(context.Background()) }
func (x pgxTx) rollback()     { _ = x.tx.Rollback(context.Background()) }

// guardConn is one subtest's connection to a database: a store on its table, a way
// to begin the user's transactions, and raw SQL for setting up and checking.
type guardConn struct {
	s     guardStore
	begin func(ctx context.Context) (guardTx, error)
	// exec runs raw SQL outside any transaction.
	exec func(ctx context.Context, q string, args ...any) error
	// strings runs a query returning one text column.
	strings func(ctx context.Context, q string) ([]string, error)
	// lockWaits counts the sessions waiting for a row lock on table; nil where the
	// database cannot tell (SQLite).
	lockWaits func(ctx context.Context, table string) (int, error)
}

// guardHarness opens connections to one database.
type guardHarness struct {
	name    string
	dialect schema.Dialect
	open    func(t *testing.T, table string) guardConn
}

func guardHarnesses() []guardHarness {
	return []guardHarness{
		{name: "MariaDB", dialect: schema.MySQL, open: func(t *testing.T, table string) guardConn {
			db := mydb.MySQL(t)
			s, err := mysql.New(db, table)
			require.NoError(t, err)
			c := sqlConn(db, s, s.Guard)
			c.lockWaits = func(ctx context.Context, table string) (n int, err error) {
				err = db.QueryRowContext(ctx,
					`SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?`,
					"%"+table+"%").Scan(&n)
				return n, err
			}
			return c
		}},
		{name: "PostgreSQLDatabaseSQL", dialect: schema.Postgres, open: func(t *testing.T, table string) guardConn {
			db, err := sql.Open("pgx", testdb.PostgresDSN(t))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			s, err := postgres.NewDB(db, table)
			require.NoError(t, err)
			c := sqlConn(db, s, s.Guard)
			c.lockWaits = pgLockWaits(pgdb.Postgres(t))
			return c
		}},
		{name: "PostgreSQLPgx", dialect: schema.Postgres, open: func(t *testing.T, table string) guardConn {
			pool := pgdb.Postgres(t)
			s, err := postgres.New(pool, table)
			require.NoError(t, err)
			return guardConn{
				s: s,
				begin: func(ctx context.Context) (guardTx, error) {
					tx, err := pool.Begin(ctx)
					return pgxTx{tx, s}, err
				},
				exec: func(ctx context.Context, q string, args ...any) error {
					_, err := pool.Exec(ctx, q, args...)
					return err
				},
				strings: func(ctx context.Context, q string) ([]string, error) {
					rows, err := pool.Query(ctx, q)
					if err != nil {
						return nil, err
					}
					return pgx.CollectRows(rows, pgx.RowTo[string])
				},
				lockWaits: pgLockWaits(pool),
			}
		}},
		{name: "PgBouncerPgx", dialect: schema.Postgres, open: func(t *testing.T, table string) guardConn {
			// A pgx transaction through PgBouncer in transaction pooling mode: the
			// transaction keeps one server connection, so the lock holds. The test's own
			// statements use no named prepared statements (default_query_exec_mode=exec),
			// as PgBouncer before 1.21 requires of every client in this mode: a cached
			// statement is otherwise missing (26000) or taken (42P05) on the next
			// transaction's server connection.
			pool := pgdb.PostgresAt(t, execModeDSN(testdb.PgBouncerDSN(t)))
			s, err := postgres.New(pool, table)
			require.NoError(t, err)
			return guardConn{
				s: s,
				begin: func(ctx context.Context) (guardTx, error) {
					tx, err := pool.Begin(ctx)
					return pgxTx{tx, s}, err
				},
				exec: func(ctx context.Context, q string, args ...any) error {
					_, err := pool.Exec(ctx, q, args...)
					return err
				},
				strings: func(ctx context.Context, q string) ([]string, error) {
					rows, err := pool.Query(ctx, q)
					if err != nil {
						return nil, err
					}
					return pgx.CollectRows(rows, pgx.RowTo[string])
				},
				lockWaits: pgLockWaits(pgdb.Postgres(t)),
			}
		}},
		{name: "PgBouncerDatabaseSQL", dialect: schema.Postgres, open: func(t *testing.T, table string) guardConn {
			db, err := sql.Open("pgx", execModeDSN(testdb.PgBouncerDSN(t)))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			s, err := postgres.NewDB(db, table)
			require.NoError(t, err)
			c := sqlConn(db, s, s.Guard)
			c.lockWaits = pgLockWaits(pgdb.Postgres(t))
			return c
		}},
		{name: "SQLite", dialect: schema.SQLite, open: func(t *testing.T, table string) guardConn {
			db := litedb.SQLite(t) // a file of its own, shared by the subtest's connections
			s, err := sqlite.New(db, table)
			require.NoError(t, err)
			return sqlConn(db, s, s.Guard)
		}},
		{name: "SQLiteDeferredTransactions", dialect: schema.SQLite, open: func(t *testing.T, table string) guardConn {
			// The user's own pool on the file begins DEFERRED transactions (no _txlock):
			// the guard must take the write lock itself.
			path := filepath.Join(t.TempDir(), "casleader.db")
			db, err := sqlite.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			s, err := sqlite.New(db, table)
			require.NoError(t, err)
			user, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
			require.NoError(t, err)
			t.Cleanup(func() { user.Close() })
			c := sqlConn(user, s, s.Guard)
			return c
		}},
	}
}

func sqlConn(db *sql.DB, s guardStore, g func(context.Context, any, string, string, int64, time.Duration) error) guardConn {
	return guardConn{
		s: s,
		begin: func(ctx context.Context) (guardTx, error) {
			tx, err := db.BeginTx(ctx, nil)
			return sqlTx{tx, g}, err
		},
		exec: func(ctx context.Context, q string, args ...any) error {
			_, err := db.ExecContext(ctx, q, args...)
			return err
		},
		strings: func(ctx context.Context, q string) ([]string, error) {
			rows, err := db.QueryContext(ctx, q)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					return nil, err
				}
				out = append(out, s)
			}
			return out, rows.Err()
		},
	}
}

func pgLockWaits(pool *pgxpool.Pool) func(ctx context.Context, table string) (int, error) {
	return func(ctx context.Context, table string) (n int, err error) {
		err = pool.QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1 AND pid <> pg_backend_pid()`,
			"%"+table+"%").Scan(&n)
		return n, err
	}
}

const hour = time.Hour

func TestGuard(t *testing.T) {
	for _, h := range guardHarnesses() {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				name string
				run  func(t *testing.T, h guardHarness)
			}{
				{"PassesForTheLiveTerm", guardPassesForTheLiveTerm},
				{"FailsAfterTakeover", guardFailsAfterTakeover},
				{"FailsAfterRelease", guardFailsAfterRelease},
				{"FailsWhenTheLeaseExpiredInDatabaseTime", guardFailsWhenTheLeaseExpired},
				{"FailsForAnotherIDTokenOrKey", guardFailsForAnotherIDTokenOrKey},
				{"FailsOnARolledBackRow", guardFailsOnARolledBackRow},
				{"TakeoverWaitsForTheGuardedTransaction", takeoverWaitsForTheGuardedTransaction},
				{"FencedWriteNeverLandsAfterTheNewLeaderWon", fencedWriteNeverLandsAfterTheNewLeaderWon},
				{"MissingTableIsADeploymentErrorNotFenced", guardMissingTable},
				{"HostileKeysAndIDsAreData", guardHostileKeys},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, h)
				})
			}
		})
	}
}

// guardEnv is one subtest's table, store and helpers.
type guardEnv struct {
	guardConn
	t      *testing.T
	h      guardHarness
	table  string
	quoted string
}

func newGuardEnv(t *testing.T, h guardHarness) *guardEnv {
	t.Helper()
	table := testdb.Name(t)
	c := h.open(t, table)
	quoted, err := ident.Quote(h.dialect, table)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, q := range []string{quoted, actionsTable(h.dialect, table)} {
			if err := c.exec(ctx, "DROP TABLE IF EXISTS "+q); err != nil {
				t.Errorf("drop %s: %v", q, err)
			}
		}
	})
	require.NoError(t, c.s.CreateTable(t.Context()))
	return &guardEnv{guardConn: c, t: t, h: h, table: table, quoted: quoted}
}

func actionsTable(d schema.Dialect, table string) string {
	q, _ := ident.Quote(d, table+"_a")
	return q
}

// createActions creates the table that guarded transactions write to, with an
// id in insertion order.
func (e *guardEnv) createActions() string {
	q := actionsTable(e.h.dialect, e.table)
	id := map[schema.Dialect]string{
		schema.MySQL:    "id BIGINT AUTO_INCREMENT PRIMARY KEY",
		schema.Postgres: "id BIGSERIAL PRIMARY KEY",
		schema.SQLite:   "id INTEGER PRIMARY KEY",
	}[e.h.dialect]
	require.NoError(e.t, e.exec(e.t.Context(), "CREATE TABLE "+q+" ("+id+", token BIGINT NOT NULL, who VARCHAR(64) NOT NULL)"))
	return q
}

func (e *guardEnv) param(i int) string {
	if e.h.dialect == schema.Postgres {
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}

// guardOnce runs the guard in a new transaction and rolls it back.
func (e *guardEnv) guardOnce(key, id string, token int64, lease time.Duration) error {
	e.t.Helper()
	tx, err := e.begin(e.t.Context())
	require.NoError(e.t, err)
	defer tx.rollback()
	return tx.guard(e.t.Context(), key, id, token, lease)
}

// insert creates the row of key with id as leader, with a lease of an hour, and
// returns its term.
func (e *guardEnv) insert(key, id string) int64 {
	e.t.Helper()
	term, ok, err := e.s.Insert(e.t.Context(), key, store.Candidate{ID: id, Lease: hour})
	require.NoError(e.t, err)
	require.True(e.t, ok, "insert %q", key)
	require.Positive(e.t, term, "insert %q", key)
	return term
}

// elect makes id the leader of key from version, with a lease of an hour, and
// returns the new term. The lease there expires first: the row's lease becomes 1 µs
// (as a leader with that lease would have written it), so that the election judges
// it expired by the database clock.
func (e *guardEnv) elect(ctx context.Context, key, id string, version int64) int64 {
	e.t.Helper()
	require.NoError(e.t, e.exec(ctx, "UPDATE "+e.quoted+" SET lease = 1 WHERE elect_key = "+e.param(1), key))
	time.Sleep(2 * time.Millisecond) // SQLite's clock has millisecond steps
	term, ok, err := e.s.Elect(ctx, key, store.Candidate{ID: id, Lease: hour}, version)
	require.NoError(e.t, err)
	require.True(e.t, ok, "elect %q from version %d", id, version)
	require.Greater(e.t, term, version, "a won election starts a term above the version it was sent from")
	return term
}

func fenced(t *testing.T, err error, mention string) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrFenced)
	assert.Contains(t, err.Error(), mention)
	for _, other := range []error{store.ErrTransient, store.ErrDeployment, store.ErrNotWritable, store.ErrInvalidArgument} {
		assert.NotErrorIs(t, err, other)
	}
}

func guardPassesForTheLiveTerm(t *testing.T, h guardHarness) {
	e := newGuardEnv(t, h)
	term := e.insert("k", "a")
	actions := e.createActions()
	tx, err := e.begin(t.Context())
	require.NoError(t, err)
	defer tx.rollback()
	require.NoError(t, tx.guard(t.Context(), "k", "a", term, hour))
	require.NoError(t, tx.exec(t.Context(), "INSERT INTO "+actions+" (token, who) VALUES ("+e.param(1)+", 'a')", term))
	require.NoError(t, tx.commit())

	// After a renewal the term, and so the token, is the same.
	ok, err := e.s.Renew(t.Context(), "k", "a", term)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, e.guardOnce("k", "a", term, hour))
}

func guardFailsAfterTakeover(t *testing.T, h guardHarness) {
	e := newGuardEnv(t, h)
	ctx := t.Context()
	first := e.insert("k", "a")
	// b takes over once the lease (1 µs here) has expired, in a newer term.
	time.Sleep(5 * time.Millisecond) // SQLite's clock has millisecond steps
	second := e.elect(ctx, "k", "b", first)
	fenced(t, e.guardOnce("k", "a", first, hour), fmt.Sprintf("newer term %d", second))
	require.NoError(t, e.guardOnce("k", "b", second, hour), "the new leader's token holds")
}

func guardFailsAfterRelease(t *testing.T, h guardHarness) {
	e := newGuardEnv(t, h)
	term := e.insert("k", "a")
	ok, err := e.s.Release(t.Context(), "k", "a", term)
	require.NoError(t, err)
	require.True(t, ok)
	fenced(t, e.guardOnce("k", "a", term, hour), "released")
}

func guardFailsWhenTheLeaseExpired(t *testing.T, h guardHarness) {
	e := newGuardEnv(t, h)
	term := e.insert("k", "a")
	time.Sleep(300 * time.Millisecond)
	fenced(t, e.guardOnce("k", "a", term, 200*time.Millisecond), "expired")
	require.NoError(t, e.guardOnce("k", "a", term, hour), "the same row with a longer lease")
}

func guardFailsForAnotherIDTokenOrKey(t *testing.T, h guardHarness) {
	e := newGuardEnv(t, h)
	term := e.insert("k", "a")
	fenced(t, e.guardOnce("k", "b", term, hour), `held by "a"`)
	fenced(t, e.guardOnce("k", "a", term+1, hour), "rolled back")
	fenced(t, e.guardOnce("k", "a", term-1, hour), fmt.Sprintf("newer term %d", term))
	fenced(t, e.guardOnce("k", "a", 0, hour), "not a term")
	fenced(t, e.guardOnce("k", "a", -1, hour), "not a term")
	fenced(t, e.guardOnce("other", "a", term, hour), "does not exist")
	fenced(t, e.guardOnce("K", "a", term, hour), "does not exist")
	for _, bad := range []struct{ key, id string }{{"", "a"}, {"k", ""}, {"k ", "a"}, {"k", "a\x00"}, {strings.Repeat("k", 256), "a"}} {
		err := e.guardOnce(bad.key, bad.id, term, hour)
		require.ErrorIs(t, err, store.ErrInvalidArgument, "%q %q", bad.key, bad.id)
		assert.NotErrorIs(t, err, store.ErrFenced)
	}
	require.ErrorIs(t, e.guardOnce("k", "a", term, 0), store.ErrInvalidArgument, "zero lease")
}

func guardFailsOnARolledBackRow(t *testing.T, h guardHarness) {
	e := newGuardEnv(t, h)
	ctx := t.Context()
	first := e.insert("k", "a")
	time.Sleep(5 * time.Millisecond)
	second := e.elect(ctx, "k", "b", first)
	// A failover loses b's election: the row is back at a's term. b's token is
	// newer than the row's term.
	require.NoError(t, e.exec(ctx, "UPDATE "+e.quoted+" SET version = "+e.param(1)+", term = "+e.param(2)+", leader_id = 'a' WHERE elect_key = 'k'", first, first))
	fenced(t, e.guardOnce("k", "b", second, hour), "rolled back")
	// c wins from the rolled-back version: its term is chosen by the database clock,
	// so it is newer than b's instead of issuing b's term a second time. b's token
	// must not pass on c's lease.
	time.Sleep(5 * time.Millisecond)
	third := e.elect(ctx, "k", "c", first)
	require.Greater(t, third, second, "a term is never issued twice, even after a rollback")
	fenced(t, e.guardOnce("k", "b", second, hour), fmt.Sprintf("newer term %d was won by \"c\"", third))
	require.NoError(t, e.guardOnce("k", "c", third, hour))
}

// takeoverWaitsForTheGuardedTransaction: while a guarded transaction is open, an
// election (and a renewal) of the row waits for it.
func takeoverWaitsForTheGuardedTransaction(t *testing.T, h guardHarness) {
	e := newGuardEnv(t, h)
	ctx := t.Context()
	// A row that records no lease (as an earlier version wrote it) is judged by
	// the elector's own lease: 1 µs below, so only the lock stops the election.
	term, ok, err := e.s.Insert(ctx, "k", store.Candidate{ID: "a"})
	require.NoError(t, err)
	require.True(t, ok)
	tx, err := e.begin(ctx)
	require.NoError(t, err)
	defer tx.rollback()
	require.NoError(t, tx.guard(ctx, "k", "a", term, hour))

	done := make(chan error, 1)
	go func() {
		_, ok, err := e.s.Elect(context.WithoutCancel(ctx), "k", store.Candidate{ID: "b", Lease: time.Microsecond}, term)
		if err == nil && !ok {
			err = errors.New("election lost its compare-and-set")
		}
		done <- err
	}()
	e.waitBlocked(done)
	require.NoError(t, tx.commit())
	select {
	case err := <-done:
		require.NoError(t, err, "the election after the guarded transaction ended")
	case <-time.After(30 * time.Second):
		t.Fatal("the election did not proceed after the guarded transaction committed")
	}
	fenced(t, e.guardOnce("k", "a", term, hour), "newer term")
}

// waitBlocked asserts that the write whose result arrives on done is blocked: the
// database reports a session waiting for a lock on the table (where it can tell),
// and the write has not returned.
func (e *guardEnv) waitBlocked(done <-chan error) {
	e.t.Helper()
	wait := 200 * time.Millisecond
	if e.lockWaits != nil {
		// Where the database can tell, wait until it reports the waiter; under load
		// its report can lag, so after 10 s the write still not having returned is
		// taken as the proof instead.
		seen := false
		deadline := time.Now().Add(10 * time.Second)
		for !seen && time.Now().Before(deadline) {
			select {
			case err := <-done:
				e.t.Fatalf("the write went through a guarded transaction's lock (err %v)", err)
			case <-time.After(10 * time.Millisecond):
			}
			n, err := e.lockWaits(e.t.Context(), e.table)
			require.NoError(e.t, err)
			seen = n > 0
		}
		if !seen {
			e.t.Logf("the database did not report the waiting session within 10 s; the write is still blocked")
			wait = 0
		}
	}
	select {
	case err := <-done:
		e.t.Fatalf("the write went through a guarded transaction's lock (err %v)", err)
	case <-time.After(wait):
	}
}

// fencedWriteNeverLandsAfterTheNewLeaderWon: the old leader's guarded write and the
// new leader's election are serialised by the lock, in either order: either the
// write commits before the election, or the guard refuses it.
func fencedWriteNeverLandsAfterTheNewLeaderWon(t *testing.T, h guardHarness) {
	e := newGuardEnv(t, h)
	ctx := t.Context()
	first := e.insert("k", "a")
	actions := e.createActions()
	write := func(id string, token int64, pause time.Duration) error {
		tx, err := e.begin(ctx)
		if err != nil {
			return err
		}
		defer tx.rollback()
		if err := tx.guard(ctx, "k", id, token, hour); err != nil {
			return err
		}
		time.Sleep(pause) // a slow action: the election overtakes it unless locked out
		if err := tx.exec(ctx, "INSERT INTO "+actions+" (token, who) VALUES ("+e.param(1)+", "+e.param(2)+")", token, id); err != nil {
			return err
		}
		return tx.commit()
	}
	// a's write is in flight when b's election is sent; b writes after it won.
	aDone := make(chan error, 1)
	go func() { aDone <- write("a", first, 100*time.Millisecond) }()
	time.Sleep(20 * time.Millisecond)
	second := e.elect(ctx, "k", "b", first)
	require.NoError(t, write("b", second, 0))
	aErr := <-aDone
	if aErr != nil {
		// On SQLite, a guard that lost the race for the file's write lock to the
		// election fails with a busy error, not fenced: either way nothing is written.
		t.Logf("a's write was refused: %v", aErr)
	}
	// The table holds b's action last, and a's only if it came first.
	rows := e.readActions(actions)
	require.NotEmpty(t, rows)
	assert.Equal(t, "b", rows[len(rows)-1], "the newer leader's write is the last one: %v", rows)
	fenced(t, write("a", first, 0), "newer term")
}

func (e *guardEnv) readActions(actions string) []string {
	e.t.Helper()
	out, err := e.strings(e.t.Context(), "SELECT who FROM "+actions+" ORDER BY id")
	require.NoError(e.t, err)
	return out
}

func guardMissingTable(t *testing.T, h guardHarness) {
	table := testdb.Name(t)
	c := h.open(t, table)
	tx, err := c.begin(t.Context())
	require.NoError(t, err)
	defer tx.rollback()
	err = tx.guard(t.Context(), "k", "a", 1, hour)
	require.ErrorIs(t, err, store.ErrDeployment)
	assert.NotErrorIs(t, err, store.ErrFenced)
	assert.Contains(t, err.Error(), table)
}

func guardHostileKeys(t *testing.T, h guardHarness) {
	e := newGuardEnv(t, h)
	for _, key := range []string{
		`x'; DROP TABLE ` + e.table + `; --`, `' OR '1'='1`, `" OR ""="`, "`", `\`, `%`, `_`, `$1`, `?`,
		"ключ 🗳", "new\nline",
	} {
		term := e.insert(key, key)
		require.NoError(t, e.guardOnce(key, key, term, hour), "key %q", key)
		fenced(t, e.guardOnce(key, key+"x", term, hour), "held by")
		// A LIKE-style or injected match never reaches another row.
		fenced(t, e.guardOnce(key+"%", key, term, hour), "does not exist")
	}
}
