package notify_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
)

var _ store.Driver = through{}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Timings under which a follower could only take over a released lease quickly by
// being woken: it would otherwise sleep until the lease expires (30 s) or its poll
// interval (1 min) passes.
func slowPolling(c *casleader.Config) {
	c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval = 30*time.Second, 20*time.Second, time.Second, time.Minute
}

// settle bounds what happens at once on a quiet machine; a loaded 2-core machine
// running the whole suite needs more (the lease is 30 s: nothing here waits for it).
const settle = 30 * time.Second

// listener is a wake-up path of its own, run next to the electors: a
// [notify.MySQL], as each process's MySQL store has.
type listener interface {
	SubscribeAs(key, id string, wake func(int64)) func()
	Observed(key string, rec store.Record)
	Leading(key string, token int64, leading bool)
	Run(ctx context.Context) error
}

// through is a store decorator whose wake-ups are those of l; every other method
// is the embedded store's.
type through struct {
	store.Driver
	l listener
}

func (s through) Subscribe(key, id string, wake func(int64)) func() {
	return s.l.SubscribeAs(key, id, wake)
}
func (s through) Observed(key string, rec store.Record) { s.l.Observed(key, rec) }
func (s through) Leading(key string, token int64, leading bool) {
	s.l.Leading(key, token, leading)
}

// start runs fn until the test ends.
func start(t *testing.T, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, fn(ctx)) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func elector(t *testing.T, st store.Driver, id string) *casleader.Elector {
	cfg := casleader.Config{Key: "k", ID: id}
	slowPolling(&cfg)
	el, err := casleader.New(st, cfg)
	require.NoError(t, err)
	start(t, el.Run)
	return el
}

// handover checks that resign and a planned handover reach a follower at once.
// Each elector has a store of its own, as in a process of its own.
func handover(t *testing.T, stores func() store.Driver) {
	a := elector(t, stores(), "a")
	require.Eventually(t, a.IsLeader, settle, 5*time.Millisecond)
	b := elector(t, stores(), "b")
	c := elector(t, stores(), "c")
	require.Eventually(t, func() bool { return b.Leader() == "a" && c.Leader() == "a" }, settle, 5*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // the followers wait on the leader's lock (MySQL)

	t.Run("ResignWakesAFollower", func(t *testing.T) {
		require.NoError(t, a.ResignFor(context.Background(), time.Hour))
		require.Eventually(t, func() bool { return b.IsLeader() || c.IsLeader() }, settle, time.Millisecond,
			"nobody took the released lease: followers were not woken")
	})
	t.Run("PlannedHandoverWakesTheTarget", func(t *testing.T) {
		from, to := b, c
		if c.IsLeader() {
			from, to = c, b
		}
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, from.HandoverTo(context.Background(), to.ID()))
		require.Eventually(t, to.IsLeader, settle, time.Millisecond, "the handover target was not woken")
	})
}

func TestPostgres(t *testing.T) {
	dsn := testdb.PostgresDSN(t)
	pool := pgdb.Postgres(t)
	table := testdb.Name(t)
	st, err := postgres.New(pool, table)
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(t.Context()))
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })

	var sts []*postgres.Store
	handover(t, func() store.Driver {
		st, err := postgres.New(pool, table, postgres.ListenDSN(dsn)) // a connection of its own
		require.NoError(t, err)
		sts = append(sts, st)
		return st
	})
	for _, st := range sts {
		assert.True(t, st.Listening(), "self-test on a direct connection")
	}
}

func TestPostgresThroughPgBouncerFallsBackToPolling(t *testing.T) {
	dsn := testdb.PgBouncerDSN(t) // optional: skips, even under CASLEADER_REQUIRE_DB=1
	st, err := postgres.New(pgdb.Postgres(t), testdb.Name(t), postgres.ListenDSN(dsn))
	require.NoError(t, err)
	woken := make(chan struct{}, 10)
	defer st.Subscribe("k", "", func(int64) { woken <- struct{}{} })()
	// The self-test fails; the listener says so and wakes its subscribers, which
	// then rely on polling.
	select {
	case <-woken:
	case <-time.After(settle):
		t.Fatal("the failed self-test did not wake the subscriber")
	}
	assert.False(t, st.Listening(), "LISTEN cannot work through PgBouncer in transaction mode")
}

