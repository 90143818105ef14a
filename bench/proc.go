package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/sqlite"
)

// Candidates in processes of their own (SQLite only): the parent starts this
// program with -child, and they talk over the child's stdin and stdout. The child
// prints "lead 1" and "lead 0" when its IsLeader changes, and answers "marks" with
// "marks WON RELEASED LASTRENEW" (Unix nanoseconds, 0 for none) and "resign" with
// "ok" or "err MESSAGE"; "stop" resigns if leading and exits. Crash kills it. The
// marks of two processes are compared by the host's wall clock.

// procCandidate is a candidate in a child process.
type procCandidate struct {
	id      string
	cmd     *exec.Cmd
	in      io.WriteCloser
	leading atomic.Bool
	replies chan string
	exited  chan struct{}
	mu      sync.Mutex // one request at a time
	once    sync.Once
}

// startProc starts candidate id of key in table of the SQLite database at path, in
// a child process.
func startProc(path, table, key, id string) (*procCandidate, error) {
	t := benchTiming()
	cmd := exec.Command(os.Args[0], "-child", "-child-db", path, "-child-table", table, "-child-key", key, "-child-id", id,
		"-lease", t.Lease.String(), "-heartbeat", t.Heartbeat.String())
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &procCandidate{id: id, cmd: cmd, in: in, replies: make(chan string, 4), exited: make(chan struct{})}
	go func() {
		defer close(c.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch line := sc.Text(); line {
			case "lead 1":
				c.leading.Store(true)
			case "lead 0":
				c.leading.Store(false)
			default:
				c.replies <- line
			}
		}
		c.leading.Store(false)
		_ = cmd.Wait()
	}()
	return c, nil
}

func (c *procCandidate) ID() string     { return c.id }
func (c *procCandidate) IsLeader() bool { return c.leading.Load() }

// ask sends a request line and returns the reply line.
func (c *procCandidate) ask(ctx context.Context, req string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.in, req+"\n"); err != nil {
		return "", err
	}
	select {
	case r := <-c.replies:
		return r, nil
	case <-c.exited:
		return "", fmt.Errorf("candidate %s exited", c.id)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (c *procCandidate) Resign(ctx context.Context) error {
	r, err := c.ask(ctx, "resign")
	if err != nil {
		return err
	}
	if r != "ok" {
		return fmt.Errorf("candidate %s: %s", c.id, r)
	}
	return nil
}

func (c *procCandidate) Marks() marks {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.ask(ctx, "marks")
	f := strings.Fields(r)
	if err != nil || len(f) != 4 || f[0] != "marks" {
		return marks{}
	}
	at := func(s string) time.Time {
		n, _ := strconv.ParseInt(s, 10, 64)
		if n == 0 {
			return time.Time{}
		}
		return time.Unix(0, n)
	}
	return marks{Won: at(f[1]), Released: at(f[2]), LastRenew: at(f[3])}
}

func (c *procCandidate) Crash() {
	c.once.Do(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	})
}

func (c *procCandidate) Stop() {
	c.once.Do(func() {
		_, _ = io.WriteString(c.in, "stop\n")
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
}

// procSystem runs SQLite candidates in processes of their own, woken across
// processes through the store's wake-up file.
type procSystem struct {
	name, path, table string
}

func newProcSystem(name, dir string) (*procSystem, error) {
	s := &procSystem{name: name, table: randName("bench_proc")}
	s.path = dir + "/" + s.table + ".db"
	db, err := sqlite.Open(s.path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	st, err := sqlite.New(db, s.table)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s, st.CreateTable(ctx)
}

func (s *procSystem) Name() string { return s.name }
func (s *procSystem) Start(_ context.Context, key, id string) (candidate, error) {
	return startProc(s.path, s.table, key, id)
}

// Statements are counted in the children, not reported.
func (s *procSystem) Statements() map[string]int64 { return map[string]int64{} }
func (s *procSystem) Close()                       {}

// childMain is the candidate process: it runs one elector with the store's
// wake-ups and the benchmark's timing, and serves the parent on stdin/stdout.
func childMain(path, table, key, id string, t timing) {
	db, err := sqlite.Open(path)
	check(err)
	st, err := sqlite.New(db, table)
	check(err)
	var box markBox
	rec := &recorder{Driver: st, wakes: true, marks: &box, count: &counter{}}
	el, err := casleader.New(rec, casleader.Config{
		Key: key, ID: id, LeaseDuration: t.Lease, RenewDeadline: t.Renew, HeartbeatInterval: t.Heartbeat, PollInterval: t.Poll,
		KeepLeaseOnExit: true,
	})
	check(err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = el.Run(ctx)
	}()
	var outMu sync.Mutex
	say := func(s string) {
		outMu.Lock()
		fmt.Println(s)
		outMu.Unlock()
	}
	go func() { // IsLeader transitions, sampled every 100 µs
		was := false
		for {
			select {
			case <-done:
				return
			default:
			}
			if is := el.IsLeader(); is != was {
				was = is
				say(map[bool]string{true: "lead 1", false: "lead 0"}[is])
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	ns := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixNano()
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "resign":
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			err := el.ResignFor(rctx, time.Hour)
			rcancel()
			if err != nil {
				say("err " + strings.ReplaceAll(err.Error(), "\n", " "))
			} else {
				say("ok")
			}
		case "marks":
			m := box.get()
			say(fmt.Sprintf("marks %d %d %d", ns(m.Won), ns(m.Released), ns(m.LastRenew)))
		case "stop":
			if el.IsLeader() {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				_ = el.ResignFor(rctx, time.Hour)
				rcancel()
			}
			cancel()
			<-done
			db.Close()
			return
		}
	}
	cancel()
	<-done
	db.Close()
}
