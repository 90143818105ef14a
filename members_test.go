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
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// membersDB opens a guardDB on a fresh table, creates both tables, and drops them
// at the end.
func membersDB(t *testing.T, open func(t *testing.T, table string) guardDB) (db guardDB, membersQuoted string) {
	table := testdb.Name(t)
	db = open(t, table)
	require.NoError(t, db.st.CreateTable(t.Context()))
	quoted, err := schema.Quote(db.dialect, table)
	require.NoError(t, err)
	name, err := schema.MembersTable(table)
	require.NoError(t, err)
	membersQuoted, err = schema.Quote(db.dialect, name)
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
		assert.Less(t, m.Age, 2*lease, "a shown member was seen within two leases")
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

			a := newElector(t, db.st, cfg("a"))
			stopA, _ := runUntil(t, a.Run)
			defer stopA()
			require.Eventually(t, a.IsLeader, settle, 10*time.Millisecond)

			b := newElector(t, db.st, cfg("b"))
			b.Pause()
			stopB, _ := runUntil(t, b.Run)
			defer stopB()
			co := cfg("c")
			co.Observer, co.Priority = true, 7
			c := newElector(t, db.st, co)
			stopC, _ := runUntil(t, c.Run)
			ko := cfg("killed")
			ko.KeepLeaseOnExit = true
			killed := newElector(t, db.st, ko)
			stopKilled, _ := runUntil(t, killed.Run)

			want := []string{"a:leader", "b:follower:paused", "c:observer", "killed:follower"}
			require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, view(t, a)) }, settle, 20*time.Millisecond,
				"the members view shows all four in their roles; last seen %v", view(t, a))
			ms, err := b.Members(t.Context())
			require.NoError(t, err)
			for _, m := range ms {
				if m.ID == "c" {
					assert.Equal(t, int64(7), m.Priority)
				}
			}

			// A clean stop deletes the row at once.
			require.NoError(t, stopC())
			assert.Equal(t, []string{"a:leader", "b:follower:paused", "killed:follower"}, view(t, a), "c stopped cleanly: its row is deleted")

			// A candidate that keeps its lease on exit leaves its row, as a dead
			// one does: it is shown until it is two leases old, then no more.
			require.NoError(t, stopKilled())
			stopped := time.Now()
			assert.Contains(t, view(t, a), "killed:follower", "the row of a dead candidate stays until it expires")
			require.Eventually(t, func() bool { return !contains(view(t, a), "killed:follower") },
				settle, 20*time.Millisecond)
			assert.GreaterOrEqual(t, time.Since(stopped), members2Leases()-members1Period(),
				"a dead candidate's row drops out only after it is two leases old (written at most a period before the stop)")
			assert.Equal(t, []string{"a:leader", "b:follower:paused"}, view(t, a))
		})
	}
}

func members2Leases() time.Duration { return 2 * lease }
func members1Period() time.Duration { return lease / 2 }

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
			logger := slog.New(slog.NewTextHandler(lockedBuffer{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelWarn}))
			ca := cfg("a")
			ca.Logger = logger
			a := newElector(t, db.st, ca)
			stopA, _ := runUntil(t, a.Run)
			require.Eventually(t, a.IsLeader, settle, 10*time.Millisecond, "a leads without a members table")
			cb := cfg("b")
			cb.Logger = logger
			b := newElector(t, db.st, cb)
			stopB, _ := runUntil(t, b.Run)
			defer stopB()

			_, err := a.Members(t.Context())
			require.ErrorIs(t, err, store.ErrDeployment)
			assert.Contains(t, err.Error(), "casleader migrate")

			// Several periods pass; the election goes on (a renews), then a
			// clean stop hands the lease to b.
			time.Sleep(3 * lease)
			assert.True(t, a.IsLeader())
			require.NoError(t, stopA())
			require.Eventually(t, b.IsLeader, settle, 10*time.Millisecond, "b takes over without a members table")

			mu.Lock()
			out := buf.String()
			mu.Unlock()
			warns := strings.Count(out, "could not write this candidate's rows in the members table")
			assert.GreaterOrEqual(t, warns, 2, "each candidate warns:\n%s", out)
			assert.LessOrEqual(t, warns, 2, "at most once per 10 s per candidate:\n%s", out)
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
