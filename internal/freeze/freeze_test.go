//go:build linux

package freeze

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestWriteLockIn(t *testing.T) {
	const locks = "1: POSIX  ADVISORY  READ  4242 08:01:1 128 128\n" +
		"1: -> POSIX  ADVISORY  WRITE 4343 08:01:1 128 128\n" +
		"2: POSIX  ADVISORY  WRITE 4444 08:01:2 0 EOF\n" +
		"3: FLOCK  ADVISORY  WRITE 4545 00:2f:3 0 EOF\n" +
		"4: OFDLCK ADVISORY  WRITE -1 08:01:4 0 EOF\n"
	for _, tc := range []struct {
		name string
		pid  int
		want bool
	}{
		{"ReadLockIsNoWriteLock", 4242, false},
		{"WaiterHoldsNothing", 4343, false},
		{"PosixWriteLockIsHeld", 4444, true},
		{"FlockWriteLockIsHeld", 4545, true},
		{"OtherProcessHoldsNothing", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := writeLockIn(locks, tc.pid); got != tc.want {
				t.Errorf("writeLockIn(pid %d) = %v, want %v", tc.pid, got, tc.want)
			}
		})
	}
}

func TestStopped(t *testing.T) {
	for stat, want := range map[string]bool{
		"123 (sleep) T 1 123":          true,
		"123 (sleep) S 1 123":          false,
		"123 (a) T (b) S 1 123":        false, // the state follows the last ')'
		"123 (odd) name) T 1 123":      true,
		"":                             false,
		"123 (truncated)":              false,
		"123 (casleader.test) R 1 123": false,
	} {
		if got := stopped([]byte(stat)); got != want {
			t.Errorf("stopped(%q) = %v, want %v", stat, got, want)
		}
	}
}

// The POSIX lock this process takes on a file (as SQLite takes its write lock) is
// found in /proc/locks; once released, it is not.
func TestWriteLockHeldSeesAPosixLock(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lock := func(typ int16) {
		t.Helper()
		if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &syscall.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 1}); err != nil {
			t.Fatal(err)
		}
	}
	lock(syscall.F_WRLCK)
	if held, err := WriteLockHeld(os.Getpid()); err != nil || !held {
		t.Fatalf("WriteLockHeld with a write lock taken = %v, %v; want true", held, err)
	}
	lock(syscall.F_RDLCK)
	if held, err := WriteLockHeld(os.Getpid()); err != nil || held {
		t.Fatalf("WriteLockHeld with a read lock only = %v, %v; want false", held, err)
	}
	lock(syscall.F_UNLCK)
	if held, err := WriteLockHeld(os.Getpid()); err != nil || held {
		t.Fatalf("WriteLockHeld after the unlock = %v, %v; want false", held, err)
	}
}

// A process that holds no lock is stopped at the first attempt.
func TestOutsideWriteStopsAProcessWithoutLocks(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	n, err := OutsideWrite(cmd.Process)
	if err != nil || n != 1 {
		t.Fatalf("OutsideWrite = %d, %v; want 1, nil", n, err)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil || !stopped(b) {
		t.Fatalf("the process is not stopped after OutsideWrite: %q, %v", b, err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// A process that holds a write lock all the time is never frozen: OutsideWrite
// gives up and leaves it running.
func TestOutsideWriteLeavesAWriterRunning(t *testing.T) {
	if os.Getenv("FREEZE_TEST_LOCKER") != "" {
		f, err := os.Create(os.Getenv("FREEZE_TEST_LOCKER"))
		if err == nil {
			err = syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &syscall.Flock_t{Type: syscall.F_WRLCK, Len: 1})
		}
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString("locked\n")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutsideWriteLeavesAWriterRunning$")
	cmd.Env = append(os.Environ(), "FREEZE_TEST_LOCKER="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("the locker did not lock: %q, %v", buf, err)
	}
	n, err := OutsideWrite(cmd.Process)
	if !errors.Is(err, ErrInsideWrite) || n != MaxAttempts {
		t.Fatalf("OutsideWrite = %d, %v; want %d, ErrInsideWrite", n, err, MaxAttempts)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	if err != nil || stopped(b) {
		t.Fatalf("the writer is left stopped: %q, %v", b, err)
	}
}
