package group_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// wakeStore is a dialect store: a store.Driver that tells whether its listener
// listens.
type wakeStore interface {
	store.Driver
	Listening() bool
}

// countingStore counts the reads and the elections a group sends through it. It
// is a decorator that embeds the store: the wake-ups it does not override are the
// store's, so the group on it is woken as on the store itself.
type countingStore struct {
	wakeStore
	reads, elections atomic.Int64
}

func (c *countingStore) ObserveMany(ctx context.Context, keys []string) (map[string]store.Record, error) {
	c.reads.Add(1)
	return c.wakeStore.ObserveMany(ctx, keys)
}

func (c *countingStore) ElectMany(ctx context.Context, cand store.Candidate, from []store.KeyVersion) ([]store.Won, error) {
	c.elections.Add(1)
	return c.wakeStore.ElectMany(ctx, cand, from)
}

func (c *countingStore) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	c.reads.Add(1)
	return c.wakeStore.Observe(ctx, key)
}

func (c *countingStore) Elect(ctx context.Context, key string, cand store.Candidate, version int64) (int64, bool, error) {
	c.elections.Add(1)
	return c.wakeStore.Elect(ctx, key, cand, version)
}

func (c *countingStore) ElectReleased(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	c.elections.Add(1)
	return c.wakeStore.ElectReleased(ctx, key, cand)
}

// PutMembers writes no members rows: a, which knows no successor then, releases
// its keys when its Run ends, and b, which a handover cannot name, elects them.
func (c *countingStore) PutMembers(context.Context, []store.Member) error {
	return fmt.Errorf("%w: this test keeps no members rows", store.ErrDeployment)
}

func (c *countingStore) calls() int64 { return c.reads.Load() + c.elections.Load() }

// TestStoreWakeupsElectWokenKeysWithoutARead: a follower group woken by the release
// of its keys elects them without reading them first, on every dialect: from the
// released version the notification carries (PostgreSQL, the SQLite wake-up file),
// or, woken without one (a MariaDB named lock), by the store's election of a
// released row. Its next read is a minute away, so only a wake-up can explain a
// takeover. b writes no members rows: a, which knows no successor, releases.
func TestStoreWakeupsElectWokenKeysWithoutARead(t *testing.T) {
	for _, d := range []struct {
		name string
		open func(t *testing.T, table string) (a, b wakeStore)
	}{
		{"PostgreSQL", func(t *testing.T, table string) (wakeStore, wakeStore) {
			open := func() wakeStore {
				s, err := postgres.New(pgdb.Postgres(t), table)
				require.NoError(t, err)
				return s
			}
			return open(), open()
		}},
		{"MariaDB", func(t *testing.T, table string) (wakeStore, wakeStore) {
			open := func() wakeStore {
				s, err := mysql.New(mydb.MySQL(t), table)
				require.NoError(t, err)
				return s
			}
			return open(), open()
		}},
		{"SQLiteSecondDatabaseHandle", func(t *testing.T, table string) (wakeStore, wakeStore) {
			path := filepath.Join(t.TempDir(), "wake.db")
			open := func() wakeStore {
				db, err := sqlite.Open(path)
				require.NoError(t, err)
				t.Cleanup(func() { db.Close() })
				s, err := sqlite.New(db, table)
				require.NoError(t, err)
				return s
			}
			return open(), open()
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			table := testdb.Name(t)
			sa, sb := d.open(t, table)
			require.NoError(t, sa.(interface{ CreateTable(context.Context) error }).CreateTable(t.Context()))
			ks := keys(3)
			slow := func(c *casleader.GroupConfig) {
				c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval = time.Minute, 40*time.Second, 200*time.Millisecond, time.Minute
			}
			a := newGroup(t, sa, "a", ks, slow)
			stopA := running(t, a)
			require.Eventually(t, func() bool { return count(a, ks) == len(ks) }, 10*time.Second, time.Millisecond)

			cb := &countingStore{wakeStore: sb}
			b := newGroup(t, cb, "b", ks, slow) // the decorator keeps the store's wake-ups
			stopB := running(t, b)
			defer stopB()
			require.Eventually(t, func() bool {
				for _, k := range ks {
					if b.Leader(k) != "a" {
						return false
					}
				}
				return sb.Listening()
			}, 10*time.Second, time.Millisecond, "b follows every key and listens")
			// The wake-up every listener sends when it starts makes b read (or try
			// an election that loses): count from after that.
			quietCalls(t, cb.calls)
			reads0, elections0 := cb.reads.Load(), cb.elections.Load()
			stopA()
			require.Eventually(t, func() bool { return count(b, ks) == len(ks) }, 10*time.Second, time.Millisecond,
				"b takes every key over long before its next read, a minute away")
			assert.Zero(t, cb.reads.Load()-reads0, "b elected its woken keys without reading them")
			elections := cb.elections.Load() - elections0
			assert.GreaterOrEqual(t, elections, int64(1))
			assert.LessOrEqual(t, elections, int64(len(ks)), "at most one election per woken key")
		})
	}
}

// quietCalls waits until n stops moving for a quarter of a second.
func quietCalls(t *testing.T, n func() int64) {
	t.Helper()
	last := n()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		now := n()
		if now == last {
			return
		}
		last = now
	}
	t.Fatal("the count kept moving")
}
