package casleader_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
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

var (
	_ store.Driver = (*mysql.Store)(nil)
	_ store.Driver = (*postgres.Store)(nil)
	_ store.Driver = (*sqlite.Store)(nil)
	_ store.Fencer = (*casleader.Term)(nil)
	_ store.Fencer = store.Fence{}
)

// Timings of the guard tests: generous, so a loaded machine does not lose leases.
const (
	gLease = 2 * time.Second
	gRenew = 1200 * time.Millisecond
	gBeat  = 100 * time.Millisecond
	gPoll  = 200 * time.Millisecond
)

// userTx is the user's transaction with the elector's guard.
type userTx interface {
	guard(ctx context.Context, el *casleader.Elector, token int64) error
	guardTerm(ctx context.Context, term *casleader.Term) error
	exec(ctx context.Context, q string) error
	commit() error
	rollback()
}

type sqlUserTx struct{ tx *sql.Tx }

func (x sqlUserTx) guard(ctx context.Context, el *casleader.Elector, token int64) error {
	return el.Guard(ctx, x.tx, token)
}
func (x sqlUserTx) guardTerm(ctx context.Context, term *casleader.Term) error {
	return term.Guard(ctx, x.tx)
}
func (x sqlUserTx) exec(ctx context.Context, q string) error {
	_, err := x.tx.ExecContext(ctx, q)
	return err
}
func (x sqlUserTx) commit() error { return x.tx.Commit() }
func (x sqlUserTx) rollback()     { _ = x.tx.Rollback() }

type pgxUserTx struct{ tx pgx.Tx }

func (x pgxUserTx) guard(ctx context.Context, el *casleader.Elector, token int64) error {
	return postgres.Guard(ctx, el.Fence(token), x.tx)
}
func (x pgxUserTx) guardTerm(ctx context.Context, term *casleader.Term) error {
	return postgres.Guard(ctx, term, x.tx)
}
func (x pgxUserTx) exec(ctx context.Context, q string) error {
	_, err := x.tx.Exec(ctx, q)
	return err
}
func (x pgxUserTx) commit() error { return x.tx.Commit(context.Background()) }
func (x pgxUserTx) rollback()     { _ = x.tx.Rollback(context.Background()) }

// guardDB is one database with a store for electors and the user's transactions.
type guardDB struct {
	dialect schema.Dialect
	st      store.Driver
	begin   func(ctx context.Context) (userTx, error)
	exec    func(ctx context.Context, q string) error
}

func guardDBs() []struct {
	name string
	open func(t *testing.T, table string) guardDB
} {
	sqlDB := func(d schema.Dialect, db *sql.DB, st store.Driver) guardDB {
		return guardDB{
			dialect: d, st: st,
			begin: func(ctx context.Context) (userTx, error) {
				tx, err := db.BeginTx(ctx, nil)
				return sqlUserTx{tx}, err
			},
			exec: func(ctx context.Context, q string) error {
				_, err := db.ExecContext(ctx, q)
				return err
			},
		}
	}
	return []struct {
		name string
		open func(t *testing.T, table string) guardDB
	}{
		{"MariaDB", func(t *testing.T, table string) guardDB {
			db := mydb.MySQL(t)
			st, err := mysql.New(db, table)
			require.NoError(t, err)
			return sqlDB(schema.MySQL, db, st)
		}},
		{"PostgreSQLDatabaseSQL", func(t *testing.T, table string) guardDB {
			db, err := sql.Open("pgx", testdb.PostgresDSN(t))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			st, err := postgres.NewDB(db, table)
			require.NoError(t, err)
			return sqlDB(schema.Postgres, db, st)
		}},
		{"PostgreSQLPgx", func(t *testing.T, table string) guardDB {
			pool := pgdb.Postgres(t)
			st, err := postgres.New(pool, table)
			require.NoError(t, err)
			return guardDB{
				dialect: schema.Postgres, st: st,
				begin: func(ctx context.Context) (userTx, error) {
					tx, err := pool.Begin(ctx)
					return pgxUserTx{tx}, err
				},
				exec: func(ctx context.Context, q string) error {
					_, err := pool.Exec(ctx, q)
					return err
				},
			}
		}},
		{"SQLite", func(t *testing.T, table string) guardDB {
			db := litedb.SQLite(t)
			st, err := sqlite.New(db, table)
			require.NoError(t, err)
			return sqlDB(schema.SQLite, db, st)
		}},
	}
}

// guardedElector is a running elector whose OnStartedLeading reports its tokens.
type guardedElector struct {
	*casleader.Elector
	tokens chan int64
	stop   func()
}

func startGuarded(t *testing.T, st store.Driver, id string, keepLease bool) *guardedElector {
	t.Helper()
	g := &guardedElector{tokens: make(chan int64, 16)}
	el, err := casleader.New(st, casleader.Config{
		Key: "k", ID: id,
		LeaseDuration: gLease, RenewDeadline: gRenew, HeartbeatInterval: gBeat, PollInterval: gPoll,
		KeepLeaseOnExit: keepLease,
		OnStartedLeading: func(ctx context.Context, token int64) {
			g.tokens <- token
			<-ctx.Done()
		},
	})
	require.NoError(t, err)
	g.Elector = el
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(t, el.Run(ctx))
	}()
	g.stop = func() { cancel(); <-done }
	t.Cleanup(g.stop)
	return g
}

