package group_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

var (
	_ store.Driver = (*mysql.Store)(nil)
	_ store.Driver = (*postgres.Store)(nil)
	_ store.Driver = (*sqlite.Store)(nil)
	_ store.Driver = (*memstore.Store)(nil)
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	lease     = 400 * time.Millisecond
	renewDL   = 250 * time.Millisecond
	heartbeat = 60 * time.Millisecond
	poll      = 100 * time.Millisecond
)

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("key-%04d", i)
	}
	return out
}

func newGroup(t *testing.T, st store.Driver, id string, ks []string, mod func(*casleader.GroupConfig)) *casleader.Group {
	t.Helper()
	cfg := casleader.GroupConfig{ID: id, Keys: ks, LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll, BatchSize: 7}
	if mod != nil {
		mod(&cfg)
	}
	g, err := casleader.NewGroup(st, cfg)
	require.NoError(t, err)
	return g
}

func running(t *testing.T, g *casleader.Group) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}

func count(g *casleader.Group, ks []string) int {
	n := 0
	for _, k := range ks {
		if g.IsLeader(k) {
			n++
		}
	}
	return n
}

func TestOneGroupLeadsEveryKeyWithBatchedStatements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(50)
		g := newGroup(t, st, "a", ks, nil)
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		assert.Equal(t, 50, count(g, ks))
		// A batch of one key is sent as a single-key statement.
		renewals := func() int { return st.Calls(memstore.OpRenewMany) + st.Calls(memstore.OpRenew) }
		assert.Equal(t, 8, st.Calls(memstore.OpInsertMany)+st.Calls(memstore.OpInsert), "50 keys in batches of 7")
		before := renewals()
		time.Sleep(10 * heartbeat)
		assert.Equal(t, 50, count(g, ks), "renewals keep every lease")
		assert.InDelta(t, 10*8, renewals()-before, 8, "one statement per batch per heartbeat")
		assert.Zero(t, g.Stats().LostLeases)
		recs, err := st.ObserveMany(t.Context(), ks)
		require.NoError(t, err)
		for _, k := range ks {
			term := recs[k].Term
			assert.Positive(t, term, "key %q", k)
			assert.Equal(t, term, g.Token(k), "key %q: the token is the row's term", k)
			assert.True(t, g.Lease(k).IsLeader())
			assert.Equal(t, term, g.Lease(k).Token())
		}
		assert.Nil(t, g.Lease("not-a-key"))
		stop()
		assert.Zero(t, count(g, ks))
		recs, err = st.ObserveMany(t.Context(), ks[:10])
		require.NoError(t, err)
		for _, rec := range recs {
			assert.True(t, rec.Released(), "Run's exit releases")
		}
	})
}

func TestFollowerGroupTakesOverAfterTheLeaseAndNeverBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(20)
		a := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) { c.KeepLeaseOnExit = true })
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		b := newGroup(t, st, "b", ks, nil)
		stopB := running(t, b)
		time.Sleep(3 * lease)
		assert.Equal(t, 20, count(a, ks))
		assert.Zero(t, count(b, ks), "b took a live lease")
		reads := st.Calls(memstore.OpObserveMany)
		time.Sleep(3 * lease)
		// 3 batches, each read every PollInterval (100 ms) for 1.2 s, or as soon
		// as PollInterval - HeartbeatInterval when timed after a renewal; one read
		// per key would make 20 per round.
		assert.LessOrEqual(t, st.Calls(memstore.OpObserveMany)-reads, 3*(int(3*lease/(poll-heartbeat))+2), "a follower reads in batches")
		stopA() // vanishes, keeping its leases
		killed := time.Now()
		for count(b, ks) < 20 {
			time.Sleep(time.Millisecond)
		}
		took := time.Since(killed)
		assert.Greater(t, took, lease-renewDL, "b took over before a's leases expired")
		assert.Less(t, took, lease+poll)
		assert.Zero(t, count(a, ks))
		stopB()
	})
}

