//go:build unix

package main

import (
	"os"
	"testing"
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
