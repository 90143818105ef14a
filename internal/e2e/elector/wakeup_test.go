package casleader_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/members"
	"github.com/casleader/casleader/internal/protocoltest"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/store"
	mysqlstore "github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// wakeStore is a dialect store, which tells whether its listener listens.
type wakeStore interface {
	protocoltest.Store
	Listening() bool
}

// callCounter counts a store's reads of the row and its elections (Elect and
// ElectReleased): the round trips a follower makes to take a lease over. It is a
// decorator that embeds the store: the wake-ups (Subscribe, Observed, Leading),
// members and handovers it does not override are the store's, so an elector on it
// is woken as on the store itself.
type callCounter struct {
	store.Driver
	reads, elections atomic.Int64
	hidden           bool // b writes no members rows (see PutMembers)
}

func (r *callCounter) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	r.reads.Add(1)
	return r.Driver.Observe(ctx, key)
}

func (r *callCounter) Elect(ctx context.Context, key string, cand store.Candidate, version int64) (int64, bool, error) {
	r.elections.Add(1)
	return r.Driver.Elect(ctx, key, cand, version)
}

func (r *callCounter) ElectReleased(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	r.elections.Add(1)
	return r.Driver.ElectReleased(ctx, key, cand)
}

// PutMembers writes b's members rows unless hidden, when it fails as on a
// database without the members table: a leader that reads no row of b knows no
// successor, and releases the lease when it resigns, or hands it to b's ID alone.
func (r *callCounter) PutMembers(ctx context.Context, ms []store.Member) error {
	if r.hidden {
		return fmt.Errorf("%w: the test hides the members table", store.ErrDeployment)
	}
	return r.Driver.PutMembers(ctx, ms)
}

// calls returns the reads and elections counted so far.
func (r *callCounter) calls() int64 { return r.reads.Load() + r.elections.Load() }

// slowPolls are timings under which a follower that is not woken reads the row
// again only after about a minute: a takeover within settle can only come from a
// wake-up.
func slowPolls(id string) casleader.Config {
	return casleader.Config{Key: "k", ID: id, LeaseDuration: time.Minute, RenewDeadline: 40 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond, PollInterval: time.Minute}
}

// byWakeup runs leader a on sa and follower b on a decorator of sb that counts
// its calls (its next read a minute away); give (a's resign,
// or its handover to b) must let b lead at once. With known, give waits until
// a's members reads have named b its successor (the first read while a leads
// comes one members period, a lease, 60 s, after a's start); without it, b writes no members
// rows and a knows no successor. It returns how many rows b read and how many
// elections it sent between give and leading.
func byWakeup(t *testing.T, sa wakeStore, sb wakeStore, known bool, give func(a *casleader.Elector) error) (reads, elections int64) {
	t.Helper()
	ca, cb := slowPolls("a"), slowPolls("b")
	require.Less(t, settle, cb.LeaseDuration/2, "a takeover within settle must be impossible without a wake-up")
	var log lockedBuffer
	ca.Logger = debugLogger(&log)
	a := newElector(t, sa, ca)
	assert.Equal(t, time.Minute, a.Config().PollInterval)
	stopA := running(t, a)
	defer func() { require.NoError(t, stopA()) }()
	require.Eventually(t, a.IsLeader, settle, time.Millisecond)

	rb := &callCounter{Driver: sb, hidden: !known} // embeds sb: keeps its wake-ups
	b := newElector(t, rb, cb)
	stopB := running(t, b)
	defer func() { require.NoError(t, stopB()) }()
	require.Eventually(t, func() bool { return b.Leader() == "a" && sb.Listening() }, settle, time.Millisecond,
		"b follows a and its wake-ups listen")
	if known {
		require.Eventually(t, func() bool { return knowsSuccessor(&log, "b") }, members.Period(ca.LeaseDuration)+settle, 10*time.Millisecond,
			"a's members reads name b its successor")
	}

	// The wake-up that every listener sends when it starts (a release may have
	// come before it listened) makes b read once (and, on a store with
	// ElectReleased, first try an election that loses): count from after that.
	quiet(t, rb.calls)
	reads0, elections0 := rb.reads.Load(), rb.elections.Load()
	require.NoError(t, give(a))
	require.Eventually(t, b.IsLeader, settle, time.Millisecond,
		"b is woken by the release and takes over long before its next read (a minute away)")
	return rb.reads.Load() - reads0, rb.elections.Load() - elections0
}

