package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/store/sqlite"
)

// migrate creates db's table with the command.
func migrate(t *testing.T, db testDB) {
	t.Helper()
	must(t, append(db.args(), "migrate")...)
}

// startRun starts 'casleader run' for candidate id with the test child.
func startRun(t *testing.T, db testDB, key, id, dir string, flagsAndEnv ...string) *proc {
	t.Helper()
	var env, flags []string
	for _, s := range flagsAndEnv {
		if strings.HasPrefix(s, "--") {
			flags = append(flags, s)
		} else {
			env = append(env, s)
		}
	}
	args := append(db.args(), "run", "--key", key, "--id", id)
	args = append(append(args, runTimings...), flags...)
	args = append(args, "--", childCommand(t))
	return start(t, "run "+id, childEnv(dir, env...), args...)
}

// status returns the status of key as the command prints it with --json.
func status(t *testing.T, db testDB, key string) statusRow {
	t.Helper()
	r := runCL(t, nil, append(db.args(), "status", "--key", key, "--json", "--lease", testLease.String())...)
	if r.code != 0 && r.code != exitFailure {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var row statusRow
	if err := json.Unmarshal([]byte(r.stdout), &row); err != nil {
		t.Fatalf("status --json printed %q: %v", r.stdout, err)
	}
	return row
}

func TestUsageErrorsExit2WithAHint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"NoCommand", nil, "no command given"},
		{"UnknownCommand", []string{"bogus"}, `unknown command "bogus"`},
		{"UnknownFlag", []string{"status", "--bogus"}, "flag provided but not defined: -bogus"},
		{"UnknownGlobalFlag", []string{"--bogus", "status"}, "flag provided but not defined: -bogus"},
		{"UnexpectedArgument", []string{"status", "extra"}, `unexpected argument "extra"`},
		{"RunWithoutKey", []string{"run", "--", "true"}, "--key is required"},
		{"RunWithoutCommand", []string{"run", "--key", "k"}, "no command given"},
		{"BadDuration", []string{"run", "--key", "k", "--lease", "soon", "--", "true"}, "durations look like"},
		{"RenewNotBelowLease", []string{"run", "--key", "k", "--lease", "1s", "--renew", "2s", "--", "true"}, "--renew (2s) must be less than --lease (1s)"},
		{"HeartbeatNotBelowRenew", []string{"run", "--key", "k", "--lease", "3s", "--renew", "1s", "--heartbeat", "1s", "--", "true"}, "--heartbeat"},
		{"HeartbeatNotBelowScaledRenew", []string{"run", "--key", "k", "--lease", "3s", "--heartbeat", "2s", "--", "true"}, "--heartbeat (2s) must be less than --renew (2s)"},
		{"GraceTooLong", []string{"run", "--key", "k", "--lease", "3s", "--renew", "1s", "--heartbeat", "300ms", "--grace", "2s", "--", "true"}, "--grace"},
		{"BadListenAddress", []string{"--dsn", "sqlite://e.db", "run", "--key", "k", "--listen", "no-port-here", "--", "true"}, "--listen no-port-here"},
		{"RunWithoutDSN", []string{"run", "--key", "k", "--", "true"}, "no database given: run needs --dsn or $CASLEADER_DSN"},
		{"EmptyDSN", []string{"--dsn", "", "status"}, "the DSN is empty"},
		{"EmptyDSNAfterTheCommand", []string{"status", "--dsn", ""}, "the DSN is empty"},
		{"BlankDSNForRun", []string{"run", "--dsn", " ", "--key", "k", "--", "true"}, "the DSN is empty"},
		{"MySQLURLWithHashInPassword", []string{"--dsn", "mysql://app:s3cretpw#3xyz@127.0.0.1:3306/test", "status"}, "'#' is not allowed"},
		{"MySQLURLWithSlashInPassword", []string{"--dsn", "mysql://app:3306/s3cretpw@127.0.0.1:3306/test", "migrate"}, "percent-encode"},
		{"PostgresURLWithSlashInPassword", []string{"--dsn", "postgres://app:s3cretpw/x@127.0.0.1:5432/test", "status"}, "percent-encode"},
		{"ResignWithoutKey", []string{"resign"}, "--key is required"},
		{"HandoverWithoutTarget", []string{"handover", "--key", "k"}, "--to is required"},
		{"BadInterval", []string{"status", "--watch", "--interval", "0s"}, "--interval"},
		{"BadLogLevel", []string{"--log-level", "loud", "status"}, "--log-level"},
		{"BadTable", []string{"--table", "1; DROP TABLE x", "status"}, "--table"},
		{"UnknownDSNScheme", []string{"--dsn", "oracle://u@h/db", "status"}, "unknown scheme"},
		{"GoSQLDriverDSNWithoutScheme", []string{"--dsn", "root:s3cretpw@tcp(127.0.0.1:3306)/test", "status"}, "put mysql:// in front of it"},
		{"BadMySQLURL", []string{"--dsn", "mysql://u:s3cretpw@h:port/db", "migrate"}, "invalid port"},
		{"BadPostgresURL", []string{"--dsn", "postgres://u:s3cretpw@h:port/db", "migrate"}, "bad DSN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCL(t, nil, tc.args...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", r.code, exitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("stderr does not say %q:\n%s", tc.want, r.stderr)
			}
			if !strings.Contains(r.stderr, "help") {
				t.Fatalf("stderr does not say where to find help:\n%s", r.stderr)
			}
			for _, piece := range []string{"s3c", "cretpw", "3xyz"} {
				if strings.Contains(r.stdout+r.stderr, piece) {
					t.Fatalf("a piece of the password (%q) is printed:\n%s%s", piece, r.stdout, r.stderr)
				}
			}
		})
	}
}

