//go:build unix

package casleadertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWatchdogRestartsTheServer runs the containers' entrypoint script with a
// stand-in server that logs its starts and stops: SIGUSR1 stops the server and
// keeps the watchdog, SIGUSR2 starts it again (also when it comes before the
// server has stopped), SIGTERM stops both.
func TestWatchdogRestartsTheServer(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "server.log")
	// The trap comes before the start is logged: a signal sent once "start" is seen
	// must find it (on a loaded machine it could come in between).
	srv := `trap 'echo stop >> "$0"; exit 0' TERM; echo start >> "$0"; while :; do sleep 0.05; done`
	cmd := exec.Command("/bin/sh", "-c", watchdog, "casleadertest-watchdog", "1", "0", "TERM", "/bin/sh", "-c", srv, log)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	lines := func() string {
		b, _ := os.ReadFile(log)
		return strings.Join(strings.Fields(string(b)), " ")
	}
	await := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for lines() != want {
			require.True(t, time.Now().Before(deadline), "server log %q, want %q", lines(), want)
			time.Sleep(10 * time.Millisecond)
		}
	}
	running := func() bool {
		select {
		case err := <-exited:
			exited <- err
			return false
		default:
			return true
		}
	}
	signal := func(sig syscall.Signal) { require.NoError(t, cmd.Process.Signal(sig)) }

	await("start")
	signal(syscall.SIGUSR1)
	await("start stop")
	assert.True(t, running(), "the watchdog keeps the container while the server is down")
	assert.Equal(t, "start stop", lines(), "no start before SIGUSR2")
	signal(syscall.SIGUSR2)
	await("start stop start")

	signal(syscall.SIGUSR1)
	signal(syscall.SIGUSR2) // before the server has stopped
	await("start stop start stop start")
	assert.True(t, running())

	signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		exited <- err
		require.NoError(t, err, "the watchdog exits with the server's status")
	case <-time.After(30 * time.Second):
		t.Fatal("the watchdog did not exit within 30s of SIGTERM")
	}
	assert.Equal(t, "start stop start stop start stop", lines())
}