// wakeupPairs are a leader's and a follower's stores, one pair per way a wake-up
// travels: LISTEN/NOTIFY, MySQL named locks, SQLite's wake-up file (two *sql.DB on
// one file, as two processes would have), and one store's own hub (electors on one
// store wake each other directly, whatever the dialect's cross-process path).
var wakeupPairs = []struct {
	name string
	pair func(t *testing.T) (leader, follower wakeStore)
}{
	{"PostgreSQL", func(t *testing.T) (wakeStore, wakeStore) {
		table := testdb.Name(t)
		sa := newPostgres(t, table)
		require.NoError(t, sa.CreateTable(t.Context()))
		return sa, newPostgres(t, table)
	}},
	{"MariaDB", func(t *testing.T) (wakeStore, wakeStore) {
		table := testdb.Name(t)
		sa := newMySQL(t, table)
		require.NoError(t, sa.CreateTable(t.Context()))
		return sa, newMySQL(t, table)
	}},
	{"SQLiteSecondDatabaseHandle", func(t *testing.T) (wakeStore, wakeStore) {
		path := filepath.Join(t.TempDir(), "wake.db")
		table := testdb.Name(t)
		sa, sb := newSQLite(t, path, table), newSQLite(t, path, table)
		require.NoError(t, sa.CreateTable(t.Context()))
		return sa, sb
	}},
	{"MariaDBWakePool", func(t *testing.T) (wakeStore, wakeStore) {
		table := testdb.Name(t)
		sa := newMySQL(t, table, wakePool(t))
		require.NoError(t, sa.CreateTable(t.Context()))
		return sa, newMySQL(t, table, wakePool(t))
	}},
	{"MariaDBOneStoreWakesInProcess", func(t *testing.T) (wakeStore, wakeStore) {
		st := newMySQL(t, testdb.Name(t))
		require.NoError(t, st.CreateTable(t.Context()))
		return st, st
	}},
}

// wakeupCounts is what a follower does between a wake-up and leading, per pair.
type wakeupCounts map[string]struct {
	reads, elections int64
	why              string
}

func testWakeups(t *testing.T, want wakeupCounts, known bool, give func(t *testing.T, a *casleader.Elector) error) {
	for _, p := range wakeupPairs {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			sa, sb := p.pair(t)
			reads, elections := byWakeup(t, sa, sb, known, func(a *casleader.Elector) error { return give(t, a) })
			w := want[p.name]
			assert.Equal(t, w.reads, reads, "reads after the wake-up: %s", w.why)
			assert.Equal(t, w.elections, elections, "elections after the wake-up: %s", w.why)
		})
	}
}

// TestStoreWakeupsClaimAHandedOverLeaseInOneRoundTrip: a handover's target whose
// process no handover can name (it cannot write its members rows) is woken (as
// handed over where the wake-up path can say so, without a version by a MySQL
// named lock) and claims the lease with one election and no read: ElectReleased
// wins a lease handed to its ID, in a new term that one process only can win, so
// that two processes that share the target's ID never both lead.
func TestStoreWakeupsClaimAHandedOverLeaseInOneRoundTrip(t *testing.T) {
	testWakeups(t, handoverClaims, false, func(t *testing.T, a *casleader.Elector) error { return a.HandoverTo(t.Context(), "b") })
}

// TestHandoverWakesTheOtherFollowersToo: the followers that are not a handover's
// target are woken too (notify.HandedToAnother: a read a few milliseconds after the
// target's), and learn the new leader long before their next read, a minute away.
func TestHandoverWakesTheOtherFollowersToo(t *testing.T) {
	for _, p := range wakeupPairs {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			sa, sb := p.pair(t)
			a := newElector(t, sa, slowPolls("a"))
			stopA := running(t, a)
			defer func() { require.NoError(t, stopA()) }()
			require.Eventually(t, a.IsLeader, settle, time.Millisecond)
			var followers []*casleader.Elector
			for _, id := range []string{"b", "c"} {
				f := newElector(t, sb, slowPolls(id))
				stop := running(t, f)
				defer func() { require.NoError(t, stop()) }()
				followers = append(followers, f)
			}
			b, c := followers[0], followers[1]
			require.Eventually(t, func() bool { return b.Leader() == "a" && c.Leader() == "a" && sb.Listening() }, settle, time.Millisecond)
			require.NoError(t, a.HandoverTo(t.Context(), "b"))
			require.Eventually(t, b.IsLeader, settle, time.Millisecond, "the target adopts the lease")
			require.Eventually(t, func() bool { return c.Leader() == "b" }, settle, time.Millisecond,
				"the other follower learns the new leader from its wake-up, not its next read")
			assert.False(t, c.IsLeader())
		})
	}
}

// TestStoreWakeupsHandOverWithoutWaitingForAPoll: a leader that knows no
// successor (b writes no members rows) releases the row when it resigns, and
// the release's wake-up lets b elect it without waiting for its next read.
func TestStoreWakeupsHandOverWithoutWaitingForAPoll(t *testing.T) {
	testWakeups(t, wakeupCounts{
		"PostgreSQL":                    {0, 1, "the notification carries the released version: b elects without reading"},
		"MariaDB":                       {0, 1, "a lock grant carries no version, yet b elects the released row without reading it (ElectReleased)"},
		"MariaDBWakePool":               {0, 1, "the same locks, on a pool of their own"},
		"SQLiteSecondDatabaseHandle":    {0, 1, "the wake-up file carries the released version: b elects without reading"},
		"MariaDBOneStoreWakesInProcess": {0, 1, "woken in-process with the released version: b elects without reading"},
	}, false, func(t *testing.T, a *casleader.Elector) error { return a.ResignFor(t.Context(), time.Hour) })
}