func TestABadFlagPrintsItsErrorFirstAndAShortHint(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"status", "--bogus"},
		{"run", "--bogus", "--key", "k", "--", "true"},
		{"migrate", "--table"},
		{"--bogus", "status"},
		{},
	} {
		r := runCL(t, nil, args...)
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != exitUsage || r.stdout != "" || len(lines) > 2 || !strings.HasPrefix(lines[0], "casleader") ||
			!strings.Contains(lines[len(lines)-1], "help") {
			t.Errorf("casleader %q: exit %d, want %d, the error on the first line of stderr and a one-line hint\nstdout:\n%s\nstderr:\n%s",
				args, r.code, exitUsage, r.stdout, r.stderr)
		}
	}
}

func TestRunRequiresANamedDatabase(t *testing.T) {
	t.Parallel()
	p := start(t, "run without a DSN", nil, "run", "--key", "k", "--", "true")
	if code := p.wait(); code != exitUsage || !strings.Contains(p.stderr.String(), "--dsn") {
		t.Fatalf("run without --dsn or $CASLEADER_DSN: exit %d, want %d and a word about --dsn:\n%s", code, exitUsage, p.stderr)
	}
	if _, err := os.Stat(filepath.Join(p.cmd.Dir, defaultSQLiteFile)); !os.IsNotExist(err) {
		t.Fatalf("run without a DSN created or used %s (%v)", defaultSQLiteFile, err)
	}
	// Named by $CASLEADER_DSN, the database is used: the child runs and its exit code
	// is passed through.
	db := newTestDB(t, "sqlite")
	must(t, "--dsn", db.dsn, "--table", db.table, "migrate")
	dir := t.TempDir()
	args := append([]string{"--table", db.table, "run", "--key", "k", "--id", "cand-A"}, runTimings...)
	args = append(args, "--", childCommand(t))
	env := append(childEnv(dir, "CHILD_EXIT=6"), "CASLEADER_DSN="+db.dsn)
	if code := start(t, "run with $CASLEADER_DSN", env, args...).wait(); code != 6 {
		t.Fatalf("run with $CASLEADER_DSN: exit %d, want the child's 6", code)
	}
	if starts := waitChildLines(t, filepath.Join(dir, "child.log"), "start", 1); starts[0].id != "cand-A" {
		t.Fatalf("child: %+v", starts[0])
	}
}

