package casleader_test

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
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/store"
)

// membersDB opens a guardDB on a fresh table, creates both tables, and drops them
// at the end.
func membersDB(t *testing.T, open func(t *testing.T, table string) guardDB) (db guardDB, membersQuoted string) {
	table := testdb.Name(t)
	db = open(t, table)
	require.NoError(t, db.st.CreateTable(t.Context()))
	quoted, err := ident.Quote(db.dialect, table)
	require.NoError(t, err)
	name, err := ident.MembersTable(table)
	require.NoError(t, err)
	membersQuoted, err = ident.Quote(db.dialect, name)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, q := range []string{quoted, membersQuoted} {
			assert.NoError(t, db.exec(ctx, "DROP TABLE IF EXISTS "+q))
		}
	})
	return db, membersQuoted
}

// view is the members of key as "id:role[:paused]" strings.
// membersCfg returns timings for members tests on a loaded machine: the members view
// shows rows written within two leases, and writes come once a lease.
func membersCfg(id string) casleader.Config {
	c := cfg(id)
	c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval = 2*time.Second, 1200*time.Millisecond, 100*time.Millisecond, 500*time.Millisecond
	return c
}

func view(t *testing.T, el *casleader.Elector) []string {
	ms, err := el.Members(t.Context())
	if !assert.NoError(t, err) {
		return nil
	}
	out := []string{}
	for _, m := range ms {
		s := m.ID + ":" + m.Role
		if m.Paused {
			s += ":paused"
		}
		assert.LessOrEqual(t, m.Age, 2*el.Config().LeaseDuration, "a shown member was seen within two leases")
		out = append(out, s)
	}
	return out
}

func TestMembersShowsWhoTakesPartAndDropsTheDeadAndTheStopped(t *testing.T) {
	t.Parallel()
	for _, d := range guardDBs() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db, _ := membersDB(t, d.open)

			a := newElector(t, db.st, membersCfg("a"))
			stopA, _ := runUntil(t, a.Run)
			defer stopA()
			require.Eventually(t, a.IsLeader, settle, 10*time.Millisecond)

			b := newElector(t, db.st, membersCfg("b"))
			b.Pause()
			stopB, _ := runUntil(t, b.Run)
			defer stopB()
			co := membersCfg("c")
			co.Observer, co.Priority = true, 7
			c := newElector(t, db.st, co)
			stopC, _ := runUntil(t, c.Run)
			ko := membersCfg("killed")
			ko.KeepLeaseOnExit = true
			killed := newElector(t, db.st, ko)
			stopKilled, _ := runUntil(t, killed.Run)

			// a or killed leads (killed may win when a renewal of a comes late
			// under load); b is a paused follower, c an observer.
			var last []string
			require.Eventually(t, func() bool {
				last = view(t, a)
				return assert.ObjectsAreEqual([]string{"a:leader", "b:follower:paused", "c:observer", "killed:follower"}, last) ||
					assert.ObjectsAreEqual([]string{"a:follower", "b:follower:paused", "c:observer", "killed:leader"}, last)
			}, settle, 20*time.Millisecond, "the members view shows all four in their roles")
			t.Logf("members: %v", last)
			ms, err := b.Members(t.Context())
			require.NoError(t, err)
			for _, m := range ms {
				if m.ID == "c" {
					assert.Equal(t, int64(7), m.Priority)
				}
			}

			// Roles can change at any write (a late renewal under load), so from here
			// on only who is shown is checked. A clean stop deletes the row at once.
			require.NoError(t, stopC())
			assert.Equal(t, []string{"a", "b", "killed"}, ids(view(t, a)), "c stopped cleanly: its row is deleted")

			// A candidate that keeps its lease on exit leaves its row, as a dead
			// one does: it is shown until it is two leases old, then no more.
			require.NoError(t, stopKilled())
			assert.Contains(t, ids(view(t, a)), "killed", "the row of a dead candidate stays until it expires")
			require.Eventually(t, func() bool { return !contains(ids(view(t, a)), "killed") }, settle, 20*time.Millisecond)
			assert.Equal(t, []string{"a", "b"}, ids(view(t, a)))
		})
	}
}