func TestRemoveReleasesAndAnotherGroupTakesOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(10)
		a := newGroup(t, st, "a", ks, nil)
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		b := newGroup(t, st, "b", ks, nil)
		stopB := running(t, b)
		time.Sleep(lease / 2)
		a.Remove(ks[:5]...)
		time.Sleep(poll + 20*time.Millisecond)
		assert.Equal(t, 5, count(b, ks[:5]), "released keys are taken over within a poll")
		assert.Equal(t, 5, count(a, ks[5:]))
		assert.Zero(t, count(a, ks[:5]))
		time.Sleep(2 * lease)
		assert.Equal(t, 5, count(a, ks[5:]), "the keys it kept are still renewed")
		assert.Equal(t, int64(0), a.Stats().LostLeases)
		stopA()
		stopB()
	})
}

func TestLostRenewalIsSettledAndStepsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(3)
		var mu sync.Mutex
		var changes []string
		g := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) {
			c.OnChange = func(key string, leading bool, token int64) {
				mu.Lock()
				changes = append(changes, fmt.Sprint(key, leading, token))
				mu.Unlock()
			}
		})
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		rec, _, err := st.Observe(t.Context(), ks[0])
		require.NoError(t, err)
		st.Put(store.Record{Key: ks[0], Version: rec.Version + 5, LeaderID: "b", Term: rec.Version + 5})
		rec1, _, err := st.Observe(t.Context(), ks[1])
		require.NoError(t, err)
		ok, err := st.RequestStepDown(t.Context(), ks[1], rec1.Version, "")
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(heartbeat + time.Millisecond)
		assert.False(t, g.IsLeader(ks[0]), "taken over")
		assert.False(t, g.IsLeader(ks[1]), "step-down requested")
		assert.True(t, g.IsLeader(ks[2]))
		r1, _, err := st.Observe(t.Context(), ks[1])
		require.NoError(t, err)
		assert.True(t, r1.Released())
		assert.Equal(t, int64(1), g.Stats().LostLeases)
		stop()
		mu.Lock()
		defer mu.Unlock()
		assert.Contains(t, changes, fmt.Sprint(ks[0], false, rec.Term))
	})
}

// TestTermsOutrunARolledBackRow: after a failover that lost writes, a key's row is
// back at version 1 and term 1, still naming the group. Its renewal loses, it steps
// down and wins the key again in a term above the lost one, which becomes its token.
func TestTermsOutrunARolledBackRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(3)
		var mu sync.Mutex
		tokens := map[string][]int64{}
		g := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) {
			c.OnChange = func(key string, leading bool, token int64) {
				if leading {
					mu.Lock()
					tokens[key] = append(tokens[key], token)
					mu.Unlock()
				}
			}
		})
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		lost := g.Token(ks[0])
		require.Positive(t, lost)
		time.Sleep(3 * heartbeat)

		require.NoError(t, st.Corrupt(ks[0], "rolled_back"))
		time.Sleep(heartbeat + poll + 20*time.Millisecond)
		rec, _, err := st.Observe(t.Context(), ks[0])
		require.NoError(t, err)
		assert.Equal(t, "a", rec.LeaderID)
		assert.Greater(t, rec.Term, lost, "the term after the rollback is above the lost one")
		assert.Equal(t, rec.Term, g.Token(ks[0]), "the token is the new term")
		assert.Equal(t, int64(1), g.Stats().LostLeases)
		time.Sleep(3 * heartbeat)
		assert.True(t, g.IsLeader(ks[0]), "renewals from the new term win")
		stop()
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []int64{lost, rec.Term}, tokens[ks[0]])
	})
}

func TestRevivedTermOfOursIsNotAdopted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(1)
		var mu sync.Mutex
		var tokens []int64
		g := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) {
			c.OnChange = func(key string, leading bool, token int64) {
				if leading {
					mu.Lock()
					tokens = append(tokens, token)
					mu.Unlock()
				}
			}
		})
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		lost := g.Token(ks[0])
		require.Positive(t, lost)

		// The row goes back to an older term of ours with a fresh tick_time, as after
		// a failover that lost writes: a lease that looks live and names us, but in a
		// term below one we held.
		st.Put(store.Record{Key: ks[0], Version: lost - 10, LeaderID: "a", Term: lost - 10})
		time.Sleep(heartbeat + poll)
		assert.NotEqual(t, lost-10, g.Token(ks[0]), "the revived term was adopted")

		// Once that lease has expired, an election gives a term above the lost one.
		time.Sleep(lease + poll)
		require.True(t, g.IsLeader(ks[0]))
		assert.Greater(t, g.Token(ks[0]), lost)
		stop()
		mu.Lock()
		defer mu.Unlock()
		for _, tok := range tokens {
			assert.NotEqual(t, lost-10, tok, "led in the revived term: %v", tokens)
		}
	})
}

