//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// terminate may return before the supervisor has exited (after its last bound, when
// a process of the group does not die): the exit code read then must neither race
// with the goroutine that records the supervisor's exit nor claim a code.
func TestChildExitCodeBeforeTheSupervisorExits(t *testing.T) {
	t.Parallel()
	c := &child{done: make(chan struct{})}
	go func() {
		c.state = &os.ProcessState{}
		close(c.done)
	}()
	if got, sig := c.exitCode(), c.killedBy(); !c.exited() && (got != exitFailure || sig != "") {
		t.Fatalf("before the supervisor exits: exit code %d, killed by %q; want %d and none", got, sig, exitFailure)
	}
	<-c.done
	if got := c.exitCode(); got != 0 {
		t.Fatalf("after the supervisor exited 0: exit code %d", got)
	}
}

// fakeSupervisor writes a shell script that stands in for the supervise-child command:
// it sleeps with the default signal dispositions for a second (the window before a
// real supervisor has installed its handlers), then traps SIGTERM (logging it and
// exiting 7), says it is ready by closing fd 4, and waits.
func fakeSupervisor(t *testing.T) (self, log string) {
	t.Helper()
	dir := t.TempDir()
	self, log = filepath.Join(dir, "supervisor.sh"), filepath.Join(dir, "supervisor.log")
	script := `#!/bin/sh
sleep 1
trap 'echo TERM >> "$SUPERVISOR_LOG"; exit 7' TERM
exec 4>&-
while :; do sleep 0.05; done
`
	if err := os.WriteFile(self, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return self, log
}

// A signal forwarded right after the child was started must reach it once the
// supervisor can take it, not kill the supervisor with the default disposition
// (which made 'casleader run' exit 143 instead of the child's code).
func TestForwardWaitsForTheSupervisorsHandlers(t *testing.T) {
	t.Parallel()
	self, log := fakeSupervisor(t)
	c, err := startChild(self, []string{"true"}, append(os.Environ(), "SUPERVISOR_LOG="+log), monoNow()+int64(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer c.life.Close()
	c.forward(syscall.SIGTERM) // at once: the script is still in its first sleep
	select {
	case <-c.done:
	case <-time.After(waitLimit):
		c.signal(syscall.SIGKILL)
		t.Fatal("the fake supervisor did not exit after the forwarded SIGTERM")
	}
	if code := c.exitCode(); code != 7 {
		t.Fatalf("exit code %d (killed by %q), want 7: the signal reached the supervisor before its handler", code, c.killedBy())
	}
	if got := readFile(log); got != "TERM\n" {
		t.Fatalf("the supervisor's handler logged %q, want one TERM", got)
	}
}

// A supervisor that exits without ever saying it is ready (a failed start) does not
// leave forward waiting.
func TestForwardDoesNotWaitForASupervisorThatExited(t *testing.T) {
	t.Parallel()
	c, err := startChild("/bin/false", nil, os.Environ(), monoNow()+int64(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer c.life.Close()
	<-c.done
	select {
	case <-c.ready:
	case <-time.After(waitLimit):
		t.Fatal("ready never closed after the supervisor exited")
	}
	c.forward(syscall.SIGTERM) // returns at once; the group is gone (ESRCH is ignored)
}
