//go:build unix

package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// superviseCommand is the hidden command that supervises run's child.
const superviseCommand = "supervise-child"

// forwardedSignals are the signals run passes on to its child's process group.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// child is run's child: a supervisor process (this binary's supervise-child command),
// leader of a new process group, which runs the user's command in that group.
//
// The supervisor exists to stop the child when casleader cannot: when casleader dies
// (SIGKILL, OOM, crash) or is frozen (SIGSTOP, a VM pause, swapping). It holds the
// read end of a pipe, the lifeline, whose only write end is in casleader
// (close-on-exec, so no other process inherits it):
//
//   - While casleader's elector says it leads (IsLeader, which compares the monotonic
//     clock with the trust deadline), casleader writes keep-alives: 'k' and the
//     CLOCK_MONOTONIC time, taken before the IsLeader check, at which it still led.
//     Each one proves that the lease cannot pass to another candidate before that
//     time + (lease - renew): the leader trusted its lease then, so its last renewal
//     was sent less than renew before, and followers wait lease after it.
//   - The supervisor kills the group with SIGKILL when its own CLOCK_MONOTONIC passes
//     the newest keep-alive time + --kill-after (lease - renew minus a margin), so a
//     frozen casleader cannot leave its child running into another leader's term.
//     Keep-alives that arrive late (a writer frozen after its check) carry their old
//     time and extend nothing.
//   - When casleader dies the kernel closes the write end: the supervisor reads EOF
//     and kills the group with SIGKILL at once.
//
// Everything else (SIGTERM, the grace period, SIGKILL after it, forwarding signals)
// is done by casleader on the group directly.
type child struct {
	cmd   *exec.Cmd
	pgid  int
	life  *os.File // the write end of the lifeline
	done  chan struct{}
	state *os.ProcessState // set before done is closed
}

// startChild starts argv under a supervisor (self is this binary) in a new process
// group, with env as its environment. leadingAt is a monotonic time (monoNow, taken
// before an IsLeader check that said yes) and killAfter the supervisor's limit.
func startChild(self string, argv, env []string, leadingAt int64, killAfter time.Duration) (*child, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	args := []string{superviseCommand, "--leading-at", strconv.FormatInt(leadingAt, 10), "--kill-after", killAfter.String(), "--"}
	cmd := exec.Command(self, append(args, argv...)...)
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

// keepAlive tells the supervisor that this instance still led at the monotonic time
// at (monoNow before an IsLeader check that said yes). It never blocks for long: the
// pipe holds thousands of messages and the supervisor reads them at once.
func (c *child) keepAlive(at int64) {
	var b [9]byte
	b[0] = 'k'
	binary.BigEndian.PutUint64(b[1:], uint64(at))
	_, _ = c.life.Write(b[:])
}

// monoNow returns CLOCK_MONOTONIC in nanoseconds: the clock casleader and the
// supervisor share on one host.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("casleader: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
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

// cmdSupervise is the supervisor of run's child (see child): it runs the command
// given after "--" in its own process group (inherited from casleader's Setpgid),
// survives the signals casleader sends to the group, exits with the child's exit
// code (128+N for signal N), and kills the group with SIGKILL when casleader stops
// proving its leadership in time or dies.
func cmdSupervise(a *app, args []string) error {
	fs := a.flagSet(superviseCommand, "\nUsage: casleader "+superviseCommand+" --leading-at NS --kill-after D -- CMD [ARGS...]\n\nInternal: the supervisor of the child of 'casleader run'.\n")
	leadingAt := fs.Int64("leading-at", 0, "CLOCK_MONOTONIC `ns` at which casleader last led")
	killAfter := fs.Duration("kill-after", 0, "kill the group this long after the newest keep-alive")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 || *leadingAt <= 0 || *killAfter <= 0 {
		return usagef(superviseCommand, "internal command of 'casleader run': --leading-at, --kill-after and a command are required")
	}
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

	killGroup := func(why string) {
		fmt.Fprintf(os.Stderr, "casleader supervisor: %s: killing the child's process group with SIGKILL\n", why)
		_ = syscall.Kill(-syscall.Getpgrp(), syscall.SIGKILL)
		os.Exit(exitSignal + int(syscall.SIGKILL)) // not reached: the group includes this process
	}
	var latest atomic.Int64 // newest keep-alive time
	latest.Store(*leadingAt)
	lost := make(chan struct{})
	go func() {
		defer close(lost)
		r := bufio.NewReader(life)
		var b [8]byte
		for {
			kind, err := r.ReadByte()
			if err != nil {
				return // EOF: casleader has died
			}
			if kind != 'k' {
				continue
			}
			if _, err := io.ReadFull(r, b[:]); err != nil {
				return
			}
			if at := int64(binary.BigEndian.Uint64(b[:])); at > latest.Load() {
				latest.Store(at)
			}
		}
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
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-exited:
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return exitCode(exitSignal + int(ws.Signal()))
			}
			return exitCode(cmd.ProcessState.ExitCode())
		case <-lost:
			killGroup("casleader has died (its lifeline closed)")
		case <-timer.C:
			left := time.Duration(latest.Load() + int64(*killAfter) - monoNow())
			if left <= 0 {
				killGroup(fmt.Sprintf("casleader has not confirmed its leadership for %v (frozen or stopped?)", *killAfter))
			}
			timer.Reset(left)
		}
	}
}