func (g *guardedElector) token(t *testing.T) int64 {
	t.Helper()
	select {
	case tok := <-g.tokens:
		return tok
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not become leader", g.ID())
		return 0
	}
}

// guardedWrite runs guard, insert and commit in one transaction of the user.
func guardedWrite(ctx context.Context, db guardDB, el *casleader.Elector, token int64, actions string) error {
	tx, err := db.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.rollback()
	if err := tx.guard(ctx, el, token); err != nil {
		return err
	}
	if err := tx.exec(ctx, fmt.Sprintf("INSERT INTO %s (token) VALUES (%d)", actions, token)); err != nil {
		return err
	}
	return tx.commit()
}

func openGuardDB(t *testing.T, open func(t *testing.T, table string) guardDB) (guardDB, string, string) {
	t.Helper()
	table := testdb.Name(t)
	db := open(t, table)
	require.NoError(t, db.st.CreateTable(t.Context()))
	quoted, err := ident.Quote(db.dialect, table)
	require.NoError(t, err)
	actions, err := ident.Quote(db.dialect, table+"_actions")
	require.NoError(t, err)
	require.NoError(t, db.exec(t.Context(), "CREATE TABLE "+actions+" (token BIGINT NOT NULL)"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, q := range []string{quoted, actions} {
			assert.NoError(t, db.exec(ctx, "DROP TABLE IF EXISTS "+q))
		}
	})
	return db, quoted, actions
}

func TestElectorGuard(t *testing.T) {
	for _, d := range guardDBs() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()

			t.Run("PassesForTheLeaderAndFencesItAfterHandingOver", func(t *testing.T) {
				t.Parallel()
				db, _, actions := openGuardDB(t, d.open)
				ctx := t.Context()
				a := startGuarded(t, db.st, "a", false)
				ta := a.token(t)
				require.NoError(t, guardedWrite(ctx, db, a.Elector, ta, actions))

				b := startGuarded(t, db.st, "b", false)
				require.NoError(t, a.Resign(ctx))
				tb := b.token(t)
				assert.Greater(t, tb, ta)
				err := guardedWrite(ctx, db, a.Elector, ta, actions)
				require.ErrorIs(t, err, casleader.ErrNotLeader, "the former leader's token")
				require.NoError(t, guardedWrite(ctx, db, b.Elector, tb, actions))
				require.ErrorIs(t, guardedWrite(ctx, db, b.Elector, ta, actions), casleader.ErrNotLeader, "a stale token of the new leader")
			})

			t.Run("RowTakenOverBehindTheLeadersBackIsFencedByTheDatabase", func(t *testing.T) {
				t.Parallel()
				db, quoted, actions := openGuardDB(t, d.open)
				ctx := t.Context()
				a := startGuarded(t, db.st, "a", false)
				ta := a.token(t)
				// Another leader's term as the database sees it, while a still trusts
				// its lease (as after a pause that its renew deadline did not catch).
				require.NoError(t, db.exec(ctx, fmt.Sprintf("UPDATE %s SET leader_id = 'x', term = term + 10, version = version + 10", quoted)))
				err := guardedWrite(ctx, db, a.Elector, ta, actions)
				if !a.IsLeader() {
					t.Skip("a stepped down before the guard ran; the database path was not exercised")
				}
				require.ErrorIs(t, err, casleader.ErrNotLeader)
				require.ErrorIs(t, err, store.ErrFenced, "the database refused the token")
				assert.Contains(t, err.Error(), "newer term")
			})

			t.Run("TakeoverWaitsForTheLeadersGuardedTransaction", func(t *testing.T) {
				t.Parallel()
				db, _, actions := openGuardDB(t, d.open)
				ctx := t.Context()
				a := startGuarded(t, db.st, "a", true)
				ta := a.token(t)
				tx, err := db.begin(ctx)
				require.NoError(t, err)
				defer tx.rollback()
				require.NoError(t, tx.guard(ctx, a.Elector, ta))
				// a stops renewing (its process froze or lost the network) with the
				// guarded transaction open; b cannot win until it ends.
				a.stop()
				b := startGuarded(t, db.st, "b", false)
				time.Sleep(2 * gLease)
				assert.False(t, b.IsLeader(), "b won while a's guarded transaction was open")
				require.NoError(t, tx.exec(ctx, fmt.Sprintf("INSERT INTO %s (token) VALUES (%d)", actions, ta)))
				require.NoError(t, tx.commit())
				tb := b.token(t)
				assert.Greater(t, tb, ta)
			})
		})
	}
}

func TestGuardRefusesATokenThatIsNotTheCurrentTermWithoutIO(t *testing.T) {
	t.Parallel()
	db := litedb.SQLite(t)
	st, err := sqlite.New(db, "")
	require.NoError(t, err)
	el, err := casleader.New(st, casleader.Config{Key: "k"})
	require.NoError(t, err)
	// Not running, so not leading: no transaction is needed to know.
	for _, tok := range []int64{0, 1, 7} {
		err := el.Guard(t.Context(), nil, tok)
		require.ErrorIs(t, err, casleader.ErrNotLeader, "token %d", tok)
		assert.NotErrorIs(t, err, store.ErrFenced)
	}
}
