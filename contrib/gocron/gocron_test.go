package casgocron_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/casleader/casleader"
	casgocron "github.com/casleader/casleader/contrib/gocron"
	"github.com/casleader/casleader/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixed is a Leader whose role a test sets: a single-instance deployment's stand-in.
type fixed struct{ leader atomic.Bool }

func (f *fixed) IsLeader() bool { return f.leader.Load() }
func (f *fixed) Leader() string {
	if f.IsLeader() {
		return "solo"
	}
	return ""
}

var (
	_ gocron.Elector   = casgocron.New(&fixed{})
	_ casgocron.Leader = (*casleader.Elector)(nil)
)

func TestIsLeaderFollowsTheLeadership(t *testing.T) {
	l := &fixed{}
	l.leader.Store(true)
	e := casgocron.New(l)
	require.NoError(t, e.IsLeader(t.Context()))

	l.leader.Store(false)
	err := e.IsLeader(t.Context())
	require.ErrorIs(t, err, casleader.ErrNotLeader)
	assert.Contains(t, err.Error(), "no leader known")

	l.leader.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.ErrorIs(t, e.IsLeader(ctx), context.Canceled, "a job whose context ended does not run")
}

// run is one job run as the job saw it.
type run struct {
	replica string
	leader  bool  // the replica's elector led when the run started
	token   int64 // its fencing token then
}

// replica is one process: an elector on the shared SQLite file and a scheduler
// gated on it, with one job that records its runs.
type replica struct {
	name  string
	el    *casleader.Elector
	sched gocron.Scheduler
	// stopRun ends the election (Run resigns) and returns Run's error; it may be
	// called more than once.
	stopRun func() error
}

func startReplica(t *testing.T, path, name string, record func(run)) *replica {
	t.Helper()
	db, err := sqlite.Open(path) // one pool per replica, as in separate processes
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	st, err := sqlite.New(db, "")
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(t.Context()))
	el, err := casleader.New(st, casleader.Config{
		Key: "jobs", ID: name,
		// Short, but patient enough for a loaded machine: a leader keeps its
		// lease unless its renewals stall for a second.
		LeaseDuration: 1500 * time.Millisecond, RenewDeadline: time.Second,
		HeartbeatInterval: 100 * time.Millisecond, PollInterval: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	r := &replica{name: name, el: el, stopRun: sync.OnceValue(func() error {
		cancel()
		return <-done
	})}

	r.sched, err = gocron.NewScheduler(gocron.WithDistributedElector(casgocron.New(el)))
	require.NoError(t, err)
	_, err = r.sched.NewJob(gocron.DurationJob(20*time.Millisecond), gocron.NewTask(func() {
		token := el.Token()
		record(run{replica: name, leader: el.IsLeader() && token != 0, token: token})
	}))
	require.NoError(t, err)
	r.sched.Start()
	t.Cleanup(func() {
		assert.NoError(t, r.sched.Shutdown())
		assert.NoError(t, r.stopRun())
	})
	return r
}

func TestJobsRunOnlyOnTheLeaderAndMoveWithLeadership(t *testing.T) {
	path := filepath.Join(t.TempDir(), "election.db")
	var mu sync.Mutex
	var runs []run
	record := func(r run) {
		mu.Lock()
		runs = append(runs, r)
		mu.Unlock()
	}
	count := func(replica string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range runs {
			if r.replica == replica {
				n++
			}
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); {
			require.True(t, time.Now().Before(deadline), "gave up waiting: %s", what)
			time.Sleep(10 * time.Millisecond)
		}
	}

	a := startReplica(t, path, "a", record)
	waitFor("a leads", a.el.IsLeader)
	tokenA := a.el.Token()
	b := startReplica(t, path, "b", record)
	waitFor("b sees a as leader", func() bool { return b.el.Leader() == "a" })
	waitFor("a's job runs 5 times", func() bool { return count("a") >= 5 })
	assert.Zero(t, count("b"), "b's scheduler must skip every run while a leads")

	// a's replica shuts its election down: it resigns, b takes over at once.
	require.NoError(t, a.stopRun())
	ranOnA := count("a")
	waitFor("b leads", b.el.IsLeader)
	tokenB := b.el.Token()
	assert.Greater(t, tokenB, tokenA, "the new leader has a newer token")
	waitFor("b's job runs 5 times", func() bool { return count("b") >= 5 })
	assert.Equal(t, ranOnA, count("a"), "a's scheduler still ticks but must not run jobs any more")

	mu.Lock()
	defer mu.Unlock()
	for _, r := range runs {
		assert.True(t, r.leader, "%s ran a job without leading", r.replica)
		want := map[string]int64{"a": tokenA, "b": tokenB}[r.replica]
		assert.Equal(t, want, r.token, "%s ran a job in another term", r.replica)
	}
}