func TestHelpExits0(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Commands:", "migrate", "status", "run", "resign", "handover", "demo", "Exit codes:", "mysql://"}},
		{[]string{"help"}, []string{"Commands:"}},
		{[]string{"help", "run"}, []string{"Usage: casleader run", "CASLEADER_TOKEN", "--grace", "--lease"}},
		{[]string{"run", "--help"}, []string{"Usage: casleader run", "CASLEADER_LEADER_ID", "--listen ADDR", "GET /metrics", "GET /healthz", "casleader_is_leader", "exit 2"}},
		{[]string{"status", "-h"}, []string{"Usage: casleader status", "--json", "--watch"}},
		{[]string{"migrate", "--help"}, []string{"Usage: casleader migrate"}},
		{[]string{"resign", "--help"}, []string{"Usage: casleader resign", "--wait"}},
		{[]string{"handover", "--help"}, []string{"Usage: casleader handover", "--to"}},
		{[]string{"demo", "--help"}, []string{"Usage: casleader demo"}},
	} {
		r := runCL(t, nil, tc.args...)
		if r.code != 0 {
			t.Errorf("casleader %v: exit %d\n%s", tc.args, r.code, r.stderr)
		}
		if n := strings.Count(r.stdout, "Usage:"); n != 1 {
			t.Errorf("casleader %v: the usage is printed %d times:\n%s", tc.args, n, r.stdout)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("casleader %v: stdout does not contain %q:\n%s", tc.args, w, r.stdout)
			}
		}
	}
}

func TestUnreachableDatabaseExits3WithoutThePassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"mysql://u:s3cretpw@127.0.0.1:1/db",
		"mysql://u:s3cretpw@tcp(127.0.0.1:1)/db",
		"postgres://u:s3cretpw@127.0.0.1:1/db?sslmode=disable&connect_timeout=5",
	} {
		for _, args := range [][]string{
			{"status"},
			{"migrate"},
			{"run", "--key", "k", "--", "true"},
			{"resign", "--key", "k"},
		} {
			r := runCL(t, nil, append([]string{"--dsn", dsn}, args...)...)
			if r.code != exitDatabase {
				t.Errorf("%s %v: exit %d, want %d\nstderr:\n%s", dsn, args, r.code, exitDatabase, r.stderr)
			}
			if strings.Contains(r.stdout+r.stderr, "s3cretpw") {
				t.Errorf("%s %v: the password is printed:\n%s%s", dsn, args, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, "--dsn") {
				t.Errorf("%s %v: the error does not say what to check:\n%s", dsn, args, r.stderr)
			}
		}
	}
}

func TestMissingSQLiteFileSaysRunMigrate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing.db")
	r := runCL(t, nil, "--dsn", "sqlite://"+path, "status")
	if r.code != exitDatabase || !strings.Contains(r.stderr, "migrate") {
		t.Fatalf("exit %d, want %d and a hint to run migrate:\n%s", r.code, exitDatabase, r.stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("status created the database file %s (%v)", path, err)
	}
}

func TestMigrateCreatesThenFindsTheTable(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		r := runCL(t, nil, append(db.args(), "status")...)
		if r.code != exitDatabase || !strings.Contains(r.stderr, "migrate") {
			t.Fatalf("status before migrate: exit %d, want %d and a hint to run migrate:\n%s", r.code, exitDatabase, r.stderr)
		}
		r = must(t, append(db.args(), "migrate")...)
		if !strings.Contains(r.stdout, "created table "+db.table) {
			t.Fatalf("first migrate says:\n%s", r.stdout)
		}
		r = must(t, append(db.args(), "migrate")...)
		if !strings.Contains(r.stdout, "table "+db.table+" already exists and has casleader's columns") {
			t.Fatalf("second migrate says:\n%s", r.stdout)
		}
		switch db.kind {
		case "mysql":
			// A go-sql-driver DSN after mysql:// works as well.
			r = must(t, "--dsn", "mysql://"+testdb.MySQLDSN(t), "--table", db.table, "migrate")
		default:
			// $CASLEADER_DSN instead of --dsn.
			r = runCL(t, []string{"CASLEADER_DSN=" + db.dsn}, "--table", db.table, "migrate")
		}
		if r.code != 0 || !strings.Contains(r.stdout, "already exists") {
			t.Fatalf("third migrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = must(t, append(db.args(), "status")...)
		if !strings.Contains(r.stdout, "no elections") {
			t.Fatalf("status of an empty table says:\n%s", r.stdout)
		}
		r = must(t, append(db.args(), "status", "--json")...)
		var rows []statusRow
		if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || rows == nil || len(rows) != 0 {
			t.Fatalf("status --json of an empty table prints %q (%v), want []", r.stdout, err)
		}
	})
}

func TestMigrateRejectsATableWithOtherColumns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "other.db")
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE casleader_election (id INTEGER PRIMARY KEY, name TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r := runCL(t, nil, "--dsn", path, "migrate")
	if r.code != exitDatabase || !strings.Contains(r.stderr, "columns") {
		t.Fatalf("exit %d, want %d and a word about the columns:\n%s", r.code, exitDatabase, r.stderr)
	}
}

