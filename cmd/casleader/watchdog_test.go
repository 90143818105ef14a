//go:build unix

package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/casleader/casleader/internal/testdb"
)

// lifelinePipe returns a non-blocking read end (a raw fd) and the write end.
func lifelinePipe(t *testing.T) (int, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Dup(int(r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd); w.Close() })
	return fd, w
}

func writeKeepAlive(t *testing.T, w *os.File, killAt int64) {
	t.Helper()
	var b [keepAliveSize]byte
	b[0] = 'k'
	binary.BigEndian.PutUint64(b[1:], uint64(killAt))
	if _, err := w.Write(b[:]); err != nil {
		t.Fatal(err)
	}
}

// A supervisor that wakes after its first kill time has passed (it was stopped or
// starved) must read the keep-alives waiting in the pipe before it judges.
func TestWatchdogReadsWaitingKeepAlivesBeforeJudging(t *testing.T) {
	fd, w := lifelinePipe(t)
	now := monoNow()
	// Sent while the supervisor was not running: the last one moves the kill time
	// well past now. A message split across two writes must be reassembled.
	writeKeepAlive(t, w, now-int64(time.Second))
	writeKeepAlive(t, w, now+int64(time.Hour))
	var b [keepAliveSize]byte
	b[0] = 'k'
	binary.BigEndian.PutUint64(b[1:], uint64(now+2*int64(time.Hour)))
	if _, err := w.Write(b[:4]); err != nil {
		t.Fatal(err)
	}

	kills := make(chan string, 1)
	go watchdog(fd, now-int64(500*time.Millisecond), func(why string) { kills <- why })
	// The initial kill time is already past; only the waiting keep-alives hold it off.
	select {
	case why := <-kills:
		t.Fatalf("killed although keep-alives were waiting in the pipe: %s", why)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := w.Write(b[4:]); err != nil {
		t.Fatal(err)
	}
	// casleader dies: its end closes, and the watchdog kills at once.
	w.Close()
	select {
	case why := <-kills:
		if !strings.Contains(why, "has died") {
			t.Fatalf("kill reason after the lifeline closed: %q", why)
		}
	case <-time.After(waitLimit):
		t.Fatal("the watchdog did not kill after the lifeline closed")
	}
}

// Without keep-alives the watchdog kills once the kill time passes, and not before.
func TestWatchdogKillsAtTheKillTime(t *testing.T) {
	fd, w := lifelinePipe(t)
	const after = 200 * time.Millisecond
	start := monoNow()
	writeKeepAlive(t, w, start+int64(after))
	kills := make(chan int64, 1)
	go watchdog(fd, start, func(string) { kills <- monoNow() })
	select {
	case at := <-kills:
		if at < start+int64(after) {
			t.Fatalf("killed %v after start, before the kill time %v", time.Duration(at-start), after)
		}
	case <-time.After(waitLimit):
		t.Fatal("the watchdog never killed")
	}
}

// Stopping only the supervisor, past its own backstop, while casleader keeps leading
// and sending keep-alives: on waking it must find them and leave the child running.
func TestRunStoppedSupervisorKeepsAHealthyChild(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "sqlite")
	migrate(t, db)
	dir := t.TempDir()
	log := filepath.Join(dir, "child.log")
	// Wide timings: the leader itself must not lose its lease on a loaded machine,
	// since only the supervisor is under test. The backstop is 7/8 of 1.5 s after the
	// trust deadline; each stop is longer than the deadline + backstop can ever be.
	p := startRun(t, db, testdb.Name(t), "cand-A", dir, "--lease=3s", "--renew=1500ms", "--heartbeat=200ms")
	first := waitChildLines(t, log, "start", 1)[0]
	sup, err := syscall.Getpgid(first.pid)
	if err != nil {
		t.Fatalf("the child's process group: %v", err)
	}
	for i := range 3 {
		if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3500 * time.Millisecond)
		if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if strings.Contains(p.stderr.String(), "killing the child's process group") {
			t.Fatalf("stop %d: the supervisor killed the child on waking:\n%s", i+1, p.stderr)
		}
		if !strings.Contains(p.stderr.String(), "leadership ended") && processGone(first.pid) {
			t.Fatalf("stop %d: the child is gone while its leader still leads:\n%s", i+1, p.stderr)
		}
	}
}
