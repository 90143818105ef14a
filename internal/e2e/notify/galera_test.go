package notify_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/store/mysql"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMySQLOnGaleraWakesFollowersOnOtherNodes runs the leader and its notifier on
// one Galera node and the follower and its notifier on another, where the leader's
// named lock is invisible. With slowPolling the follower would find the released
// lease only after 30 s.
func TestMySQLOnGaleraWakesFollowersOnOtherNodes(t *testing.T) {
	dbs := mydb.Galera(t)
	table := testdb.Name(t)
	stA, err := mysql.New(dbs[0], table)
	require.NoError(t, err)
	stB, err := mysql.New(dbs[1], table)
	require.NoError(t, err)
	require.NoError(t, stA.CreateTable(t.Context()))
	t.Cleanup(func() { _, _ = dbs[0].Exec("DROP TABLE IF EXISTS " + table) })

	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	na, err := notify.NewMySQL(notify.MySQLConfig{DB: dbs[0], Table: table, Logger: logger})
	require.NoError(t, err)
	nb, err := notify.NewMySQL(notify.MySQLConfig{DB: dbs[1], Table: table, Logger: logger})
	require.NoError(t, err)
	start(t, na.Run)
	start(t, nb.Run)

	a := elector(t, through{stA, na}, "a")
	require.Eventually(t, a.IsLeader, settle, 5*time.Millisecond)
	b := elector(t, through{stB, nb}, "b")
	require.Eventually(t, func() bool { return b.Leader() == "a" }, settle, 5*time.Millisecond)
	require.Eventually(t, nb.Galera, settle, 5*time.Millisecond, "the follower's notifier did not detect the Galera node")
	assert.Contains(t, logs.String(), "Galera node", "no warning that named locks do not cross nodes")

	// Past the follower notifier's first lock grants (granted at once: the leader's
	// lock is on another node), which end, without Galera support, in one wake-up
	// and no more waiting on this term (about 150 ms plus three round trips).
	time.Sleep(2 * time.Second)
	released := time.Now()
	require.NoError(t, a.ResignFor(context.Background(), time.Hour))
	require.Eventually(t, b.IsLeader, settle, time.Millisecond,
		"the follower on another node was not woken by the release (it would find it after LeaseDuration, 30 s)")
	t.Logf("follower on another node led %v after the release", time.Since(released).Round(time.Millisecond))
	assert.Positive(t, nb.Woken())
}

var _ listener = (*notify.MySQL)(nil)
