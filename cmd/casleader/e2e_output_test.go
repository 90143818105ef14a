//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/casleader/casleader/internal/testdb"
)

// startRunIntoPipe starts 'casleader run' as a shell would for
// 'casleader run ... 2>&1 | head -3': stdout and stderr are the write end of one
// pipe, and the test holds the only read end. It returns the process and a reader
// of that end.
func startRunIntoPipe(t *testing.T, db testDB, key, id, dir string, env ...string) (*exec.Cmd, chan struct{}, *os.File) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := append(db.args(), "run", "--key", key, "--id", id)
	args = append(append(args, runTimings...), "--", childCommand(t))
	cmd := exec.Command(clBinary, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), childEnv(dir, env...)...)
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
		pr.Close()
	})
	return cmd, done, pr
}

// groupOf returns the process group of pid, 0 when it cannot be read.
func groupOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 3 {
		return 0
	}
	n, _ := strconv.Atoi(f[2])
	return n
}

// TestRunKeepsItsDutiesWhenItsOutputPipeCloses is 'casleader run ... 2>&1 | head -3':
// once the reader has gone, every log line of casleader and of the child's supervisor
// meets a closed pipe. casleader must survive that, still terminate the child when
// leadership ends, and leave no orphaned child behind.
func TestRunKeepsItsDutiesWhenItsOutputPipeCloses(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		log := filepath.Join(dir, "child.log")
		key := testdb.Name(t)
		cl, done, out := startRunIntoPipe(t, db, key, "cand-A", dir)
		sc := bufio.NewScanner(out)
		for range 3 {
			if !sc.Scan() {
				t.Fatalf("casleader run wrote fewer than 3 lines: %v", sc.Err())
			}
		}
		out.Close() // head -3 exits
		first := waitChildLines(t, log, "start", 1)[0]

		// Leadership ends: casleader logs (into the closed pipe) and must still
		// terminate the child, then campaign again and start the next one.
		must(t, append(db.args(), "resign", "--key", key)...)
		waitFor(t, "the first child to be gone after the resign", func() bool { return processGone(first.pid) },
			func() string { return "child log:\n" + readFile(log) })
		if sigs := linesOf(readChildLog(t, log), "signal"); len(sigs) != 1 || sigs[0].token != first.token {
			t.Fatalf("the first child was not terminated with a signal:\n%s", readFile(log))
		}
		second := waitChildLines(t, log, "start", 2)[1]
		if second.token <= first.token {
			t.Fatalf("after the resign: child %+v, first %+v", second, first)
		}
		select {
		case <-done:
			t.Fatalf("casleader exited (%v) after its output pipe closed", cl.ProcessState)
		default:
		}
		assertNoOverlap(t, log)

		// casleader killed: its supervisor must kill the child, whatever its own
		// message on the closed pipe does.
		pgid := groupOf(second.pid)
		if err := cl.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-done
		waitFor(t, "the second child to be gone after casleader was killed", func() bool { return processGone(second.pid) },
			func() string { return "child log:\n" + readFile(log) })
		if pgid > 0 {
			waitFor(t, "the child's process group to be empty", func() bool { return !groupAlive(pgid) })
		}
	})
}

// TestRunZeroTimingFlagsMeanTheDefaults: a zero --lease or --renew is the library's
// default, timing flags left out scale from --lease by the library's rule (an
// explicit one wins), and every timing run derives (the grace, the supervisor's
// kill time) follows the configuration the elector runs with, not the raw flags.
func TestRunZeroTimingFlagsMeanTheDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                    string
		flags                   []string
		lease, renew, heartbeat time.Duration
	}{
		{"LeaseZero", []string{"--lease", "0"}, 15 * time.Second, 10 * time.Second, 2 * time.Second},
		{"RenewZero", []string{"--renew", "0", "--lease", "21s"}, 21 * time.Second, 14 * time.Second, 2800 * time.Millisecond},
		{"AllZero", []string{"--lease", "0", "--renew", "0", "--heartbeat", "0", "--poll", "0"}, 15 * time.Second, 10 * time.Second, 2 * time.Second},
		{"LeaseAloneScales", []string{"--lease", "3s"}, 3 * time.Second, 2 * time.Second, 400 * time.Millisecond},
		{"ExplicitRenewWins", []string{"--lease", "3s", "--renew", "2500ms"}, 3 * time.Second, 2500 * time.Millisecond, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := newTestDB(t, "sqlite")
			migrate(t, db)
			dir := t.TempDir()
			log := filepath.Join(dir, "child.log")
			args := append(db.args(), "run", "--key", "k", "--id", "cand-A")
			args = append(append(args, tc.flags...), "--", childCommand(t))
			p := start(t, "run "+tc.name, childEnv(dir), args...)
			first := waitChildLines(t, log, "start", 1)[0]

			margin := tc.lease - tc.renew
			want := fmt.Sprintf("lease=%v renew=%v heartbeat=%v", tc.lease, tc.renew, tc.heartbeat)
			wantGrace := fmt.Sprintf("grace=%v", margin*3/4)
			if s := p.stderr.String(); !strings.Contains(s, want) || !strings.Contains(s, wantGrace) {
				t.Fatalf("run does not campaign with %s and %s:\n%s", want, wantGrace, s)
			}
			// The supervisor's first kill time: the trust deadline (at most renew
			// from now) plus 7/8 of lease - renew, and not yet passed.
			sup := groupOf(first.pid)
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", sup))
			if err != nil || sup == 0 {
				t.Fatalf("the child's supervisor (group %d): %v", sup, err)
			}
			var ts unix.Timespec
			if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
				t.Fatal(err)
			}
			argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
			killAt := int64(0)
			for i, a := range argv {
				if a == "--kill-at" && i+1 < len(argv) {
					killAt, _ = strconv.ParseInt(argv[i+1], 10, 64)
				}
			}
			if killAt <= 0 {
				t.Fatalf("the supervisor's command line has no --kill-at: %q", argv)
			}
			if left, most := time.Duration(killAt-ts.Nano()), tc.renew+margin*7/8; left > most {
				t.Fatalf("the supervisor kills %v from now, more than renew + 7/8 (lease - renew) = %v", left, most)
			}
			p.signal(syscall.SIGTERM)
			if code := p.wait(); code != 0 {
				t.Fatalf("run after SIGTERM: exit %d, want the child's 0\n%s", code, p.stderr)
			}
			if s := p.stderr.String(); strings.Contains(s, "internal") {
				t.Fatalf("run printed an internal message:\n%s", s)
			}
		})
	}
}
