package healthz_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/healthz"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// tableFor returns a new table name for t, whose tables exec drops when t ends.
func tableFor(t *testing.T, exec func(context.Context, string, ...any) (sql.Result, error)) string {
	table := testdb.Name(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, name := range []string{table, table + "_members"} {
			_, err := exec(ctx, "DROP TABLE IF EXISTS "+name)
			assert.NoError(t, err)
		}
	})
	return table
}

// A group leading a few keys is healthy while it renews them; once its renewals
// hang (a driver that ignores its context), every key it leads outlives its
// deadline in the lead phase, and the check names each of them.
func TestGroupIsUnhealthyWhenItsRenewalsStop(t *testing.T) {
	for _, d := range []struct {
		name string
		open func(t *testing.T) store.Driver
	}{
		{"MariaDB", func(t *testing.T) store.Driver {
			db := mydb.MySQL(t)
			st, err := mysql.New(db, tableFor(t, db.ExecContext))
			require.NoError(t, err)
			require.NoError(t, st.CreateTable(t.Context()))
			return st
		}},
		{"PostgreSQL", func(t *testing.T) store.Driver {
			db, err := sql.Open("pgx", testdb.PostgresDSN(t))
			require.NoError(t, err)
			db.SetMaxOpenConns(8)
			t.Cleanup(func() { db.Close() })
			st, err := postgres.NewDB(db, tableFor(t, db.ExecContext))
			require.NoError(t, err)
			require.NoError(t, st.CreateTable(t.Context()))
			return st
		}},
		{"SQLite", func(t *testing.T) store.Driver {
			db := litedb.SQLite(t)
			st, err := sqlite.New(db, tableFor(t, db.ExecContext))
			require.NoError(t, err)
			require.NoError(t, st.CreateTable(t.Context()))
			return st
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			st := &stuckBatches{Driver: d.open(t), release: make(chan struct{})}
			hc := healthz.New(0) // the default: lease - renew deadline
			ks := []string{"alpha", "beta", "gamma"}
			g, err := casleader.NewGroup(st, casleader.GroupConfig{
				ID: "a", Keys: ks, BatchSize: 2,
				// Generous timings: a loaded machine does not lose the leases.
				LeaseDuration: 2 * time.Second, RenewDeadline: 1200 * time.Millisecond,
				HeartbeatInterval: 100 * time.Millisecond, PollInterval: 200 * time.Millisecond,
				Hooks: []casleader.Hooks{hc.Hooks()},
			})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- g.Run(ctx) }()
			var once sync.Once
			var runErr error
			stop := func() error {
				once.Do(func() {
					close(st.release)
					cancel()
					runErr = <-done
				})
				return runErr
			}
			defer func() { _ = stop() }()

			leading := func() bool {
				for _, k := range ks {
					if !g.IsLeader(k) {
						return false
					}
				}
				return true
			}
			require.Eventually(t, leading, 30*time.Second, 10*time.Millisecond, "every key led")
			// Longer than the renew deadline plus the tolerance: the renewals keep
			// every key healthy.
			for start := time.Now(); time.Since(start) < 2500*time.Millisecond; time.Sleep(50 * time.Millisecond) {
				require.NoError(t, hc.Check(), "a group that renews is healthy")
			}
			code, body := probe(t, hc, "/healthz?verbose")
			assert.Equal(t, http.StatusOK, code)
			if leading() {
				for _, k := range ks {
					assert.Contains(t, body, fmt.Sprintf(`[+] election %q, candidate "a": leading (term`, k))
				}
			}

			st.stick()
			var err2 error
			require.Eventually(t, func() bool {
				err2 = hc.Check()
				if err2 == nil {
					return false
				}
				for _, k := range ks {
					if !containsElection(err2, k) {
						return false
					}
				}
				return true
			}, 30*time.Second, 20*time.Millisecond, "every led key reported once its renewals hang")
			require.ErrorIs(t, err2, healthz.ErrUnhealthy)
			code, body = probe(t, hc, "/healthz")
			assert.Equal(t, http.StatusInternalServerError, code)
			assert.Contains(t, body, "unhealthy\n")

			require.NoError(t, stop()) // the driver returns, Run ends its terms
			assert.NoError(t, hc.Check(), "healthy once the lead phases ended")
		})
	}
}

func containsElection(err error, key string) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf(`election %q, candidate "a": leading`, key))
}

// stuckBatches is a group store whose batched renewals, once stuck, block until
// release is closed, whatever their context says: a driver that ignores
// cancellation.
type stuckBatches struct {
	store.Driver
	release chan struct{}
	mu      sync.Mutex
	stuck   bool
}

func (s *stuckBatches) stick() {
	s.mu.Lock()
	s.stuck = true
	s.mu.Unlock()
}

func (s *stuckBatches) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	s.mu.Lock()
	stuck := s.stuck
	s.mu.Unlock()
	if stuck {
		<-s.release
		return nil, context.DeadlineExceeded
	}
	return s.Driver.RenewMany(ctx, id, held)
}
