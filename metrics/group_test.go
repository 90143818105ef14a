package metrics_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/metrics"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// groupDatabases opens a group store on a new table of each database, dropped when
// the test ends.
var groupDatabases = []struct {
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
}

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

// A group over a few keys, with the metrics' hooks in its Config: every key has
// its own series, fed from the group's batched statements (one renewal statement
// for two keys counts for each), and its gauges follow the group's leadership.
func TestGroupExposesMetricsPerKey(t *testing.T) {
	for _, d := range groupDatabases {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			st := d.open(t)
			reg := prometheus.NewPedanticRegistry()
			m, err := metrics.New(reg)
			require.NoError(t, err)
			ks := []string{"alpha", "beta", "gamma"}
			var mu sync.Mutex
			batch := 0 // the largest renewal statement, in keys
			g, err := casleader.NewGroup(st, casleader.GroupConfig{
				ID: "a", Keys: ks, BatchSize: 2,
				// Generous timings: a loaded machine does not lose the leases.
				LeaseDuration: 2 * time.Second, RenewDeadline: 1200 * time.Millisecond,
				HeartbeatInterval: 100 * time.Millisecond, PollInterval: 200 * time.Millisecond,
				Hooks: []casleader.Hooks{m.Hooks(), {Call: func(c casleader.Call) {
					if c.Op == "renew" {
						mu.Lock()
						batch = max(batch, c.Keys)
						mu.Unlock()
					}
				}}},
			})
			require.NoError(t, err)
			stop := runGroup(t, g)

			histogram := func(key string) uint64 {
				s := find(t, reg, "casleader_renewal_duration_seconds", "key", key)
				if s == nil {
					return 0
				}
				return s.GetHistogram().GetSampleCount()
			}
			require.Eventually(t, func() bool {
				for _, k := range ks {
					if !g.IsLeader(k) || histogram(k) < 2 {
						return false
					}
				}
				return true
			}, 30*time.Second, 20*time.Millisecond, "every key led and renewed twice")
			for _, k := range ks {
				token := g.Token(k)
				leading := value(t, reg, "casleader_is_leader", "key", k)
				gauged := value(t, reg, "casleader_token", "key", k)
				if g.IsLeader(k) && g.Token(k) == token { // the same term around the scrape
					assert.Equal(t, 1.0, leading, k)
					assert.Equal(t, float64(token), gauged, k)
				}
				assert.GreaterOrEqual(t, value(t, reg, "casleader_leadership_transitions_total", "key", k, "transition", "started"), 1.0, k)
				assert.GreaterOrEqual(t, value(t, reg, "casleader_leader_changes_total", "key", k), 1.0, k)
			}
			assert.Nil(t, find(t, reg, "casleader_store_errors_total"), "no store error")
			mu.Lock()
			assert.Equal(t, 2, batch, "two keys renewed by one statement, each counted")
			mu.Unlock()

			require.NoError(t, stop())
			for _, k := range ks {
				assert.Zero(t, value(t, reg, "casleader_is_leader", "key", k), k)
				assert.Zero(t, value(t, reg, "casleader_token", "key", k), k)
				assert.Equal(t,
					value(t, reg, "casleader_leadership_transitions_total", "key", k, "transition", "started"),
					value(t, reg, "casleader_leadership_transitions_total", "key", k, "transition", "stopped"),
					"every term of %s ended with Run", k)
			}
			problems, err := testutil.GatherAndLint(reg)
			require.NoError(t, err)
			assert.Empty(t, problems)
		})
	}
}