// termless is a store that does not report the terms of the keys it wins.
type termless struct{ *memstore.Store }

func (s termless) InsertMany(ctx context.Context, cand store.Candidate, keys []string) ([]store.Won, error) {
	won, err := s.Store.InsertMany(ctx, cand, keys)
	return withoutTerms(won), err
}

func (s termless) ElectMany(ctx context.Context, cand store.Candidate, from []store.KeyVersion) ([]store.Won, error) {
	won, err := s.Store.ElectMany(ctx, cand, from)
	return withoutTerms(won), err
}

func withoutTerms(won []store.Won) []store.Won {
	for i := range won {
		won[i].Term = 0
	}
	return won
}

// TestWinWithoutATermIsLedFromTheRow: a key won without a term is not led with token
// 0; the group reads the row soon and leads in the row's term.
func TestWinWithoutATermIsLedFromTheRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(3)
		var mu sync.Mutex
		tokens := map[string][]int64{}
		g := newGroup(t, termless{st}, "a", ks, func(c *casleader.GroupConfig) {
			c.OnChange = func(key string, leading bool, token int64) {
				mu.Lock()
				tokens[key] = append(tokens[key], token)
				mu.Unlock()
			}
		})
		stop := running(t, g)
		time.Sleep(poll)
		assert.Equal(t, 3, count(g, ks))
		recs, err := st.ObserveMany(t.Context(), ks)
		require.NoError(t, err)
		mu.Lock()
		for _, k := range ks {
			assert.Equal(t, recs[k].Term, g.Token(k), "key %q", k)
			assert.Equal(t, []int64{recs[k].Term}, tokens[k], "key %q: led only in the row's term", k)
		}
		mu.Unlock()
		stop()
	})
}

func TestRenewalThatHangsEndsTrustAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(3)
		g := newGroup(t, st, "a", ks, nil)
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		start := time.Now()
		st.SetDelay(memstore.OpRenewMany, time.Hour)
		for count(g, ks) > 0 {
			time.Sleep(time.Millisecond)
		}
		assert.LessOrEqual(t, time.Since(start), renewDL)
		st.SetDelay(memstore.OpRenewMany, 0)
		stop()
	})
}

func TestConfigValidation(t *testing.T) {
	st := memstore.New()
	for name, mod := range map[string]func(*casleader.GroupConfig){
		"InvalidID":          func(c *casleader.GroupConfig) { c.ID = "nul\x00byte" },
		"RenewAboveLease":    func(c *casleader.GroupConfig) { c.RenewDeadline = c.LeaseDuration },
		"HeartbeatSlow":      func(c *casleader.GroupConfig) { c.HeartbeatInterval = c.RenewDeadline },
		"BatchTooBig":        func(c *casleader.GroupConfig) { c.BatchSize = store.MaxBatch + 1 },
		"BalanceAndPriority": func(c *casleader.GroupConfig) { c.Balance, c.Priority = true, 1 },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := casleader.GroupConfig{ID: "a", LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat}
			mod(&cfg)
			_, err := casleader.NewGroup(st, cfg)
			assert.ErrorIs(t, err, casleader.ErrInvalidConfig)
		})
	}
	_, err := casleader.NewGroup(nil, casleader.GroupConfig{ID: "a"})
	assert.ErrorIs(t, err, casleader.ErrInvalidConfig)
}