func TestStatusShowsLeaderTermAgeAndState(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		key, done := "a-live", "b-released" // the table is the test's own
		startRun(t, db, key, "cand-A", dir)
		first := waitChildLines(t, filepath.Join(dir, "child.log"), "start", 1)[0]

		// A second election whose leader resigned: its child exits at once.
		dir2 := t.TempDir()
		if code := startRun(t, db, done, "cand-B", dir2, "CHILD_EXIT=0").wait(); code != 0 {
			t.Fatalf("run with a child that exits 0: exit %d", code)
		}

		row := status(t, db, key)
		if !row.Found || row.Leader != "cand-A" || row.Term != first.token || row.Version < row.Term ||
			row.Expired || row.Released || row.LeaseSeconds != testLease.Seconds() || row.AgeSeconds < 0 || row.AgeSeconds > testLease.Seconds() {
			t.Fatalf("status --json of the live election: %+v (child token %d)", row, first.token)
		}
		// The members view: cand-A records itself once a lease, as leader
		// once it has won; cand-B stopped cleanly and removed itself.
		deadline := time.Now().Add(4 * testLease)
		for m := row.Members; len(m) != 1 || m[0].ID != "cand-A" || m[0].Role != "leader" || m[0].Paused; m = status(t, db, key).Members {
			if time.Now().After(deadline) {
				t.Fatalf("status --json members of the live election: %+v", m)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if m := status(t, db, done).Members; len(m) != 0 {
			t.Fatalf("status --json members of the released election, whose candidate stopped: %+v", m)
		}
		if r := must(t, append(db.args(), "status", "--members", "--lease", testLease.String())...); !strings.Contains(r.stdout, "MEMBER") ||
			!regexp.MustCompile(`(?m)^a-live\s+cand-A\s+leader\s+no\s+0\s+\S+ ago$`).MatchString(r.stdout) {
			t.Fatalf("status --members prints:\n%s", r.stdout)
		}
		if row := status(t, db, done); !row.Found || !row.Released || !row.Expired || row.Leader != "" || row.Term <= 0 || row.Version <= row.Term {
			t.Fatalf("status --json of the released election: %+v", row)
		}
		if row := status(t, db, "no-such-key"); row.Found {
			t.Fatalf("status --json of a missing key: %+v", row)
		}
		if r := runCL(t, nil, append(db.args(), "status", "--key", "no-such-key")...); r.code != exitFailure || !strings.Contains(r.stdout, "no such election") {
			t.Fatalf("status of a missing key: exit %d\n%s", r.code, r.stdout)
		}

		// All keys, as text: a header and one line per key, sorted.
		r := must(t, append(db.args(), "status", "--lease", testLease.String())...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "KEY") || !strings.Contains(lines[0], "TERM") || !strings.Contains(lines[0], "AGE") {
			t.Fatalf("status prints:\n%s", r.stdout)
		}
		f := strings.Fields(lines[1])
		if f[0] != key || f[1] != "cand-A" || f[2] != strconv.FormatInt(first.token, 10) || !strings.Contains(lines[1], "live") {
			t.Fatalf("status line of the live election: %q", lines[1])
		}
		if f := strings.Fields(lines[2]); f[0] != done || f[1] != "-" || !strings.Contains(lines[2], "released") {
			t.Fatalf("status line of the released election: %q", lines[2])
		}

		// All keys, as JSON: an array, one object per line.
		r = must(t, append(db.args(), "status", "--json")...)
		var rows []statusRow
		if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
			t.Fatalf("status --json prints %q: %v", r.stdout, err)
		}
		if n := strings.Count(r.stdout, "\n"); n != len(rows)+2 {
			t.Fatalf("status --json prints %d lines for %d keys, want one per key and two for the brackets:\n%s", n, len(rows), r.stdout)
		}
		var keys []string
		for _, row := range rows {
			keys = append(keys, row.Key)
		}
		if !slices.Equal(keys, []string{key, done}) {
			t.Fatalf("status --json lists %v, want %v", keys, []string{key, done})
		}

		// --watch refreshes until interrupted, then exits 0.
		w := start(t, "status --watch", nil, append(db.args(), "status", "--key", key, "--watch", "--interval", "100ms")...)
		waitFor(t, "two refreshes", func() bool { return strings.Count(w.stdout.String(), "KEY") >= 2 })
		w.signal(syscall.SIGINT)
		if code := w.wait(); code != 0 {
			t.Fatalf("status --watch after SIGINT: exit %d\n%s", code, w.stderr)
		}
		// With --json, one line and JSON document per refresh.
		w = start(t, "status --watch --json", nil, append(db.args(), "status", "--watch", "--json", "--interval", "100ms")...)
		waitFor(t, "two refreshes", func() bool { return strings.Count(w.stdout.String(), "\n") >= 2 })
		w.signal(syscall.SIGINT)
		if code := w.wait(); code != 0 {
			t.Fatalf("status --watch --json after SIGINT: exit %d\n%s", code, w.stderr)
		}
		sc := bufio.NewScanner(strings.NewReader(w.stdout.String()))
		for sc.Scan() {
			var rows []statusRow
			if err := json.Unmarshal(sc.Bytes(), &rows); err != nil || len(rows) != 2 {
				t.Fatalf("status --watch --json line %q: %d rows, %v", sc.Text(), len(rows), err)
			}
		}
	})
}