// handoverClaims is what a handover's target does between its wake-up and leading
// when the handover names its ID only.
var handoverClaims = wakeupCounts{
	"PostgreSQL":                    {0, 1, "the notification says the lease was handed over to b: b claims it without reading"},
	"MariaDB":                       {0, 1, "a lock grant says nothing, yet the election that wins a released row also claims one handed to b"},
	"MariaDBWakePool":               {0, 1, "the same locks, on a pool of their own"},
	"SQLiteSecondDatabaseHandle":    {0, 1, "the wake-up file says the lease was handed over to b: b claims it without reading"},
	"MariaDBOneStoreWakesInProcess": {0, 1, "woken in-process as handed over to b: b claims it without reading"},
}

// TestStoreWakeupsPassAResignedLeaseToTheKnownSuccessor: a leader whose members
// reads show b live hands the lease to b's process when it resigns with a
// cool-down (one compare-and-set that names b and its incarnation, not a release),
// and b leads it from one read, with no write, without waiting for its next read.
// Woken by a MySQL named lock, which says nothing, b reads too: its process can be
// named, so the wake-up may be a handover to it.
func TestStoreWakeupsPassAResignedLeaseToTheKnownSuccessor(t *testing.T) {
	testWakeups(t, wakeupCounts{
		"PostgreSQL":                    {1, 0, "the notification says the lease was handed over to b: b reads the row, which names its process"},
		"MariaDB":                       {1, 0, "a lock grant says nothing: b, whose process a handover can name, reads the row, which names its process"},
		"MariaDBWakePool":               {1, 0, "the same locks, on a pool of their own"},
		"SQLiteSecondDatabaseHandle":    {1, 0, "the wake-up file says the lease was handed over to b: b reads the row, which names its process"},
		"MariaDBOneStoreWakesInProcess": {1, 0, "woken in-process as handed over to b: b reads the row, which names its process"},
	}, true, func(t *testing.T, a *casleader.Elector) error { return a.ResignFor(t.Context(), time.Hour) })
}

func TestOneListenerPerStoreWhateverTheNumberOfElectors(t *testing.T) {
	table := testdb.Name(t)
	cfg, err := pgxpool.ParseConfig(testdb.PostgresDSN(t))
	require.NoError(t, err)
	cfg.MaxConns = 8
	cfg.ConnConfig.RuntimeParams["application_name"] = table
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := postgres.New(pool, table)
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(t.Context()))
	admin := pgdb.Postgres(t)
	listeners := func() int {
		var n int
		require.NoError(t, admin.QueryRow(t.Context(),
			`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'`, table).Scan(&n))
		return n
	}

	var stops []func() error
	for i := range 10 {
		c := cfg10(i)
		stops = append(stops, running(t, newElector(t, st, c)))
	}
	require.Eventually(t, st.Listening, settle, time.Millisecond)
	assert.Equal(t, 1, listeners(), "10 electors on one store share one LISTEN connection")
	for _, stop := range stops {
		require.NoError(t, stop())
	}
	assert.False(t, st.Listening(), "the last elector to stop stops the listener")
	require.Eventually(t, func() bool { return listeners() == 0 }, settle, 10*time.Millisecond, "its connection is closed")
}

func cfg10(i int) casleader.Config {
	c := slowPolls(string(rune('a' + i)))
	c.Key = "k" + string(rune('0'+i%3)) // three elections among ten electors
	return c
}

func newPostgres(t *testing.T, table string) *postgres.Store {
	cfg, err := pgxpool.ParseConfig(testdb.PostgresDSN(t))
	require.NoError(t, err)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := postgres.New(pool, table)
	require.NoError(t, err)
	return s
}

func newMySQL(t *testing.T, table string, opts ...mysqlstore.Option) *mysqlstore.Store {
	db, err := mysqlstore.Open(testdb.MySQLDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	s, err := mysqlstore.New(db, table, opts...)
	require.NoError(t, err)
	return s
}

// wakePool gives a MySQL store's wake-ups a small pool of their own.
func wakePool(t *testing.T) mysqlstore.Option {
	db, err := mysqlstore.Open(testdb.MySQLDSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(6)
	return mysqlstore.WakePool(db)
}

func newSQLite(t *testing.T, path, table string) *sqlite.Store {
	db, err := sqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	s, err := sqlite.New(db, table)
	require.NoError(t, err)
	return s
}

// quiet waits until n has not moved for a while and returns it.
func quiet(t *testing.T, n func() int64) int64 {
	t.Helper()
	last := n()
	for deadline := time.Now().Add(settle); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		now := n()
		if now == last {
			return now
		}
		last = now
	}
	t.Fatal("the count kept moving")
	return 0
}