// runGroup starts g's Run and returns a function that ends it and returns its
// error; the test's end calls it too.
func runGroup(t *testing.T, g *casleader.Group) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// A batched renewal that fails counts as a failed renewal of each key it carried,
// and one that loses a key's compare-and-set as a lost renewal of that key only.
func TestGroupRenewalFailuresAreCountedPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		reg := prometheus.NewPedanticRegistry()
		m, err := metrics.New(reg)
		require.NoError(t, err)
		ks := []string{"alpha", "beta", "gamma"}
		g, err := casleader.NewGroup(st, casleader.GroupConfig{ID: "a", Keys: ks, BatchSize: 2,
			LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll,
			Hooks: []casleader.Hooks{m.Hooks()}})
		require.NoError(t, err)
		stop := runGroup(t, g)
		time.Sleep(time.Millisecond)
		for _, k := range ks {
			require.True(t, g.IsLeader(k), k)
		}
		st.FailNext(memstore.OpRenewMany, fmt.Errorf("%w: connection reset", store.ErrTransient))
		time.Sleep(heartbeat)
		synctest.Wait()
		failed := 0.0
		for _, k := range ks {
			failed += value(t, reg, "casleader_renewal_failures_total", "key", k, "kind", metrics.KindTransient)
			storeErrors := 0.0
			if s := find(t, reg, "casleader_store_errors_total", "key", k, "op", "renew", "kind", metrics.KindTransient); s != nil {
				storeErrors = s.GetCounter().GetValue()
			}
			assert.Equal(t, value(t, reg, "casleader_renewal_failures_total", "key", k, "kind", metrics.KindTransient), storeErrors, k)
		}
		assert.Equal(t, 2.0, failed, "the failed statement carried two keys")

		// Another candidate writes beta's row: beta's renewal loses, the others win.
		rec, _, err := st.Observe(t.Context(), "beta")
		require.NoError(t, err)
		st.Put(store.Record{Key: "beta", Version: rec.Version + 5, LeaderID: "b", Term: rec.Version + 5})
		time.Sleep(heartbeat)
		synctest.Wait()
		assert.Equal(t, 1.0, value(t, reg, "casleader_renewal_failures_total", "key", "beta", "kind", metrics.KindLost))
		assert.Zero(t, value(t, reg, "casleader_renewal_failures_total", "key", "alpha", "kind", metrics.KindLost))
		assert.Zero(t, value(t, reg, "casleader_is_leader", "key", "beta"), "beta was taken over")
		assert.Equal(t, 1.0, value(t, reg, "casleader_is_leader", "key", "alpha"))
		require.NoError(t, stop())
	})
}

// A group that reads from a server whose clock runs 2 s behind the leaders'
// reports the skew per key, through the Skew hook.
func TestGroupClockSkewIsGaugedPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := []string{"alpha", "beta"}
		timings := func(c casleader.GroupConfig) casleader.GroupConfig {
			c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval = lease, renewDL, heartbeat, poll
			return c
		}
		leader, err := casleader.NewGroup(st, timings(casleader.GroupConfig{ID: "a", Keys: ks}))
		require.NoError(t, err)
		runGroup(t, leader)
		time.Sleep(time.Millisecond)
		reg := prometheus.NewPedanticRegistry()
		m, err := metrics.New(reg)
		require.NoError(t, err)
		behind, err := casleader.NewGroup(st.Node(-2*time.Second), timings(casleader.GroupConfig{ID: "b", Keys: ks, Hooks: []casleader.Hooks{m.Hooks()}}))
		require.NoError(t, err)
		runGroup(t, behind)
		time.Sleep(5 * poll)
		for _, k := range ks {
			require.True(t, leader.IsLeader(k), k)
			got := value(t, reg, "casleader_clock_skew_seconds", "key", k)
			assert.InDelta(t, -2.0, got, heartbeat.Seconds(), "%s: gauge %v", k, got)
			assert.Zero(t, value(t, reg, "casleader_is_leader", "key", k), "%s is followed", k)
		}
	})
}

// BenchmarkHooksPerKeyRenewal measures what the metrics' hooks cost a group per key
// and heartbeat: the renewal's Call and the Renewed that follows, over 10,000 keys.
func BenchmarkHooksPerKeyRenewal(b *testing.B) {
	m, err := metrics.New(nil)
	require.NoError(b, err)
	h := m.Hooks()
	ks := make([]string, 10000)
	for i := range ks {
		ks[i] = fmt.Sprintf("key-%05d", i)
		h.Started(casleader.Event{Key: ks[i], ID: "a", Token: 1})
	}
	now := time.Now()
	b.ResetTimer()
	for i := range b.N {
		k := ks[i%len(ks)]
		h.Call(casleader.Call{Key: k, ID: "a", Keys: 1000, Op: "renew", Sent: now, Duration: time.Millisecond, Swapped: true})
		h.Renewed(casleader.Event{Key: k, ID: "a", Token: 1, Until: now.Add(time.Second)})
	}
}