func TestRunGatesTheChildOnLeadership(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		log := filepath.Join(dir, "child.log")
		key := testdb.Name(t)
		procs := map[string]*proc{
			"cand-A": startRun(t, db, key, "cand-A", dir),
			"cand-B": startRun(t, db, key, "cand-B", dir),
		}
		first := waitChildLines(t, log, "start", 1)[0]
		leader := procs[first.id]
		if leader == nil || first.token < 1 || first.pid == 0 {
			t.Fatalf("first child: %+v", first)
		}
		other := "cand-A"
		if first.id == "cand-A" {
			other = "cand-B"
		}
		// While the leader renews, the follower starts no child, not even after a
		// whole lease.
		time.Sleep(testLease)
		if starts := linesOf(readChildLog(t, log), "start"); len(starts) != 1 {
			t.Fatalf("%d children started while one leader renewed:\n%s", len(starts), readFile(log))
		}
		if row := status(t, db, key); row.Leader != first.id || row.Term != first.token || row.Version <= row.Term {
			t.Fatalf("status while %s leads and renews: %+v", first.id, row)
		}

		// Kill the leading casleader: its child must go too, and the other takes over.
		leader.signal(syscall.SIGKILL)
		leader.wait()
		waitFor(t, "the killed leader's child to be gone", func() bool { return processGone(first.pid) },
			func() string { return "child log:\n" + readFile(log) })
		second := waitChildLines(t, log, "start", 2)[1]
		if second.id != other || second.token <= first.token {
			t.Fatalf("after the kill: child %+v, want one of %s with a token above %d", second, other, first.token)
		}
		assertNoOverlap(t, log)
		if row := status(t, db, key); row.Leader != other || row.Term != second.token {
			t.Fatalf("status after the takeover: %+v", row)
		}

		// SIGTERM is forwarded; the child exits 0, run releases the lease and exits 0.
		procs[other].signal(syscall.SIGTERM)
		if code := procs[other].wait(); code != 0 {
			t.Fatalf("run after SIGTERM: exit %d, want the child's 0", code)
		}
		if row := status(t, db, key); !row.Released {
			t.Fatalf("status after the last leader exited: %+v", row)
		}
		assertNoOverlap(t, log)
	})
}

func TestRunForwardsSignalsAndExitsWithTheChildsCode(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		log := filepath.Join(dir, "child.log")
		key := testdb.Name(t)
		leader := startRun(t, db, key, "cand-A", dir, "CHILD_TERM_EXIT=7")
		first := waitChildLines(t, log, "start", 1)[0]

		// A follower that gets SIGTERM exits 128+15 without ever starting a child.
		follower := startRun(t, db, key, "cand-B", dir)
		waitFor(t, "the follower to see the leader", func() bool { return strings.Contains(follower.stderr.String(), "cand-A") })
		follower.signal(syscall.SIGTERM)
		if code := follower.wait(); code != exitSignal+int(syscall.SIGTERM) {
			t.Fatalf("follower after SIGTERM: exit %d, want %d", code, exitSignal+int(syscall.SIGTERM))
		}

		leader.signal(syscall.SIGTERM)
		if code := leader.wait(); code != 7 {
			t.Fatalf("run after SIGTERM: exit %d, want the child's 7", code)
		}
		sigs := waitChildLines(t, log, "signal", 1)
		if !strings.Contains(sigs[0].raw, "terminated") || sigs[0].token != first.token {
			t.Fatalf("the child logged %q", sigs[0].raw)
		}
		if starts := linesOf(readChildLog(t, log), "start"); len(starts) != 1 {
			t.Fatalf("children started: %v", starts)
		}
		// The leader gave the lease up: released, or handed to cand-B, which its
		// members reads may have shown live before cand-B left (a lease handed to a
		// candidate that has gone expires by itself a lease later).
		row := status(t, db, key)
		released := row.Released && row.Term == first.token
		handed := row.Leader == "cand-B" && row.HandoverTo == "cand-B" && row.Term > first.token
		if !released && !handed {
			t.Fatalf("status after the leader exited: %+v", row)
		}
	})
}

