package notify_test

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
)

// cutLink forwards TCP connections to a server; while cut it drops what either
// side sends and keeps the connections open, as a lost link does.
type cutLink struct {
	ln    net.Listener
	up    string
	cut   atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newCutLink(t *testing.T, up string) *cutLink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &cutLink{ln: ln, up: up}
	l.wg.Go(l.accept)
	t.Cleanup(l.close)
	return l
}

func (l *cutLink) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", l.up)
		if err != nil {
			c.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, c, s)
		l.mu.Unlock()
		l.wg.Go(func() { l.pipe(s, c) })
		l.wg.Go(func() { l.pipe(c, s) })
	}
}

// pipe copies from src to dst, dropping what comes while the link is cut.
func (l *cutLink) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			dst.Close()
			return
		}
	}
}

func (l *cutLink) close() {
	l.ln.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// TestMySQLWaiterSurvivesACutLink: a follower's lock wait whose link is cut loses
// the server's reply, and the link keeps its connection open. Once the link is
// back, the waiter must wait again on a new connection and be woken by the
// leader's release, not wait on the lost reply for ever.
func TestMySQLWaiterSurvivesACutLink(t *testing.T) {
	db := mydb.MySQL(t)
	table := testdb.Name(t)
	cfg, err := gomysql.ParseDSN(testdb.MySQLDSN(t))
	require.NoError(t, err)
	link := newCutLink(t, cfg.Addr)
	cfg.Addr = link.ln.Addr().String()
	far, err := mysql.Open(cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { far.Close() })

	var logs syncBuffer
	leader, err := notify.NewMySQL(notify.MySQLConfig{DB: db, Table: table})
	require.NoError(t, err)
	follower, err := notify.NewMySQL(notify.MySQLConfig{DB: far, Table: table, WaitTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	start(t, leader.Run)
	start(t, follower.Run)

	const key = "k"
	leader.Leading(key, 1, true)
	var woken atomic.Int64
	defer follower.SubscribeAs(key, "b", func(int64) { woken.Add(1) })()
	follower.Observed(key, store.Record{Key: key, LeaderID: "a", Term: 1, Version: 1})
	// The follower waits on the leader's lock: waits of a second that time out.
	time.Sleep(1500 * time.Millisecond)
	require.Zero(t, woken.Load(), "woken while the leader holds its lock")

	link.cut.Store(true)
	time.Sleep(2500 * time.Millisecond) // a wait's reply is lost
	link.cut.Store(false)

	leader.Leading(key, 1, false) // the leader releases its lock
	require.Eventually(t, func() bool { return woken.Load() > 0 }, settle, 10*time.Millisecond,
		"the follower was not woken after the link came back: its wait hangs on a lost reply")
	assert.Contains(t, logs.String(), "lock waiter connection failed", "the lost wait is reported")
}