// TestMembersRowsRecordTheWritersIncarnation: each candidate writes its members
// rows with the incarnation of its process, the one that the election row records
// with the leader's term.
func TestMembersRowsRecordTheWritersIncarnation(t *testing.T) {
	t.Parallel()
	for _, d := range guardDBs() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db, _ := membersDB(t, d.open)
			a := newElector(t, db.st, membersCfg("a"))
			stopA, _ := runUntil(t, a.Run)
			defer stopA()
			require.Eventually(t, a.IsLeader, settle, 10*time.Millisecond)
			b := newElector(t, db.st, membersCfg("b"))
			stopB, _ := runUntil(t, b.Run)
			defer stopB()

			byID := map[string]string{}
			require.Eventually(t, func() bool {
				ms, err := db.st.MembersOf(t.Context(), []string{a.Key()}, time.Minute)
				require.NoError(t, err)
				for _, m := range ms {
					byID[m.ID] = m.Incarnation
				}
				return len(byID) == 2
			}, settle, 20*time.Millisecond, "both write their rows")
			rec, found, err := db.st.Observe(t.Context(), a.Key())
			require.NoError(t, err)
			require.True(t, found)
			require.NotEmpty(t, rec.Incarnation)
			assert.Equal(t, rec.Incarnation, byID[rec.LeaderID], "the leader's row and the election row name one process")
			assert.NotEmpty(t, byID["a"])
			assert.NotEmpty(t, byID["b"])
			assert.NotEqual(t, byID["a"], byID["b"], "two processes, two incarnations")
		})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestMissingMembersTableNeverStopsAnElection(t *testing.T) {
	t.Parallel()
	for _, d := range guardDBs() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db, membersQuoted := membersDB(t, d.open)
			require.NoError(t, db.exec(t.Context(), "DROP TABLE "+membersQuoted))

			var mu sync.Mutex
			var buf bytes.Buffer
			logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelWarn}))
			ca := membersCfg("a")
			ca.Logger = logger
			a := newElector(t, db.st, ca)
			stopA, _ := runUntil(t, a.Run)
			require.Eventually(t, a.IsLeader, settle, 10*time.Millisecond, "a leads without a members table")
			cb := membersCfg("b")
			cb.Logger = logger
			b := newElector(t, db.st, cb)
			stopB, _ := runUntil(t, b.Run)

			_, err := a.Members(t.Context())
			require.ErrorIs(t, err, store.ErrDeployment)
			assert.Contains(t, err.Error(), "casleader migrate")

			// Several periods pass and the election goes on (one of them leads;
			// b only if a renewal of a came late under load); then a clean stop of
			// the leader hands the lease to the other.
			time.Sleep(3 * lease)
			require.Eventually(t, func() bool { return a.IsLeader() != b.IsLeader() }, settle, 10*time.Millisecond, "one of them leads")
			first, next, stopFirst, stopNext := a, b, stopA, stopB
			if b.IsLeader() {
				first, next, stopFirst, stopNext = b, a, stopB, stopA
			}
			defer stopNext() //nolint:errcheck // checked by the cleanup of the test
			require.NoError(t, stopFirst())
			require.Eventually(t, next.IsLeader, settle, 10*time.Millisecond, "%s takes over from %s without a members table", next.ID(), first.ID())

			mu.Lock()
			out := buf.String()
			mu.Unlock()
			warns := strings.Count(out, "could not write this candidate's rows in the members table")
			assert.GreaterOrEqual(t, warns, 2, "each candidate warns:\n%s", out)
			assert.LessOrEqual(t, warns, 2, "at most once per 10 s per candidate:\n%s", out)
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
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