func TestRunResignsWhenTheChildExits(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		key := testdb.Name(t)
		if code := startRun(t, db, key, "cand-A", dir, "CHILD_EXIT=5").wait(); code != 5 {
			t.Fatalf("run: exit %d, want the child's 5", code)
		}
		if row := status(t, db, key); !row.Released || row.Term <= 0 || row.Version <= row.Term {
			t.Fatalf("status after the child exited: %+v", row)
		}
		// A command that does not exist: 127 before campaigning.
		r := runCL(t, nil, append(db.args(), "run", "--key", key, "--", filepath.Join(dir, "no-such-command"))...)
		if r.code != exitNotFound {
			t.Fatalf("run of a missing command: exit %d, want %d\n%s", r.code, exitNotFound, r.stderr)
		}
	})
}

func TestRunExitOnLossExits4(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		log := filepath.Join(dir, "child.log")
		key := testdb.Name(t)
		p := startRun(t, db, key, "cand-A", dir, "--exit-on-loss")
		first := waitChildLines(t, log, "start", 1)[0]
		must(t, append(db.args(), "resign", "--key", key)...)
		if code := p.wait(); code != exitLost {
			t.Fatalf("run --exit-on-loss after a resign request: exit %d, want %d", code, exitLost)
		}
		if sigs := linesOf(readChildLog(t, log), "signal"); len(sigs) != 1 || sigs[0].token != first.token {
			t.Fatalf("the child was not terminated with a signal:\n%s", readFile(log))
		}
		if !strings.Contains(p.stderr.String(), "leadership of") {
			t.Fatalf("run does not say why it exits:\n%s", p.stderr)
		}
	})
}

func TestResignMovesTheChildToAnotherCandidate(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		log := filepath.Join(dir, "child.log")
		key := testdb.Name(t)
		startRun(t, db, key, "cand-A", dir)
		startRun(t, db, key, "cand-B", dir)
		first := waitChildLines(t, log, "start", 1)[0]

		r := must(t, append(db.args(), "resign", "--key", key, "--wait", "--lease", testLease.String())...)
		if !strings.Contains(r.stdout, "asked "+strconv.Quote(first.id)) || !strings.Contains(r.stdout, " leads ") {
			t.Fatalf("resign --wait says:\n%s", r.stdout)
		}
		second := waitChildLines(t, log, "start", 2)[1]
		if second.id == first.id || second.token <= first.token {
			t.Fatalf("after the resign: child %+v, first %+v", second, first)
		}
		sigs := linesOf(readChildLog(t, log), "signal")
		if len(sigs) != 1 || sigs[0].token != first.token {
			t.Fatalf("the first child was not terminated:\n%s", readFile(log))
		}
		assertNoOverlap(t, log)
		if row := status(t, db, key); row.Leader != second.id || row.StepDownRequested {
			t.Fatalf("status after the resign: %+v", row)
		}

		// Errors: no such election (1).
		if r := runCL(t, nil, append(db.args(), "resign", "--key", "no-such-key")...); r.code != exitFailure || !strings.Contains(r.stderr, "no election") {
			t.Fatalf("resign of a missing key: exit %d\n%s", r.code, r.stderr)
		}
	})
}

