//go:build unix

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
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
//   - While casleader's elector says it leads, casleader writes keep-alives: 'k' and
//     a CLOCK_MONOTONIC kill time. casleader computes it from the elector's trust
//     deadline (the send time of its last successful renewal + renew): no other
//     candidate can take over before that deadline + (lease - renew), and the kill
//     time is the deadline + 7/8 of (lease - renew). casleader itself terminates the
//     child at the trust deadline (SIGTERM, SIGKILL after --grace, which is below
//     that); the supervisor is the backstop for a casleader that cannot.
//   - The supervisor kills the group with SIGKILL when its own CLOCK_MONOTONIC passes
//     the newest kill time. It reads every keep-alive waiting in the pipe before it
//     judges, so a supervisor that was stopped or starved does not kill a healthy
//     leader's child on waking. A keep-alive carries an absolute time: one that
//     arrives late (a writer frozen after computing it) extends nothing.
//   - When casleader dies the kernel closes the write end: the supervisor reads EOF
//     and kills the group with SIGKILL at once.
//
// Everything else (SIGTERM, the grace period, SIGKILL after it, forwarding signals)
// is done by casleader on the group directly.
//
// A signal sent to the group before the supervisor has installed its handlers would
// kill the supervisor (the default disposition) instead of reaching the command. So
// the supervisor also holds the write end of a second pipe, the ready pipe, and
// closes it once its handlers are in place, before it starts the command; casleader
// forwards signals only after that (see forward).
type child struct {
	cmd   *exec.Cmd
	pgid  int
	life  *os.File      // the write end of the lifeline
	ready chan struct{} // closed when the supervisor's handlers are installed, or it has exited
	done  chan struct{}
	state *os.ProcessState // set before done is closed
}

// startChild starts argv under a supervisor (self is this binary) in a new process
// group, with env as its environment. killAt is the first kill time (see child).
func startChild(self string, argv, env []string, killAt int64) (*child, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	rr, rw, err := os.Pipe()
	if err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	args := []string{superviseCommand, "--kill-at", strconv.FormatInt(killAt, 10), "--"}
	cmd := exec.Command(self, append(args, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{pr, rw} // fds 3 (lifeline) and 4 (ready) in the supervisor
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		rr.Close()
		rw.Close()
		return nil, err
	}
	pr.Close()
	rw.Close()
	c := &child{cmd: cmd, pgid: cmd.Process.Pid, life: pw, ready: make(chan struct{}), done: make(chan struct{})}
	go func() {
		// EOF once the supervisor closes its end, or has exited: either way a signal
		// no longer finds it without handlers.
		_, _ = io.Copy(io.Discard, rr)
		rr.Close()
		close(c.ready)
	}()
	go func() {
		_ = cmd.Wait()
		c.state = cmd.ProcessState
		close(c.done)
	}()
	return c, nil
}

// keepAliveSize is the size of one keep-alive: 'k' and a big-endian int64.
const keepAliveSize = 9

// keepAlive moves the supervisor's kill time to killAt (CLOCK_MONOTONIC ns; see
// child). It never blocks for long: the pipe holds thousands of messages and the
// supervisor reads them at once.
func (c *child) keepAlive(killAt int64) {
	var b [keepAliveSize]byte
	b[0] = 'k'
	binary.BigEndian.PutUint64(b[1:], uint64(killAt))
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

// exitCode returns the child's exit code, 128+N when it died of signal N, and
// exitFailure while the supervisor has not exited (terminate may return before it
// has, after its last bound).
func (c *child) exitCode() int {
	if !c.exited() || c.state == nil {
		return exitFailure
	}
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignal + int(ws.Signal())
	}
	return c.state.ExitCode()
}

// killedBy names the signal that killed the supervisor, "" if none did or while it
// has not exited.
func (c *child) killedBy() string {
	if !c.exited() || c.state == nil {
		return ""
	}
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
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

// readyWait bounds how long forward waits for the supervisor's handlers: far longer
// than a start takes even on a loaded machine; a supervisor that takes longer is
// stuck, and the signal is sent anyway.
const readyWait = 10 * time.Second

// forward passes sig, received by casleader, on to the child's process group, once
// the supervisor can survive it (see child).
func (c *child) forward(sig os.Signal) {
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-c.ready:
	case <-t.C:
		slog.Default().Warn("casleader: the child's supervisor has not started within the bound: signalling its group anyway", "signal", sig.String(), "pgid", c.pgid, "bound", readyWait)
	}
	c.signal(sig)
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
	fs := a.flagSet(superviseCommand, "\nUsage: casleader "+superviseCommand+" --kill-at NS -- CMD [ARGS...]\n\nInternal: the supervisor of the child of 'casleader run'.\n")
	killAt := fs.Int64("kill-at", 0, "CLOCK_MONOTONIC `ns` at which to kill the group unless a keep-alive moves it later")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 || *killAt <= 0 {
		return usagef(superviseCommand, "internal command of 'casleader run': --kill-at and a command are required")
	}
	// The lifeline is read with raw system calls: an *os.File for fd 3 would close it
	// when collected.
	var st unix.Stat_t
	if err := unix.Fstat(lifelineFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return usagef(superviseCommand, "internal command of 'casleader run': fd 3 must be its lifeline pipe")
	}
	if err := unix.Fstat(readyFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return usagef(superviseCommand, "internal command of 'casleader run': fd 4 must be its ready pipe")
	}
	syscall.CloseOnExec(lifelineFD)
	syscall.CloseOnExec(readyFD)
	if err := unix.SetNonblock(lifelineFD, true); err != nil {
		return failf("supervisor: cannot make the lifeline non-blocking: %v", err)
	}
	// The whole group gets what casleader forwards; the supervisor must outlive the
	// child to report its exit code. A handler (not SIG_IGN) is reset on exec, so the
	// child still gets the default dispositions. SIGPIPE is caught so that a closed
	// stderr turns into EPIPE on a log line instead of killing the supervisor.
	sigc := make(chan os.Signal, 16)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	go func() {
		for range sigc {
		}
	}()
	// The handlers are in place: casleader may forward signals now (closing the ready
	// pipe tells it so; the command must not inherit it either).
	_ = unix.Close(readyFD)

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		code := exitNoExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return &exitError{code: code, err: err}
	}
	go watchdog(lifelineFD, *killAt, killGroup)
	_ = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitCode(exitSignal + int(ws.Signal()))
	}
	return exitCode(cmd.ProcessState.ExitCode())
}

