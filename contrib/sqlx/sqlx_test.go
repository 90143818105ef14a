package casleadersqlx_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// guardStore is what the test needs of a dialect store: the election table and the
// database-side guard for a database/sql transaction.
type guardStore interface {
	store.Driver
	CreateTable(ctx context.Context) error
}

type dialect struct {
	name, env, driver string
	newStore          func(db *sql.DB, table string) (guardStore, error)
	createSent        string // %s: the table's name
}

var dialects = []dialect{
	{
		name: "MariaDB", env: "CASLEADER_MYSQL_DSN", driver: "mysql",
		newStore: func(db *sql.DB, table string) (guardStore, error) {
			return mysql.New(db, table)
		},
		createSent: "CREATE TABLE %s (invoice BIGINT PRIMARY KEY, token BIGINT NOT NULL)",
	},
	{
		name: "PostgreSQL", env: "CASLEADER_POSTGRES_DSN", driver: "pgx",
		newStore: func(db *sql.DB, table string) (guardStore, error) {
			return postgres.NewDB(db, table)
		},
		createSent: "CREATE TABLE %s (invoice BIGINT PRIMARY KEY, token BIGINT NOT NULL)",
	},
}

// connect opens a *sqlx.DB on the dialect's server, or skips (fails where
// CASLEADER_REQUIRE_DB=1, as in CI).
func connect(t *testing.T, d dialect) *sqlx.DB {
	t.Helper()
	dsn := os.Getenv(d.env)
	if dsn == "" {
		msg := fmt.Sprintf("%s is not set: no %s server to test sqlx on", d.env, d.name)
		if os.Getenv("CASLEADER_REQUIRE_DB") == "1" {
			t.Fatal(msg + " (CASLEADER_REQUIRE_DB=1 forbids skipping)")
		}
		t.Skip(msg)
	}
	db, err := sqlx.Connect(d.driver, dsn)
	require.NoError(t, err, "connect to %s", d.name)
	t.Cleanup(func() { db.Close() })
	return db
}

func uniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// sent is one row of the fenced table.
type sent struct {
	Invoice int64 `db:"invoice"`
	Token   int64 `db:"token"`
}

// TestElectorOnSqlx runs an elector on a *sqlx.DB and has its leader write through
// a *sqlx.Tx fenced by the guard; then a second candidate takes over and the
// database refuses the first leader's token in a new *sqlx.Tx.
func TestElectorOnSqlx(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := connect(t, d)
			table := uniqueName("sqlx_election_")
			sentTable := uniqueName("sqlx_sent_")
			st, err := d.newStore(db.DB, table)
			require.NoError(t, err)
			require.NoError(t, st.CreateTable(ctx))
			db.MustExecContext(ctx, fmt.Sprintf(d.createSent, sentTable))
			t.Cleanup(func() {
				db.MustExec("DROP TABLE " + table)
				db.MustExec("DROP TABLE " + sentTable)
			})

			const lease = 2 * time.Second
			timing := casleader.Config{
				Key: "invoices", LeaseDuration: lease, RenewDeadline: 1200 * time.Millisecond,
				HeartbeatInterval: 200 * time.Millisecond, PollInterval: 200 * time.Millisecond,
			}

			// The first candidate's leader sends invoice 1 exactly once, fenced.
			wrote := make(chan int64, 1)
			cfgA := timing
			cfgA.ID = "a"
			cfgA.OnStartedLeading = func(ctx context.Context, token int64) {
				term := casleader.TermFrom(ctx)
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					t.Errorf("begin: %v", err)
					return
				}
				defer func() { _ = tx.Rollback() }()
				if err := term.Guard(ctx, tx.Tx); err != nil {
					t.Errorf("guard of a leading term: %v", err)
					return
				}
				_, err = tx.NamedExecContext(ctx,
					db.Rebind("INSERT INTO "+sentTable+" (invoice, token) VALUES (:invoice, :token)"),
					sent{Invoice: 1, Token: term.Token()})
				if err != nil {
					t.Errorf("fenced insert: %v", err)
					return
				}
				if err := tx.Commit(); err != nil {
					t.Errorf("commit: %v", err)
					return
				}
				wrote <- term.Token()
				<-ctx.Done()
			}
			a, err := casleader.New(st, cfgA)
			require.NoError(t, err)
			runCtx, stopA := context.WithCancel(ctx)
			doneA := make(chan error, 1)
			go func() { doneA <- a.Run(runCtx) }()

			var tokenA int64
			select {
			case tokenA = <-wrote:
			case err := <-doneA:
				t.Fatalf("a's Run returned before it led: %v", err)
			case <-time.After(30 * time.Second):
				stopA()
				<-doneA
				t.Fatal("a wrote nothing within 30 s")
			}
			var rows []sent
			require.NoError(t, db.SelectContext(ctx, &rows, "SELECT invoice, token FROM "+sentTable))
			assert.Equal(t, []sent{{Invoice: 1, Token: tokenA}}, rows, "the fenced write committed once, with a's token")

			// a stops (and releases); b takes over.
			stopA()
			require.NoError(t, <-doneA)
			cfgB := timing
			cfgB.ID = "b"
			b, err := casleader.New(st, cfgB)
			require.NoError(t, err)
			runCtxB, stopB := context.WithCancel(ctx)
			doneB := make(chan error, 1)
			go func() { doneB <- b.Run(runCtxB) }()
			defer func() {
				stopB()
				require.NoError(t, <-doneB)
			}()
			require.Eventually(t, b.IsLeader, 30*time.Second, 20*time.Millisecond, "b never led")
			assert.Greater(t, b.Token(), tokenA, "a later term has a higher token")

			// a's old token, checked by the database inside a new sqlx transaction.
			tx, err := db.BeginTxx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			err = st.Guard(ctx, tx.Tx, "invoices", "a", tokenA, lease)
			require.ErrorIs(t, err, store.ErrFenced, "the database refuses a's token once b won")

			// b's own term passes the same guard through sqlx (retried: on a loaded
			// machine b may lose a lease and win the next one meanwhile).
			require.Eventually(t, func() bool {
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					return false
				}
				defer func() { _ = tx.Rollback() }()
				if err := b.Guard(ctx, tx.Tx, b.Token()); err != nil {
					if !errors.Is(err, casleader.ErrNotLeader) && !errors.Is(err, store.ErrTransient) {
						t.Errorf("guard of b's term: %v", err)
					}
					return false
				}
				return tx.Commit() == nil
			}, 30*time.Second, 50*time.Millisecond, "b's guard never passed")
		})
	}
}
