//go:build linux

package casleadertest

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDiedOfTellsATerminatedProcessFromAFailedOne(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	require.True(t, diedOf(err, syscall.SIGTERM), "killed by SIGTERM: %v", err)
	require.False(t, diedOf(err, syscall.SIGKILL), "not by SIGKILL: %v", err)

	err = exec.Command("sh", "-c", "exit 3").Run()
	require.Error(t, err)
	require.False(t, diedOf(err, syscall.SIGTERM), "exited with a status: %v", err)
	require.False(t, diedOf(nil, syscall.SIGTERM), "no error")
}
