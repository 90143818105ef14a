package group_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/members"
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

// membersStore is a SQL store as the group sees it, with its members table.
type membersStore = store.Driver

// counting records every PutMembers call: who wrote how many keys, and when.
type counting struct {
	membersStore
	mu    sync.Mutex
	calls map[string][]int // member ID -> number of keys of each call
}

func (c *counting) PutMembers(ctx context.Context, ms []store.Member) error {
	if len(ms) > 0 {
		c.mu.Lock()
		c.calls[ms[0].ID] = append(c.calls[ms[0].ID], len(ms))
		c.mu.Unlock()
	}
	return c.membersStore.PutMembers(ctx, ms)
}

func membersDatabases() []struct {
	name string
	open func(t *testing.T, table string) (membersStore, func(string) error)
} {
	return []struct {
		name string
		open func(t *testing.T, table string) (membersStore, func(string) error)
	}{
		{"MariaDB", func(t *testing.T, table string) (membersStore, func(string) error) {
			db := mydb.MySQL(t)
			s, err := mysql.New(db, table)
			require.NoError(t, err)
			return s, dropper(db)
		}},
		{"PostgreSQL", func(t *testing.T, table string) (membersStore, func(string) error) {
			pool := pgdb.Postgres(t)
			s, err := postgres.New(pool, table)
			require.NoError(t, err)
			return s, func(q string) error { _, err := pool.Exec(context.Background(), q); return err }
		}},
		{"SQLite", func(t *testing.T, table string) (membersStore, func(string) error) {
			db := litedb.SQLite(t)
			s, err := sqlite.New(db, table)
			require.NoError(t, err)
			return s, dropper(db)
		}},
	}
}

// openMembers opens a store on fresh tables, dropped at the end.
func openMembers(t *testing.T, open func(t *testing.T, table string) (membersStore, func(string) error)) (*counting, func(string) error, string) {
	table := testdb.Name(t)
	st, exec := open(t, table)
	require.NoError(t, st.CreateTable(t.Context()))
	t.Cleanup(func() {
		_ = exec("DROP TABLE IF EXISTS " + table)
		_ = exec("DROP TABLE IF EXISTS " + table + "_members")
	})
	return &counting{membersStore: st, calls: map[string][]int{}}, exec, table + "_members"
}

// patientLease and patient are timings for members tests on a loaded machine:
// the members view shows rows written within two leases, and writes come once a
// lease.
const patientLease = 2 * time.Second

func patient(c *casleader.GroupConfig) {
	c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval = patientLease, 1200*time.Millisecond, 100*time.Millisecond, 500*time.Millisecond
}

func roles(t *testing.T, g *casleader.Group, key string) []string {
	ms, err := g.Members(t.Context(), key)
	if !assert.NoError(t, err) {
		return nil
	}
	out := []string{}
	for _, m := range ms {
		s := m.ID + ":" + m.Role
		if m.Paused {
			s += ":paused"
		}
		out = append(out, s)
	}
	return out
}

func TestGroupsRecordEveryKeyInOneBatchedWritePerPeriod(t *testing.T) {
	for _, d := range membersDatabases() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			st, _, _ := openMembers(t, d.open)
			ks := keys(15)
			started := time.Now()
			a := newGroup(t, st, "a", ks[:10], func(c *casleader.GroupConfig) { patient(c); c.KeepLeaseOnExit = true })
			b := newGroup(t, st, "b", ks[5:], patient)
			b.Pause()
			c := newGroup(t, st, "c", ks, func(c *casleader.GroupConfig) { patient(c); c.Observer = true })
			stopA, stopB, stopC := running(t, a), running(t, b), running(t, c)
			defer stopB()

			// Each key's view: the group's roles are written once a group has won
			// the key (campaigns run in batches of 7 keys).
			require.Eventually(t, func() bool {
				return assert.ObjectsAreEqual([]string{"a:leader", "b:follower:paused", "c:observer"}, roles(t, c, ks[7])) &&
					assert.ObjectsAreEqual([]string{"a:leader", "c:observer"}, roles(t, c, ks[0])) &&
					assert.ObjectsAreEqual([]string{"b:follower:paused", "c:observer"}, roles(t, c, ks[14]))
			}, 10*time.Second, 20*time.Millisecond, "the members of keys of one, two and three groups, in their roles; last seen %v %v %v",
				roles(t, c, ks[0]), roles(t, c, ks[7]), roles(t, c, ks[14]))

			// Roles can change at any write (a late renewal under load), so from here
			// on only who is shown is checked.
			stopC()
			assert.Equal(t, []string{"a", "b"}, ids(roles(t, a, ks[7])), "c stopped cleanly: its rows are deleted")
			stopA() // keeps its leases and its rows, as a dead process does
			assert.Equal(t, []string{"a", "b"}, ids(roles(t, b, ks[7])), "a dead group's rows stay until they expire")
			require.Eventually(t, func() bool {
				return assert.ObjectsAreEqual([]string{"b"}, ids(roles(t, b, ks[7])))
			}, 20*time.Second, 20*time.Millisecond, "a's rows expire")

			elapsed := time.Since(started)
			st.mu.Lock()
			defer st.mu.Unlock()
			for id, n := range map[string]int{"a": 10, "b": 10, "c": 15} {
				calls := st.calls[id]
				require.NotEmpty(t, calls, id)
				for _, keys := range calls {
					assert.Equal(t, n, keys, "each write of %s carries all its keys in one batch", id)
				}
				assert.LessOrEqual(t, len(calls), int(elapsed/members.Period(patientLease))+1, "%s writes at most once per period", id)
			}
		})
	}
}

func TestGroupLeadsWithoutAMembersTable(t *testing.T) {
	for _, d := range membersDatabases() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			st, exec, members := openMembers(t, d.open)
			quoted, err := ident.Quote(map[string]schema.Dialect{"MariaDB": schema.MySQL, "PostgreSQL": schema.Postgres, "SQLite": schema.SQLite}[d.name], members)
			require.NoError(t, err)
			require.NoError(t, exec("DROP TABLE "+quoted))
			var mu sync.Mutex
			var buf bytes.Buffer
			ks := keys(20)
			a := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) {
				patient(c)
				c.Logger = slog.New(slog.NewTextHandler(lockedBuffer{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelWarn}))
			})
			stop := running(t, a)
			defer stop()
			require.Eventually(t, func() bool { return count(a, ks) == len(ks) }, 10*time.Second, 10*time.Millisecond, "the group leads every key")
			time.Sleep(3 * patientLease / 2) // three members periods, each write failing
			require.Eventually(t, func() bool { return count(a, ks) == len(ks) }, 10*time.Second, 10*time.Millisecond, "and still leads them")
			_, err = a.Members(t.Context(), ks[0])
			require.ErrorIs(t, err, store.ErrDeployment)
			mu.Lock()
			out := buf.String()
			mu.Unlock()
			assert.Equal(t, 1, strings.Count(out, "could not write this candidate's rows"), "one warning per 10 s:\n%s", out)
		})
	}
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// ids keeps the member IDs of "id:role..." strings.
func ids(rs []string) []string {
	out := []string{}
	for _, r := range rs {
		id, _, _ := strings.Cut(r, ":")
		out = append(out, id)
	}
	return out
}