// TestDatabases runs two groups against each database: every key gets exactly one
// leader, and a vanished group's keys move to the other after their leases.
func TestDatabases(t *testing.T) {
	for _, d := range []struct {
		name string
		open func(t *testing.T, table string) (store.Driver, func(string) error)
	}{
		{"MariaDB", func(t *testing.T, table string) (store.Driver, func(string) error) {
			db := mydb.MySQL(t)
			s, err := mysql.New(db, table)
			require.NoError(t, err)
			require.NoError(t, s.CreateTable(t.Context()))
			return s, dropper(db)
		}},
		{"PostgreSQL", func(t *testing.T, table string) (store.Driver, func(string) error) {
			pool := pgdb.Postgres(t)
			s, err := postgres.New(pool, table)
			require.NoError(t, err)
			require.NoError(t, s.CreateTable(t.Context()))
			return s, func(q string) error { _, err := pool.Exec(context.Background(), q); return err }
		}},
		{"SQLite", func(t *testing.T, table string) (store.Driver, func(string) error) {
			db := litedb.SQLite(t)
			s, err := sqlite.New(db, table)
			require.NoError(t, err)
			require.NoError(t, s.CreateTable(t.Context()))
			return s, dropper(db)
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			table := testdb.Name(t)
			st, exec := d.open(t, table)
			t.Cleanup(func() {
				_ = exec("DROP TABLE IF EXISTS " + table)
				_ = exec("DROP TABLE IF EXISTS " + table + "_members")
			})
			ks := keys(300)
			patient := func(c *casleader.GroupConfig) {
				c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval, c.BatchSize = 2*time.Second, 1200*time.Millisecond, 100*time.Millisecond, 2*time.Second, 100
			}
			a := newGroup(t, st, "a", ks[:200], func(c *casleader.GroupConfig) { patient(c); c.KeepLeaseOnExit = true })
			b := newGroup(t, st, "b", ks[100:], patient)
			stopA, stopB := running(t, a), running(t, b)
			defer stopB()
			// Each key, at some moment, with exactly one leader. Not all 300 at
			// one moment: on a loaded machine a renewal that misses the renew
			// deadline moves a key between a and b, and another key is always
			// in flight. 15 leases: each key needs at most one to settle.
			settled, both := map[string]bool{}, 0
			require.Eventually(t, func() bool {
				for _, k := range ks {
					la, lb := a.IsLeader(k), b.IsLeader(k)
					if la != lb {
						settled[k] = true
					} else if la {
						both++
					}
				}
				return len(settled) == len(ks)
			}, 30*time.Second, 10*time.Millisecond, "every key gets exactly one leader")
			assert.Zero(t, both, "a key led by both groups")
			stopA()
			require.Eventually(t, func() bool { return count(b, ks[100:]) == 200 }, 30*time.Second, 10*time.Millisecond,
				"b takes over a's shared keys after their leases")
		})
	}
}

func dropper(db *sql.DB) func(string) error {
	return func(q string) error { _, err := db.Exec(q); return err }
}

// BenchmarkIsLeader measures a group's IsLeader for one of 10,000 led keys.
func BenchmarkIsLeader(b *testing.B) {
	ks := keys(10000)
	g, err := casleader.NewGroup(memstore.New(), casleader.GroupConfig{ID: "a", Keys: ks, LeaseDuration: time.Hour, RenewDeadline: 50 * time.Minute, HeartbeatInterval: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for g.Stats().Leading < len(ks) {
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if !g.IsLeader(ks[i%len(ks)]) {
			b.Fatal("not leading")
		}
		i++
	}
}

func TestDeploymentErrorStopsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(3)
		g := newGroup(t, st, "a", ks, nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		time.Sleep(time.Millisecond)
		require.Equal(t, 3, count(g, ks))
		st.Fail(memstore.OpRenewMany, fmt.Errorf("%w: missing privilege on table", store.ErrDeployment))
		err := <-done
		assert.ErrorIs(t, err, store.ErrDeployment)
		assert.Zero(t, count(g, ks), "Run's exit stops every term")
	})
}

// BenchmarkLeaseIsLeader measures IsLeader through a key's handle.
func BenchmarkLeaseIsLeader(b *testing.B) {
	g, err := casleader.NewGroup(memstore.New(), casleader.GroupConfig{ID: "a", Keys: []string{"k"}, LeaseDuration: time.Hour, RenewDeadline: 50 * time.Minute, HeartbeatInterval: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	l := g.Lease("k")
	for !l.IsLeader() {
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !l.IsLeader() {
			b.Fatal("not leading")
		}
	}
}

func TestAddAndRemoveApplyInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		g := newGroup(t, st, "a", nil, nil)
		require.NoError(t, g.Add("x", "y"))
		g.Remove("x", "y")
		require.NoError(t, g.Add("y"))
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		assert.False(t, g.IsLeader("x"), "removed last")
		assert.True(t, g.IsLeader("y"), "added last")
		g.Remove("y")
		time.Sleep(time.Millisecond)
		assert.False(t, g.IsLeader("y"))
		rec, _, err := st.Observe(t.Context(), "y")
		require.NoError(t, err)
		assert.True(t, rec.Released(), "Remove releases a led key")
		stop()
	})
}