func TestHandoverMovesTheChildToTheNamedCandidate(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		log := filepath.Join(dir, "child.log")
		key := testdb.Name(t)
		ids := []string{"cand-A", "cand-B", "cand-C"}
		for _, id := range ids {
			startRun(t, db, key, id, dir)
		}
		first := waitChildLines(t, log, "start", 1)[0]
		var to string
		for _, id := range ids {
			if id != first.id {
				to = id // the last of the others: not simply the next one
			}
		}
		r := must(t, append(db.args(), "handover", "--key", key, "--to", to, "--wait")...)
		if !strings.Contains(r.stdout, "asked "+strconv.Quote(first.id)) || !strings.Contains(r.stdout, strconv.Quote(to)+" leads") {
			t.Fatalf("handover --wait says:\n%s", r.stdout)
		}
		second := waitChildLines(t, log, "start", 2)[1]
		if second.id != to || second.token <= first.token {
			t.Fatalf("after the handover to %s: child %+v, first %+v", to, second, first)
		}
		assertNoOverlap(t, log)

		// Handing over to the leader itself is a no-op.
		r = must(t, append(db.args(), "handover", "--key", key, "--to", to)...)
		if !strings.Contains(r.stdout, "already leads") {
			t.Fatalf("handover to the leader says:\n%s", r.stdout)
		}
	})
}

func TestHandoverToAnAbsentCandidateFails(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "sqlite")
	migrate(t, db)
	dir := t.TempDir()
	log := filepath.Join(dir, "child.log")
	key := testdb.Name(t)
	startRun(t, db, key, "cand-A", dir)
	startRun(t, db, key, "cand-B", dir)
	first := waitChildLines(t, log, "start", 1)[0]
	// The leader hands the lease to nobody; it expires and a running candidate wins.
	r := runCL(t, nil, append(db.args(), "handover", "--key", key, "--to", "nobody", "--wait")...)
	if r.code != exitFailure || !strings.Contains(r.stderr, "not nobody") {
		t.Fatalf("handover to an absent candidate: exit %d, want %d\n%s%s", r.code, exitFailure, r.stdout, r.stderr)
	}
	second := waitChildLines(t, log, "start", 2)[1]
	if second.token <= first.token {
		t.Fatalf("after the failed handover: child %+v, first %+v", second, first)
	}
	assertNoOverlap(t, log)
}

func TestDemoShowsATakeoverAndAHandover(t *testing.T) {
	t.Parallel()
	r := runCL(t, nil, "demo")
	if r.code != 0 {
		t.Fatalf("demo: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	tokens := regexp.MustCompile(`fencing token (\d+) -> (\d+)`).FindAllStringSubmatch(r.stdout, -1)
	if !strings.Contains(r.stdout, "takeover:") || !strings.Contains(r.stdout, "graceful handover:") || len(tokens) != 2 {
		t.Fatalf("demo output lacks the takeover or the handover:\n%s", r.stdout)
	}
	for _, m := range tokens {
		from, _ := strconv.Atoi(m[1])
		to, _ := strconv.Atoi(m[2])
		if to <= from {
			t.Fatalf("the fencing token did not increase (%d -> %d):\n%s", from, to, r.stdout)
		}
	}
	m := regexp.MustCompile(`in (/\S+)/demo\.db`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("demo does not say where its database is:\n%s", r.stdout)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Fatalf("demo left its temporary directory %s behind (%v)", m[1], err)
	}
}

func TestRunKillsAChildThatIgnoresSIGTERMAfterTheGrace(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		log := filepath.Join(dir, "child.log")
		key := testdb.Name(t)
		procs := map[string]*proc{
			"cand-A": startRun(t, db, key, "cand-A", dir, "CHILD_IGNORE_TERM=1"),
			"cand-B": startRun(t, db, key, "cand-B", dir, "CHILD_IGNORE_TERM=1"),
		}
		first := waitChildLines(t, log, "start", 1)[0]
		must(t, append(db.args(), "resign", "--key", key)...)
		second := waitChildLines(t, log, "start", 2)[1]
		if second.id == first.id || second.token <= first.token {
			t.Fatalf("after the resign: child %+v, first %+v", second, first)
		}
		if !processGone(first.pid) {
			t.Fatalf("the first child (pid %d) still runs after the next one started", first.pid)
		}
		assertNoOverlap(t, log)
		if sigs := linesOf(readChildLog(t, log), "signal"); len(sigs) != 1 || sigs[0].token != first.token {
			t.Fatalf("the first child did not get SIGTERM first:\n%s", readFile(log))
		}
		if !strings.Contains(procs[first.id].stderr.String(), "sending SIGKILL") {
			t.Fatalf("run does not say that it sent SIGKILL:\n%s", procs[first.id].stderr)
		}
	})
}

