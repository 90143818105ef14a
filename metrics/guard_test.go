package metrics_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/healthz"
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/metrics"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// tableStore is an election store that can create its table.
type tableStore interface {
	store.Driver
	CreateTable(context.Context) error
}

// The regression of the issue: with metrics and healthz plugged in, the elector
// keeps the dialect's store, so el.Guard fences the leader's transaction (the old
// store decorator had no Guard method); and both observers are fed.
func TestGuardWorksWithMetricsAndHealthzPluggedIn(t *testing.T) {
	for _, d := range []struct {
		name    string
		dialect schema.Dialect
		open    func(t *testing.T, table string) (*sql.DB, tableStore)
	}{
		{"MariaDB", schema.MySQL, func(t *testing.T, table string) (*sql.DB, tableStore) {
			db := mydb.MySQL(t)
			st, err := mysql.New(db, table)
			require.NoError(t, err)
			return db, st
		}},
		{"PostgreSQL", schema.Postgres, func(t *testing.T, table string) (*sql.DB, tableStore) {
			db, err := sql.Open("pgx", testdb.PostgresDSN(t))
			require.NoError(t, err)
			db.SetMaxOpenConns(8)
			t.Cleanup(func() { db.Close() })
			st, err := postgres.NewDB(db, table)
			require.NoError(t, err)
			return db, st
		}},
		{"SQLite", schema.SQLite, func(t *testing.T, table string) (*sql.DB, tableStore) {
			db := litedb.SQLite(t)
			st, err := sqlite.New(db, table)
			require.NoError(t, err)
			return db, st
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			table := testdb.Name(t)
			db, st := d.open(t, table)
			require.NoError(t, st.CreateTable(ctx))
			quoted, err := ident.Quote(d.dialect, table)
			require.NoError(t, err)
			actions, err := ident.Quote(d.dialect, table+"_actions")
			require.NoError(t, err)
			members, err := ident.Quote(d.dialect, table+"_members") // CreateTable creates it too
			require.NoError(t, err)
			_, err = db.ExecContext(ctx, "CREATE TABLE "+actions+" (token BIGINT NOT NULL)")
			require.NoError(t, err)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for _, q := range []string{quoted, actions, members} {
					_, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+q)
					assert.NoError(t, err)
				}
			})

			reg := prometheus.NewPedanticRegistry()
			m, err := metrics.New(reg)
			require.NoError(t, err)
			hc := healthz.New(0)
			tokens := make(chan int64, 1)
			c := casleader.Config{
				Key: "k", ID: "a",
				// Generous timings: a loaded machine does not lose the lease.
				LeaseDuration: 2 * time.Second, RenewDeadline: 1200 * time.Millisecond,
				HeartbeatInterval: 100 * time.Millisecond, PollInterval: 200 * time.Millisecond,
				Hooks: []casleader.Hooks{m.Hooks(), hc.Hooks()},
				OnStartedLeading: func(ctx context.Context, token int64) {
					tokens <- token
					<-ctx.Done()
				},
			}
			el, err := casleader.New(st, c)
			require.NoError(t, err)
			rctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- el.Run(rctx) }()
			defer func() { cancel(); require.NoError(t, <-done) }()
			var token int64
			select {
			case token = <-tokens:
			case <-time.After(30 * time.Second):
				t.Fatal("a did not become leader within 30s")
			}

			write := func(token int64) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				if err := el.Guard(ctx, tx, token); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (token) VALUES (%d)", actions, token)); err != nil {
					return err
				}
				return tx.Commit()
			}
			require.NoError(t, write(token), "the guard passes for the leader")
			require.ErrorIs(t, write(token-1), casleader.ErrNotLeader, "a stale token is fenced")
			var n int
			require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+actions).Scan(&n))
			assert.Equal(t, 1, n, "only the leader's write committed")

			for deadline := time.Now().Add(30 * time.Second); renewals(t, reg) == 0; {
				require.True(t, time.Now().Before(deadline), "no renewal timed within 30s")
				time.Sleep(c.HeartbeatInterval)
			}
			assert.Equal(t, 1.0, value(t, reg, "casleader_leadership_transitions_total", "key", "k", "transition", "started"))
			if el.IsLeader() && el.Token() == token {
				assert.Equal(t, 1.0, value(t, reg, "casleader_is_leader", "key", "k"))
				assert.Equal(t, float64(token), value(t, reg, "casleader_token", "key", "k"))
			}
			rec := httptest.NewRecorder()
			hc.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz?verbose", nil))
			assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			if el.IsLeader() && el.Token() == token { // still the same term after the probe
				assert.Contains(t, rec.Body.String(), fmt.Sprintf(`candidate "a": leading (term %d)`, token))
			}
		})
	}
}
