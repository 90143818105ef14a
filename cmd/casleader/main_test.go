package main

// End-to-end tests: TestMain builds the casleader binary once (with -race when the
// tests run with it) and the tests drive it with os/exec, on SQLite always and on
// MariaDB/MySQL and PostgreSQL through internal/testdb (CASLEADER_MYSQL_DSN,
// CASLEADER_POSTGRES_DSN; CASLEADER_REQUIRE_DB=1 turns skips into failures).
//
// The child that 'casleader run' starts is this test binary in child mode
// (CASLEADER_E2E_CHILD=1, see childMain): it takes an exclusive flock on a file
// shared by all candidates of a test, so a second child running at the same time as
// another is detected and logged as "overlap", and it logs its token, ID and PID.
//
// Timings are short (see runTimings) and no test asserts how fast something happens:
// waits have generous limits.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/casleader/casleader/internal/freeze"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
)

// clBinary is the casleader executable built by TestMain.
var clBinary string

func TestMain(m *testing.M) {
	if os.Getenv("CASLEADER_E2E_CHILD") == "1" {
		os.Exit(childMain())
	}
	// The tests mostly wait for processes and leases, not for the CPU: unless -parallel
	// is given, run a few more of them at once than the default GOMAXPROCS. Not many
	// more: each test runs several race-built processes, and on a small machine
	// more of them at once starve the leaders' renewals.
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run()) // a fuzzing worker runs no end-to-end test: no binary to build
	}
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(max(runtime.GOMAXPROCS(0), 4)))
	}
	dir, err := os.MkdirTemp("", "casleader-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	clBinary = filepath.Join(dir, "casleader")
	args := []string{"build", "-o", clBinary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "go build of casleader failed: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Test timings for run: heartbeat < renew < lease, and a grace of 3/4 (lease-renew).
// They are wide enough for a loaded 2-core machine running the race detector: a
// leader loses its lease only when no renewal succeeds within testRenew, and SQLite
// renewals were seen to stall past 2 s at load average 30. So the tests that assume
// one stable leader see no spurious re-elections, and the child's watchdog acts 7/8
// of lease - renew (2.625 s) after the trust deadline. Every wait and margin in the
// tests derives from these.
const (
	testLease     = 6 * time.Second
	testRenew     = 3 * time.Second
	testHeartbeat = 300 * time.Millisecond
	testPoll      = 200 * time.Millisecond
)

var runTimings = []string{"--lease", testLease.String(), "--renew", testRenew.String(),
	"--heartbeat", testHeartbeat.String(), "--poll", testPoll.String()}

// waitLimit bounds every wait for something that should happen within a few leases.
// It only detects a test that will never pass, and asserts no speed: on a loaded
// 2-core machine (load average 40 was seen) a race-built process takes seconds to
// start, and a test's several processes tens of seconds.
const waitLimit = 2 * time.Minute

// ---- the child started by 'casleader run' -------------------------------------------

// childMain is the test binary in child mode. Environment:
//
//	CHILD_LOG       file to append lines to: "start token=T id=I pid=P", "overlap ...",
//	                "signal NAME token=T id=I", "exit token=T"
//	CHILD_LOCK      file to flock exclusively (another live child holds it: "overlap")
//	CHILD_EXIT      exit with this code right after starting
//	CHILD_TERM_EXIT exit code after SIGTERM, SIGINT or SIGHUP (default 0)
//	CHILD_IGNORE_TERM=1  log those signals but keep running (only SIGKILL ends it)
func childMain() int {
	token, id := os.Getenv("CASLEADER_TOKEN"), os.Getenv("CASLEADER_LEADER_ID")
	logLine := func(format string, args ...any) {
		f, err := os.OpenFile(os.Getenv("CHILD_LOG"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = f.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if path := os.Getenv("CHILD_LOCK"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			logLine("error %v", err)
			return 98
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			logLine("overlap token=%s id=%s pid=%d: %v", token, id, os.Getpid(), err)
			return 99
		}
		// Held until the process exits (the fd stays open).
	}
	logLine("start token=%s id=%s pid=%d key=%s", token, id, os.Getpid(), os.Getenv("CASLEADER_KEY"))
	if c := os.Getenv("CHILD_EXIT"); c != "" {
		n, _ := strconv.Atoi(c)
		logLine("exit token=%s id=%s", token, id)
		return n
	}
	for waiting := true; waiting; {
		select {
		case sig := <-sigc:
			logLine("signal %s token=%s id=%s", sig, token, id)
			waiting = os.Getenv("CHILD_IGNORE_TERM") == "1"
		case <-time.After(5 * time.Minute): // never outlive a broken test
			logLine("timeout token=%s id=%s", token, id)
			waiting = false
		}
	}
	n, _ := strconv.Atoi(os.Getenv("CHILD_TERM_EXIT"))
	return n
}

// childLine is one parsed line of the child log.
type childLine struct {
	kind  string // start, overlap, signal, exit
	token int64
	id    string
	pid   int
	raw   string
}

func readChildLog(t *testing.T, path string) []childLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []childLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := childLine{raw: sc.Text()}
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		l.kind = f[0]
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(strings.TrimSuffix(kv, ":"), "=")
			switch k {
			case "token":
				l.token, _ = strconv.ParseInt(v, 10, 64)
			case "id":
				l.id = v
			case "pid":
				l.pid, _ = strconv.Atoi(v)
			}
		}
		out = append(out, l)
	}
	return out
}

func linesOf(lines []childLine, kind string) []childLine {
	var out []childLine
	for _, l := range lines {
		if l.kind == kind {
			out = append(out, l)
		}
	}
	return out
}

// waitChildLines waits until the log has at least n lines of kind and returns them.
func waitChildLines(t *testing.T, path, kind string, n int) []childLine {
	t.Helper()
	var got []childLine
	waitFor(t, fmt.Sprintf("%d %q lines in the child log", n, kind), func() bool {
		got = linesOf(readChildLog(t, path), kind)
		return len(got) >= n
	}, func() string { return "child log:\n" + readFile(path) })
	return got
}

func assertNoOverlap(t *testing.T, path string) {
	t.Helper()
	if o := linesOf(readChildLog(t, path), "overlap"); len(o) > 0 {
		t.Fatalf("two children ran at the same time: %v\nchild log:\n%s", o, readFile(path))
	}
}

// childEnv returns the environment for run's child in a test directory.
func childEnv(dir string, extra ...string) []string {
	return append([]string{
		"CASLEADER_E2E_CHILD=1",
		"CHILD_LOG=" + filepath.Join(dir, "child.log"),
		"CHILD_LOCK=" + filepath.Join(dir, "child.lock"),
	}, extra...)
}

// childCommand is the command line of run's child: this test binary.
func childCommand(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// processGone reports whether pid has exited (a zombie counts as gone: PID 1 may not
// reap orphans here).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) != nil
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// ---- databases ---------------------------------------------------------------------

// testDB is a database and a table of its own for one test.
type testDB struct {
	kind  string // sqlite, mysql, postgres
	dsn   string // for --dsn
	table string
}

// args returns the --dsn and --table flags.
func (d testDB) args() []string { return []string{"--dsn", d.dsn, "--table", d.table} }

// forEachDB runs f as a parallel subtest per database, in parallel with other tests.
func forEachDB(t *testing.T, f func(t *testing.T, db testDB)) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "mysql", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, newTestDB(t, kind))
		})
	}
}

