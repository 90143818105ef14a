//go:build unix

package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// superviseCommand is the hidden command that supervises run's child.
const superviseCommand = "supervise-child"

// forwardedSignals are the signals run passes on to its child's process group.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// child is run's child: a supervisor process (this binary's supervise-child command),
// leader of a new process group, which runs the user's command in that group.
//
// The supervisor exists for one reason: to kill the group when casleader itself dies
// (SIGKILL, OOM, crash) and can no longer do it. It holds the read end of a pipe whose
// only write end is in casleader (close-on-exec, so no other process inherits it);
// when casleader dies the kernel closes it, the supervisor reads EOF and sends
// SIGKILL to the whole group at once, since nobody renews the lease any more.
// Everything else (SIGTERM, the grace period, SIGKILL, forwarding) is done by
// casleader on the group directly.
type child struct {
	cmd   *exec.Cmd
	pgid  int
	life  *os.File // the write end of the lifeline
	done  chan struct{}
	state *os.ProcessState // set before done is closed
}

// startChild starts argv under a supervisor (self is this binary) in a new process
// group, with env as its environment.
func startChild(self string, argv, env []string) (*child, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{superviseCommand, "--"}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{pr} // fd 3 in the supervisor
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	pr.Close()
	c := &child{cmd: cmd, pgid: cmd.Process.Pid, life: pw, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		c.state = cmd.ProcessState
		close(c.done)
	}()
	return c, nil
}

// pid returns the supervisor's PID, which is also the group's ID.
func (c *child) pid() int { return c.pgid }

// exited reports whether the supervisor has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// exitCode returns the child's exit code, 128+N when it died of signal N. Call it
// after done is closed.
func (c *child) exitCode() int {
	if c.state == nil {
		return exitFailure
	}
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return c.state.ExitCode()
}

// signal sends sig to the child's process group.
func (c *child) signal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	if err := syscall.Kill(-c.pgid, s); err != nil && !errors.Is(err, syscall.ESRCH) {
		slog.Default().Debug("casleader: signalling the child's group failed", "pgid", c.pgid, "error", err)
	}
}

// alive reports whether the supervisor or any process of the child's group runs.
func (c *child) alive() bool { return !c.exited() || groupAlive(c.pgid) }

// terminate stops the child's process group: SIGTERM, then SIGKILL when anything is
// left after grace. It returns once the supervisor has exited and no process of the
// group runs any more (zombies do not count), or, if a process does not die even of
// SIGKILL (uninterruptible sleep), after a further bound, with a warning.
func (c *child) terminate(grace time.Duration, log *slog.Logger) {
	if !c.alive() {
		c.release()
		return
	}
	c.signal(syscall.SIGTERM)
	if !c.waitGone(grace) {
		log.Warn("casleader: the child did not exit within the grace period: sending SIGKILL to its process group", "grace", grace, "pgid", c.pgid)
		c.signal(syscall.SIGKILL)
		if !c.waitGone(max(grace, time.Second)) {
			log.Error("casleader: processes of the child's group are still alive after SIGKILL (uninterruptible sleep?)", "pgid", c.pgid)
		}
	}
	c.release()
}

// release closes the lifeline once the child has been dealt with.
func (c *child) release() {
	if c.exited() {
		c.life.Close()
	}
}

// waitGone waits up to d for the supervisor to exit and the group to empty.
func (c *child) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !c.alive() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		t := time.NewTimer(min(left, 20*time.Millisecond))
		select {
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
	}
}

// groupAlive reports whether a process of group pgid runs (zombies do not count).
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	return groupHasLiveMember(pgid)
}

// cmdSupervise is the supervisor of run's child: it runs the command given after "--"
// in its own process group (inherited from casleader's Setpgid), survives the
// signals casleader sends to the group, exits with the child's exit code (128+N for
// signal N), and kills the group with SIGKILL when its lifeline (fd 3) reports that
// casleader has died.
func cmdSupervise(a *app, args []string) error {
	if len(args) < 2 || args[0] != "--" {
		return usagef(superviseCommand, "internal command: usage: casleader %s -- CMD [ARGS...]", superviseCommand)
	}
	argv := args[1:]
	life := os.NewFile(3, "casleader-lifeline")
	if fi, err := life.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return usagef(superviseCommand, "internal command of 'casleader run': fd 3 must be its lifeline pipe")
	}
	syscall.CloseOnExec(3)
	// The whole group gets what casleader forwards; the supervisor must outlive the
	// child to report its exit code. A handler (not SIG_IGN) is reset on exec, so the
	// child still gets the default dispositions.
	sigc := make(chan os.Signal, 16)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for range sigc {
		}
	}()
	go func() {
		_, _ = io.Copy(io.Discard, life)
		// casleader is gone: nobody renews the lease. Kill the group, this process too.
		_ = syscall.Kill(-syscall.Getpgrp(), syscall.SIGKILL)
		os.Exit(exitSignal + int(syscall.SIGKILL))
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		code := exitNoExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return &exitError{code: code, err: err}
	}
	_ = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitCode(exitSignal + int(ws.Signal()))
	}
	return exitCode(cmd.ProcessState.ExitCode())
}