// lifelineFD is the supervisor's end of the lifeline, readyFD its end of the ready
// pipe (see child).
const (
	lifelineFD = 3
	readyFD    = 4
)

// killGroup kills the supervisor's process group (the child, its descendants and the
// supervisor itself) with SIGKILL. It says why on stderr first, but never lets that
// write delay the kill by more than a moment: stderr may be a full pipe whose reader
// is stopped, or a closed one.
func killGroup(why string) {
	said := make(chan struct{})
	go func() {
		fmt.Fprintf(os.Stderr, "casleader supervisor: %s: killing the child's process group with SIGKILL\n", why)
		close(said)
	}()
	t := time.NewTimer(50 * time.Millisecond)
	select {
	case <-said:
	case <-t.C:
	}
	_ = syscall.Kill(-syscall.Getpgrp(), syscall.SIGKILL)
	os.Exit(exitSignal + int(syscall.SIGKILL)) // not reached: the group includes this process
}

// lifeline holds what the supervisor has read from casleader: the newest kill time
// and a message cut in two by a read.
type lifeline struct {
	fd     int
	killAt int64 // CLOCK_MONOTONIC ns
	buf    []byte
	closed bool // casleader's end is closed: it has died
}

// drain reads every keep-alive waiting in the pipe without blocking.
func (l *lifeline) drain() {
	var b [4096]byte
	for !l.closed {
		n, err := unix.Read(l.fd, b[:])
		switch {
		case n > 0:
			l.buf = append(l.buf, b[:n]...)
			for len(l.buf) >= keepAliveSize {
				if l.buf[0] == 'k' {
					l.killAt = max(l.killAt, int64(binary.BigEndian.Uint64(l.buf[1:keepAliveSize])))
				}
				l.buf = l.buf[keepAliveSize:]
			}
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return
		default: // n == 0: EOF; or a read error, which only a closed pipe can cause
			l.closed = true
		}
	}
}

// watchdog calls kill when casleader dies (its end of the lifeline closes) or when
// CLOCK_MONOTONIC passes the newest kill time casleader sent. It judges only after
// reading every keep-alive waiting in the pipe: a supervisor that was itself stopped
// or starved finds on waking the keep-alives that casleader sent meanwhile.
func watchdog(fd int, killAt int64, kill func(why string)) {
	l := &lifeline{fd: fd, killAt: killAt}
	for {
		l.drain()
		if l.closed {
			kill("casleader has died (its lifeline closed)")
			return
		}
		left := time.Duration(l.killAt - monoNow())
		if left <= 0 {
			kill(fmt.Sprintf("casleader has not confirmed its leadership in time (frozen or stopped?); the newest confirmation expired %v ago", (-left).Round(time.Millisecond)))
			return
		}
		ms := int((left + time.Millisecond - 1) / time.Millisecond)
		_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms) // EINTR: loop
	}
}