// newTestDB returns a database of kind with a table name of its own, dropped when t
// ends (the table is created by the test, usually with migrate).
func newTestDB(t *testing.T, kind string) testDB {
	t.Helper()
	d := testDB{kind: kind, table: testdb.Name(t)}
	switch kind {
	case "sqlite":
		d.dsn = "sqlite://" + filepath.Join(t.TempDir(), "e2e.db")
	case "mysql":
		raw := testdb.MySQLDSN(t)
		d.dsn = mysqlURL(t, raw)
		db := mydb.MySQL(t)
		t.Cleanup(func() {
			dropTable(t, db, "DROP TABLE IF EXISTS `"+d.table+"`")
			dropTable(t, db, "DROP TABLE IF EXISTS `"+d.table+"_members`")
		})
	case "postgres":
		d.dsn = testdb.PostgresDSN(t)
		pool := pgdb.Postgres(t)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, table := range []string{d.table, d.table + "_members"} {
				if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS "`+table+`"`); err != nil {
					t.Logf("drop table %s: %v", table, err)
				}
			}
		})
	default:
		t.Fatalf("unknown database kind %q", kind)
	}
	return d
}

func dropTable(t *testing.T, db *sql.DB, stmt string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		t.Logf("%s: %v", stmt, err)
	}
}

// mysqlURL turns testdb's go-sql-driver DSN into the mysql://user:pass@host:port/db
// URL form the command documents first (the go-sql-driver form after mysql:// is
// tested separately). A Unix-socket DSN stays in go-sql-driver form.
func mysqlURL(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("CASLEADER_MYSQL_DSN: %v", err)
	}
	if cfg.Net != "tcp" {
		return "mysql://" + dsn
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else if cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	q := url.Values{}
	for k, v := range cfg.Params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// ---- running the command ------------------------------------------------------------

// proc is a running casleader process.
type proc struct {
	t              *testing.T
	name           string
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	code           int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start starts casleader with args and extra environment (CASLEADER_DSN from the
// test's own environment is removed). It is killed when the test ends.
func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(clBinary, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), env...)
	p := &proc{t: t, name: name, cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start casleader %v: %v", args, err)
	}
	go func() {
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-p.done
			}
		}
		if strings.Contains(p.stderr.String(), "DATA RACE") {
			t.Errorf("%s: the race detector reported a data race", p.name)
		}
		if t.Failed() {
			t.Logf("%s: casleader %s\nexit %d\nstdout:\n%s\nstderr:\n%s", p.name, strings.Join(args, " "), p.code, p.stdout, p.stderr)
		}
	})
	return p
}

// cleanEnv returns the test's environment without CASLEADER_DSN, and with the race
// detector's exit delay (1 s by default, in every process built with -race: casleader,
// its supervisor and the test child) cut short.
func cleanEnv() []string {
	env := []string{"GORACE=atexit_sleep_ms=10"}
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "CASLEADER_DSN="), strings.HasPrefix(kv, "CASLEADER_E2E_CHILD="):
		case strings.HasPrefix(kv, "GORACE="):
			env[0] = kv + " atexit_sleep_ms=10"
		default:
			env = append(env, kv)
		}
	}
	return env
}

// wait waits for p to exit and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(waitLimit):
		p.t.Fatalf("%s did not exit within %v\nstdout:\n%s\nstderr:\n%s", p.name, waitLimit, p.stdout, p.stderr)
		return -1
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s to %s: %v", sig, p.name, err)
	}
}

// result is a finished casleader invocation.
type result struct {
	code           int
	stdout, stderr string
}

// runCL runs casleader to completion.
func runCL(t *testing.T, env []string, args ...string) result {
	t.Helper()
	p := start(t, "casleader "+strings.Join(args, " "), env, args...)
	code := p.wait()
	return result{code: code, stdout: p.stdout.String(), stderr: p.stderr.String()}
}

// must runs the command and fails the test unless it exits 0.
func must(t *testing.T, args ...string) result {
	t.Helper()
	r := runCL(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("casleader %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

func waitFor(t *testing.T, what string, cond func() bool, diag ...func() string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %v waiting for %s", waitLimit, what)
			for _, d := range diag {
				msg += "\n" + d()
			}
			t.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// freezeOutsideWrite stops p with SIGSTOP at a moment when it holds no write lock on
// any file (package internal/freeze): a process frozen inside a SQLite write would
// block every other writer, the next leader's election included.
func (p *proc) freezeOutsideWrite() {
	p.t.Helper()
	if _, err := freeze.OutsideWrite(p.cmd.Process); err != nil {
		p.t.Fatalf("freeze %s: %v", p.name, err)
	}
}