func TestRunFrozenLeaderLosesItsChildBeforeTheTakeover(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		log := filepath.Join(dir, "child.log")
		key := testdb.Name(t)
		procs := map[string]*proc{
			"cand-A": startRun(t, db, key, "cand-A", dir),
			"cand-B": startRun(t, db, key, "cand-B", dir),
		}
		first := waitChildLines(t, log, "start", 1)[0]
		frozen := procs[first.id]
		other := "cand-A"
		if first.id == "cand-A" {
			other = "cand-B"
		}
		// Freeze the leading casleader (not its child): it can neither renew nor stop
		// the child. Its supervisor must kill the child before the lease can pass.
		frozen.freezeOutsideWrite()
		second := waitChildLines(t, log, "start", 2)[1]
		if second.id != other || second.token <= first.token {
			t.Fatalf("after freezing %s: child %+v, first %+v", first.id, second, first)
		}
		if !processGone(first.pid) {
			t.Fatalf("the frozen leader's child (pid %d) still runs after the next one started", first.pid)
		}
		assertNoOverlap(t, log)

		// Thawed, the old leader finds its lease gone and follows; it does not exit.
		frozen.signal(syscall.SIGCONT)
		waitFor(t, "the thawed leader to step down", func() bool {
			return strings.Contains(frozen.stderr.String(), "leadership ended")
		}, func() string { return frozen.stderr.String() })
		time.Sleep(500 * time.Millisecond)
		select {
		case <-frozen.done:
			t.Fatalf("the thawed leader exited with %d instead of following", frozen.code)
		default:
		}
		if row := status(t, db, key); row.Leader != other || row.Term != second.token {
			t.Fatalf("status after the thaw: %+v", row)
		}
		assertNoOverlap(t, log)
		if starts := linesOf(readChildLog(t, log), "start"); len(starts) != 2 {
			t.Fatalf("children started: %v", starts)
		}
	})
}

func TestStatusShowsAnInvalidRowAndTheOthers(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "sqlite")
	migrate(t, db)
	path := strings.TrimPrefix(db.dsn, "sqlite://")
	sq, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	now := time.Now().UnixMicro()
	for _, q := range []string{
		`INSERT INTO ` + db.table + ` VALUES ('a-good', 3, 'x', 2, ?, '', 0, 0, '', ?, ?)`,
		`INSERT INTO ` + db.table + ` VALUES ('b-bad', 0, 'x', 2, ?, '', 0, 0, '', ?, ?)`, // version 0: never written
	} {
		if _, err := sq.Exec(q, now, now, now); err != nil {
			t.Fatal(err)
		}
	}
	r := runCL(t, nil, append(db.args(), "status")...)
	if r.code != exitDatabase || !strings.Contains(r.stdout, "a-good") || !strings.Contains(r.stdout, "INVALID ROW") || !strings.Contains(r.stderr, "fix or delete") {
		t.Fatalf("status with an invalid row: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runCL(t, nil, append(db.args(), "status", "--json", "--key", "b-bad")...)
	var row statusRow
	if err := json.Unmarshal([]byte(r.stdout), &row); err != nil || row.Invalid == "" {
		t.Fatalf("status --json of the invalid row: %q (%v)", r.stdout, err)
	}
}

func TestStatusQuotesKeysAndIDsThatCouldBreakTheTable(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "sqlite")
	migrate(t, db)
	sq, err := sqlite.Open(strings.TrimPrefix(db.dsn, "sqlite://"))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	now := time.Now().UnixMicro()
	const evilKey, evilID = "evil\x1b[2J\nkey\tx", "id with\x07bell"
	if _, err := sq.Exec(`INSERT INTO `+db.table+` VALUES (?, 3, ?, 2, ?, ?, 1, 0, '', ?, ?)`, evilKey, evilID, now, "to\rx", now, now); err != nil {
		t.Fatal(err)
	}
	r := runCL(t, nil, append(db.args(), "status")...)
	if r.code != 0 {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, c := range r.stdout {
		if c < ' ' && c != '\n' || c == 0x7f {
			t.Fatalf("status prints the control character %q:\n%q", c, r.stdout)
		}
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], strconv.Quote(evilKey)) ||
		!strings.Contains(lines[1], strconv.Quote(evilID)) || !strings.Contains(lines[1], strconv.Quote("to\rx")) {
		t.Fatalf("status does not show the key, leader and handover target quoted, one line each:\n%s", r.stdout)
	}
	// JSON carries them exactly.
	r = must(t, append(db.args(), "status", "--json")...)
	var rows []statusRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 || rows[0].Key != evilKey || rows[0].Leader != evilID {
		t.Fatalf("status --json: %q (%v)", r.stdout, err)
	}
}
