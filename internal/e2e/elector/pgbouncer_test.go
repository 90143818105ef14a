package casleader_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store/postgres"
)

// TestElectionsThroughPgBouncer runs elections, takeovers, resignations and guarded
// writes through PgBouncer in transaction pooling mode, with both PostgreSQL stores.
func TestElectionsThroughPgBouncer(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T, table string) guardDB
	}{
		{"PgxPool", func(t *testing.T, table string) guardDB {
			pool := pgdb.PostgresAt(t, testdb.PgBouncerDSN(t))
			st, err := postgres.New(pool, table)
			require.NoError(t, err)
			return guardDB{
				dialect: schema.Postgres, st: st,
				begin: func(ctx context.Context) (userTx, error) {
					tx, err := pool.Begin(ctx)
					return pgxUserTx{tx}, err
				},
				exec: func(ctx context.Context, q string) error {
					_, err := pool.Exec(ctx, q, pgx.QueryExecModeExec)
					return err
				},
			}
		}},
		{"DatabaseSQL", func(t *testing.T, table string) guardDB {
			// pgx's database/sql driver caches named prepared statements unless told
			// otherwise: PgBouncer before 1.21 cannot follow them in transaction mode.
			dsn := testdb.PgBouncerDSN(t)
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			db, err := sql.Open("pgx", dsn+sep+"default_query_exec_mode=exec")
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			st, err := postgres.NewDB(db, table)
			require.NoError(t, err)
			return guardDB{
				dialect: schema.Postgres, st: st,
				begin: func(ctx context.Context) (userTx, error) {
					tx, err := db.BeginTx(ctx, nil)
					return sqlUserTx{tx}, err
				},
				exec: func(ctx context.Context, q string) error {
					_, err := db.ExecContext(ctx, q)
					return err
				},
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, _, actions := openGuardDB(t, tc.open)
			ctx := t.Context()
			var cs []*guardedElector
			for i := range 5 {
				cs = append(cs, startGuarded(t, db.st, fmt.Sprintf("c%d", i), i == 0))
			}
			leader := func() *guardedElector {
				var l *guardedElector
				require.Eventually(t, func() bool {
					n := 0
					for _, c := range cs {
						if c.IsLeader() {
							n, l = n+1, c
						}
					}
					require.LessOrEqual(t, n, 1, "two candidates lead at once")
					return n == 1
				}, 30*time.Second, 5*time.Millisecond, "no leader")
				return l
			}
			first := leader()
			tok := first.token(t)
			require.NoError(t, guardedWrite(ctx, db, first.Elector, tok, actions))

			// The leader resigns: another takes over at once (or vanishes, keeping the
			// lease, if it was c0: then another takes over when the lease expires).
			if first == cs[0] {
				first.stop()
			} else {
				require.NoError(t, first.Resign(ctx))
			}
			var second *guardedElector
			require.Eventually(t, func() bool {
				for _, c := range cs {
					if c != first && c.IsLeader() {
						second = c
						return true
					}
				}
				return false
			}, 30*time.Second, 5*time.Millisecond, "no takeover")
			tok2 := second.token(t)
			assert.Greater(t, tok2, tok)
			require.NoError(t, guardedWrite(ctx, db, second.Elector, tok2, actions))
			err := guardedWrite(ctx, db, first.Elector, tok, actions)
			require.ErrorIs(t, err, casleader.ErrNotLeader)
		})
	}
}