func TestMySQL(t *testing.T) {
	db := mydb.MySQL(t)
	table := testdb.Name(t)
	st, err := mysql.New(db, table)
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(t.Context()))
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })

	var ns []*notify.MySQL
	handover(t, func() store.Driver {
		n, err := notify.NewMySQL(notify.MySQLConfig{DB: db, Table: table})
		require.NoError(t, err)
		start(t, n.Run)
		ns = append(ns, n)
		return through{st, n}
	})
	assert.Positive(t, ns[1].Woken()+ns[2].Woken())
}

func TestMySQLCrashedLeaderWakesFollowersButItsLeaseStillHolds(t *testing.T) {
	db := mydb.MySQL(t)
	table := testdb.Name(t)
	st, err := mysql.New(db, table)
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(t.Context()))
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })

	na, err := notify.NewMySQL(notify.MySQLConfig{DB: db, Table: table})
	require.NoError(t, err)
	nb, err := notify.NewMySQL(notify.MySQLConfig{DB: db, Table: table})
	require.NoError(t, err)
	start(t, nb.Run)
	actx, crash := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = na.Run(actx) })
	defer func() { crash(); wg.Wait() }()

	cfg := casleader.Config{Key: "k", ID: "a", KeepLeaseOnExit: true}
	slowPolling(&cfg)
	a, err := casleader.New(through{st, na}, cfg)
	require.NoError(t, err)
	wg.Go(func() { _ = a.Run(actx) })
	require.Eventually(t, a.IsLeader, settle, 5*time.Millisecond)
	b := elector(t, through{st, nb}, "b")
	require.Eventually(t, func() bool { return b.Leader() == "a" }, settle, 5*time.Millisecond)
	time.Sleep(200 * time.Millisecond)

	crash() // the leader's connections drop, its lease stays
	require.Eventually(t, func() bool { return nb.Woken() > 0 }, settle, time.Millisecond, "the dropped lock did not wake the follower")
	time.Sleep(500 * time.Millisecond)
	assert.False(t, b.IsLeader(), "the follower took a live lease")
}

// TestMySQLLockHolderSurvivesALostConnection: the server closes the connection that
// holds a leader's named lock (KILL, as a restart or a network cut would), and the
// leader stops leading before the holder noticed. The holder must forget the locks of
// the dead connection (the server released them), not release them on a connection it
// no longer has, and take the lock again, on a new connection, for the next term.
func TestMySQLLockHolderSurvivesALostConnection(t *testing.T) {
	db := mydb.MySQL(t)
	table := testdb.Name(t)
	var logs syncBuffer
	n, err := notify.NewMySQL(notify.MySQLConfig{DB: db, Table: table, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	start(t, n.Run)

	holder := func(name string) int64 {
		var id sql.NullInt64
		require.NoError(t, db.QueryRow(`SELECT IS_USED_LOCK(?)`, name).Scan(&id))
		return id.Int64
	}
	const key = "k"
	n.Leading(key, 1, true)
	var first int64
	require.Eventually(t, func() bool { first = holder(n.LockName(key, 1)); return first != 0 }, 30*time.Second, 10*time.Millisecond,
		"the leader's lock is taken")
	_, err = db.Exec(fmt.Sprintf(`KILL CONNECTION %d`, first))
	require.NoError(t, err)
	// The leader steps down: the holder finds its connection dead as it releases
	// the lock, and then holds nothing for a while (its backoff: at most 50 ms
	// after the first failure; 200 ms is four times that).
	n.Leading(key, 1, false)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "lock holder connection failed") }, 30*time.Second, 10*time.Millisecond,
		"the holder finds its connection dead")
	time.Sleep(200 * time.Millisecond)
	n.Leading(key, 2, true)
	var second int64
	require.Eventually(t, func() bool { second = holder(n.LockName(key, 2)); return second != 0 }, 30*time.Second, 10*time.Millisecond,
		"the next term's lock is taken on a new connection")
	assert.NotEqual(t, first, second)
	assert.Zero(t, holder(n.LockName(key, 1)), "the first term's lock went with its connection")
}
