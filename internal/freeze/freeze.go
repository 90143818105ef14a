//go:build unix

// Package freeze stops a process (SIGSTOP) at a moment when it holds no write lock
// on any file, for the tests that freeze a candidate sharing a SQLite file.
//
// SQLite admits one writer at a time, by a POSIX lock. A process frozen while it
// holds that lock (inside a write statement, or a BEGIN IMMEDIATE transaction)
// blocks every other writer, the next leader's election included, until it is
// resumed or killed (docs/operations.md, "Assumptions"; docs/SAFETY.md, "Supported
// topologies"). A test of what a frozen leader's peers do therefore freezes it
// between two writes: [OutsideWrite] stops the process, looks in /proc/locks, and
// resumes it and stops it again a little later while it holds a write lock.
// Clients of a database server hold no such lock, so there the first stop counts;
// so it does where /proc/locks cannot be read (not Linux).
//
// Package cmd/casleader's end-to-end tests and package casleadertest's process
// cluster share it.
package freeze

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MaxAttempts is how many times [OutsideWrite] stops a process before it gives up.
const MaxAttempts = 100

// ErrInsideWrite is returned by [OutsideWrite] when the process held a write lock
// each of the [MaxAttempts] times it was stopped.
var ErrInsideWrite = errors.New("freeze: the process held a write lock each time it was stopped")

// OutsideWrite stops p with SIGSTOP at a moment when it holds no write lock on any
// file, and returns how many times it stopped it. On an error p is left running
// (resumed with SIGCONT, if it was stopped). The retries take a few milliseconds
// each: a process that writes without pause for longer than MaxAttempts of them
// (about a second) is not frozen, and the error matches [ErrInsideWrite].
func OutsideWrite(p *os.Process) (attempts int, err error) {
	for attempt := 1; ; attempt++ {
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return attempt, fmt.Errorf("freeze: SIGSTOP to process %d: %w", p.Pid, err)
		}
		if err := WaitStopped(p.Pid, 10*time.Second); err != nil {
			_ = p.Signal(syscall.SIGCONT)
			return attempt, err
		}
		held, err := WriteLockHeld(p.Pid)
		if err != nil || !held {
			return attempt, nil // no /proc/locks: the first stop counts
		}
		if err := p.Signal(syscall.SIGCONT); err != nil {
			return attempt, fmt.Errorf("freeze: SIGCONT to process %d: %w", p.Pid, err)
		}
		if attempt == MaxAttempts {
			return attempt, fmt.Errorf("%w (process %d, %d times)", ErrInsideWrite, p.Pid, attempt)
		}
		time.Sleep(time.Duration(attempt%7) * 3 * time.Millisecond)
	}
}

// WaitStopped waits up to timeout until the process pid is in the stopped state
// ('T' in /proc/PID/stat): SIGSTOP is delivered asynchronously. Without procfs it
// returns at once: there is nothing to wait on.
func WaitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return nil // no procfs (or the process is gone): nothing to wait on
		}
		if stopped(b) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("freeze: process %d is not stopped %v after SIGSTOP", pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// stopped reports whether the contents of /proc/PID/stat say the process is
// stopped. The state follows the command name, which is in parentheses and may
// contain any character.
func stopped(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'T'
}

// WriteLockHeld reports whether process pid holds a write (exclusive) POSIX lock on
// any file, from /proc/locks.
func WriteLockHeld(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false, err
	}
	return writeLockIn(string(b), pid), nil
}

// writeLockIn reports whether the /proc/locks text locks lists a write lock held
// by pid. Lines with "->" are waiters, not holders.
func writeLockIn(locks string, pid int) bool {
	want := strconv.Itoa(pid)
	for line := range strings.Lines(locks) {
		f := strings.Fields(line)
		if len(f) < 5 || f[1] == "->" {
			continue
		}
		if f[3] == "WRITE" && f[4] == want {
			return true
		}
	}
	return false
}
