package casleader_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/protocoltest"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/store"
	mysqlstore "github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

const (
	lease, renewDL, heartbeat, poll, settle = protocoltest.Lease, protocoltest.RenewDL, protocoltest.Heartbeat, protocoltest.Poll, protocoltest.Settle
)

// TestProtocol runs the protocol suite on each database.
func TestProtocol(t *testing.T) { protocoltest.Run(t, dialects()) }

func dialects() []protocoltest.Dialect {
	return []protocoltest.Dialect{
		{Name: "MariaDB", Open: func(t *testing.T, table string, tz int) protocoltest.Store {
			cfg, err := mysql.ParseDSN(testdb.MySQLDSN(t))
			require.NoError(t, err)
			if cfg.Params == nil {
				cfg.Params = map[string]string{}
			}
			cfg.Params["time_zone"] = fmt.Sprintf("'%+03d:00'", tz)
			db, err := mysqlstore.Open(cfg.FormatDSN())
			require.NoError(t, err)
			db.SetMaxOpenConns(64)
			t.Cleanup(func() { db.Close() })
			s, err := mysqlstore.New(db, table)
			require.NoError(t, err)
			return s
		}},
		{Name: "PostgreSQL", Open: func(t *testing.T, table string, tz int) protocoltest.Store {
			cfg, err := pgxpool.ParseConfig(testdb.PostgresDSN(t))
			require.NoError(t, err)
			cfg.MaxConns = 64
			cfg.ConnConfig.RuntimeParams["timezone"] = fmt.Sprintf("Etc/GMT%+d", -tz)
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			s, err := postgres.New(pool, table)
			require.NoError(t, err)
			return s
		}},
		{Name: "SQLite", Open: func(t *testing.T, table string, _ int) protocoltest.Store {
			// One file per test; every candidate of the test shares it.
			db := sqliteFor(t)
			s, err := sqlite.New(db, table)
			require.NoError(t, err)
			return s
		}},
	}
}

var sqliteDBs sync.Map // test name -> *sql.DB

func sqliteFor(t *testing.T) *sql.DB {
	if db, ok := sqliteDBs.Load(t.Name()); ok {
		return db.(*sql.DB)
	}
	db := litedb.SQLite(t)
	sqliteDBs.Store(t.Name(), db)
	t.Cleanup(func() { sqliteDBs.Delete(t.Name()) })
	return db
}

func TestMissingTableStopsRunWithAClearError(t *testing.T) {
	for _, d := range dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			table := testdb.Name(t)
			s := d.Open(t, table, 0)
			el, err := casleader.New(s, casleader.Config{Key: "k", LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), settle)
			defer cancel()
			err = el.Run(ctx)
			require.ErrorIs(t, err, store.ErrDeployment)
			assert.Contains(t, err.Error(), table)
			assert.Contains(t, err.Error(), "casleader migrate")
			assert.False(t, el.IsLeader())
		})
	}
}

func TestDatabaseDownAtStartIsRetried(t *testing.T) {
	t.Parallel()
	db, err := mysqlstore.Open("root@tcp(127.0.0.1:1)/test?timeout=100ms")
	require.NoError(t, err)
	defer db.Close()
	s, err := mysqlstore.New(db, "")
	require.NoError(t, err)
	var attempts atomic.Int32
	el, err := casleader.New(countingStore{s, &attempts}, casleader.Config{Key: "k", LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	require.Eventually(t, func() bool { return attempts.Load() >= 3 }, settle, 10*time.Millisecond, "Run retries")
	assert.False(t, el.IsLeader())
	select {
	case err := <-done:
		t.Fatalf("Run returned early: %v", err)
	default:
	}
	cancel()
	assert.NoError(t, <-done)
	assert.False(t, el.IsLeader())
}

type countingStore struct {
	store.Driver
	n *atomic.Int32
}

func (c countingStore) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	c.n.Add(1)
	r, f, err := c.Driver.Observe(ctx, key)
	if err != nil && !errors.Is(err, store.ErrTransient) {
		return r, f, fmt.Errorf("unexpected error class: %w", err)
	}
	return r, f, err
}
