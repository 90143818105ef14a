//go:build linux

package casleadertest

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestTerminatedTellsADeathBySIGTERM: the exit of a candidate that the end of a
// run's SIGTERM reached before it set up its handler is expected; any other is not.
func TestTerminatedTellsADeathBySIGTERM(t *testing.T) {
	t.Parallel()
	assert.True(t, terminated(exec.Command("/bin/sh", "-c", "kill -TERM $$").Run()), "killed by SIGTERM")
	assert.False(t, terminated(exec.Command("/bin/sh", "-c", "kill -KILL $$").Run()), "killed by SIGKILL")
	assert.False(t, terminated(exec.Command("/bin/sh", "-c", "exit 1").Run()), "exit status 1")
	assert.False(t, terminated(nil), "no error")
}
