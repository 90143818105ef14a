//go:build linux

package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/chaos"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/schema"
)

// Environment variables of the chaos suite.
const (
	// envSoak runs each database's suite for this long (a Go duration, e.g. 20m)
	// instead of the short CI run, and prints the summary.
	envSoak = "CASLEADER_SOAK"
	// envRun runs the short suite (10 trials per cluster). It is off in the
	// ordinary test run: the suite's liveness bounds need the machine's cores for its
	// own candidates, not shared with every other package's tests and a CPU hog.
	// .ci/run runs it as a step of its own.
	envRun = "CASLEADER_CHAOS"
	// envSeed fixes the fault schedule's seed (default: from the clock, logged).
	envSeed = "CASLEADER_CHAOS_SEED"
	// envReport, when set, names a file the summaries are appended to.
	envReport = "CASLEADER_CHAOS_REPORT"
	// envKinds restricts the faults on the leader to a comma-separated list of kinds
	// (e.g. rollback-row,stop-leader).
	envKinds = "CASLEADER_CHAOS_KINDS"
	// envGroupKeys sets the number of keys of each group candidate (default 100 in a
	// soak, 20 otherwise).
	envGroupKeys = "CASLEADER_CHAOS_GROUP_KEYS"
	// envDump, when set, writes every run's history as JSON to a temporary file.
	envDump = "CASLEADER_CHAOS_DUMP"
	// envRecheck names a history written by envDump for TestRecheck to check again.
	envRecheck = "CASLEADER_CHAOS_RECHECK"
)

func TestMain(m *testing.M) {
	if os.Getenv(chaos.EnvChild) == "1" {
		os.Exit(chaos.Child())
	}
	os.Exit(m.Run())
}

// timings are the suite's lease, renew deadline, heartbeat, poll and liveness slack.
type timings struct{ lease, renew, heartbeat, poll, slack time.Duration }

// soakTimings are those of a soak (CASLEADER_CHAOS_SOAK): L = 1.5 s, R = 900 ms,
// H = 150 ms, P = 300 ms. The liveness slack covers the idle-transaction timeout
// (1 s) that frees the row lock of a frozen or cut-off leader's guarded transaction,
// and round trips.
var soakTimings = timings{1500 * time.Millisecond, 900 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 3 * time.Second}

// suiteTimings returns the timings of a run: a soak's, or twice those in the
// ordinary test run (the README's command and CI), which shares two cores with
// every other package's tests, built with -race: there a batched statement can take
// longer than 900 ms, and a liveness bound of L + 3 s is a race with the scheduler,
// not a property of the protocol.
func suiteTimings(soak bool) timings {
	if soak {
		return soakTimings
	}
	t := soakTimings
	return timings{2 * t.lease, 2 * t.renew, 2 * t.heartbeat, 2 * t.poll, 2 * t.slack}
}

func TestChaos(t *testing.T) {
	trials := 10
	if testing.Short() {
		trials = 4
	}
	var soak time.Duration
	if v := os.Getenv(envSoak); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "%s=%q", envSoak, v)
		soak = d
	}
	if soak == 0 && os.Getenv(envRun) == "" {
		t.Skipf("the fault suite runs only when asked, on a machine not busy with other tests: %s=1 go test -race ./internal/chaos/ (CI runs it as a step of its own), or %s=20m for a soak", envRun, envSoak)
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envSeed); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s=%q", envSeed, v)
		seed = s
	}
	var kinds []string
	if v := os.Getenv(envKinds); v != "" {
		kinds = strings.Split(v, ",")
	}
	groupKeys := 20
	if soak > 0 {
		groupKeys = 100
	}
	if v := os.Getenv(envGroupKeys); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "%s=%q", envGroupKeys, v)
		require.Positive(t, n, "%s=%q: want a number of keys", envGroupKeys, v)
		groupKeys = n
	}
	// Every run at once: an Elector per candidate, and a group per candidate.
	for _, mode := range []struct {
		name string
		keys int // 0: an Elector on one key
	}{
		{"Elector", 0},
		{"Group", groupKeys},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			for _, db := range databases {
				t.Run(db.name, func(t *testing.T) {
					t.Parallel()
					chaosRun(t, db.name, db.dialect, db.dsn(t), mode.keys, trials, soak, seed, kinds)
				})
			}
		})
	}
}

var databases = []struct {
	name    string
	dialect schema.Dialect
	dsn     func(testing.TB) string
}{
	{"MariaDB", schema.MySQL, testdb.MySQLDSN},
	{"PostgreSQL", schema.Postgres, testdb.PostgresDSN},
}

// chaosRun runs one cluster (of Electors, or of groups over keys keys) and checks
// its history.
func chaosRun(t *testing.T, name string, dialect schema.Dialect, dsn string, keys, trials int, soak time.Duration, seed uint64, kinds []string) {
	if keys > 0 {
		name = fmt.Sprintf("%s, groups of %d keys,", name, keys)
	}
	t.Logf("seed %d (%s=%d repeats the schedule)", seed, envSeed, seed)
	tm := suiteTimings(soak > 0)
	c, err := chaos.New(chaos.Config{
		Dialect: dialect, DSN: dsn, Table: testdb.Name(t),
		Candidates: 3, Keys: keys,
		Lease: tm.lease, Renew: tm.renew, Heartbeat: tm.heartbeat, Poll: tm.poll, Slack: tm.slack,
		Trials: trials, Duration: soak, Seed: seed, Kinds: kinds, ClockOffsets: true,
		Logf: t.Logf,
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := context.Background()
	start := time.Now()
	rep, err := c.Run(ctx)
	require.NoError(t, err)
	summary := fmt.Sprintf("%s chaos run: %v, seed %d, L=%v R=%v H=%v P=%v slack=%v\n%s",
		name, time.Since(start).Round(time.Second), seed, tm.lease, tm.renew, tm.heartbeat, tm.poll, tm.slack, rep)
	report(t, summary)
	require.NotZero(t, rep.ActionsChecked, "no fenced action was performed")
	require.Equal(t, max(keys, 1), rep.Keys, "keys checked")
	if os.Getenv("CI") != "" {
		// CI runs as root on a kernel with time namespaces: the clock-offset
		// fault must really have run there.
		require.Greater(t, slices.Max(rep.ClockOffsets), time.Hour-time.Nanosecond, "no candidate ran with an offset clock")
	}
	if !rep.OK() || os.Getenv(envDump) != "" {
		dumpHistory(t, c.History)
	}
	if !rep.OK() {
		t.Errorf("the history has %d violations:\n%s", len(rep.Violations), rep)
	}
}

// dumpHistory writes the run's history as JSON to a file of the test's temporary
// directory's parent (kept after the test) for a closer look.
func dumpHistory(t *testing.T, h chaos.History) {
	f, err := os.CreateTemp("", "casleader-chaos-*.json")
	if err != nil {
		t.Logf("dump history: %v", err)
		return
	}
	defer f.Close()
	if err := json.NewEncoder(f).Encode(h); err != nil {
		t.Logf("dump history: %v", err)
		return
	}
	t.Logf("history written to %s", f.Name())
}

// TestRecheck checks a dumped history again (CASLEADER_CHAOS_RECHECK=file), with the
// suite's bounds: for a closer look at a run, or after the checker changed.
func TestRecheck(t *testing.T) {
	path := os.Getenv(envRecheck)
	if path == "" {
		t.Skipf("%s is not set: nothing to recheck", envRecheck)
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var h chaos.History
	require.NoError(t, json.Unmarshal(b, &h))
	tm := suiteTimings(os.Getenv(envSoak) != "")
	rep := chaos.Check(h, chaos.Bounds{Lease: tm.lease, Renew: tm.renew, Poll: tm.poll, Slack: tm.slack})
	t.Logf("%s:\n%s", path, rep)
}

// primary reports whether host:port of cfg's server answers as a primary.
func primary(t *testing.T, cfg *pgconn.Config, host string, port uint16) bool {
	t.Helper()
	c := cfg.Copy()
	c.Host, c.Port, c.Fallbacks, c.ValidateConnect = host, port, nil, nil
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, c)
	if err != nil {
		return false // down: not the primary
	}
	defer conn.Close(context.Background())
	res, err := conn.Exec(ctx, "SELECT pg_is_in_recovery()").ReadAll()
	require.NoError(t, err)
	return string(res[0].Rows[0][0]) == "f"
}

// TestMultiHostDSNAfterASwitchover runs a short fault run (leader kills) on the
// multi-host DSN of .ci/pgsync's primary + synchronous standby with the standby
// (or a stopped server) listed first, as a DSN reads after a switchover that made
// its first host a replica: candidates must still find the primary (target_session_attrs) through
// their proxies, so the run has leaders and fenced actions, and no violation.
func TestMultiHostDSNAfterASwitchover(t *testing.T) {
	if os.Getenv(envRun) == "" && os.Getenv(envSoak) == "" {
		t.Skipf("the fault suite runs only when asked: %s=1", envRun)
	}
	dsn, _ := testdb.PgSyncDSN(t)
	pc, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)
	require.NotEmpty(t, pc.Fallbacks, "%s lists the primary and the standby", testdb.EnvPgSync)
	hosts := []string{
		net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port))),
		net.JoinHostPort(pc.Fallbacks[0].Host, strconv.Itoa(int(pc.Fallbacks[0].Port))),
	}
	// The primary last: the other host is a standby, or down (after the failover
	// test promoted the standby, the old primary stays stopped).
	if primary(t, pc, pc.Host, pc.Port) {
		hosts[0], hosts[1] = hosts[1], hosts[0]
	}
	swapped := strings.Replace(dsn, hosts[1]+","+hosts[0], hosts[0]+","+hosts[1], 1)
	require.True(t, strings.Contains(swapped, hosts[0]+","+hosts[1]), "hosts written as host:port,host:port in %s", testdb.EnvPgSync)
	t.Logf("hosts in the order %v (the primary last)", hosts)
	tm := suiteTimings(false)
	c, err := chaos.New(chaos.Config{
		Dialect: schema.Postgres, DSN: swapped, Table: testdb.Name(t), Candidates: 3,
		Lease: tm.lease, Renew: tm.renew, Heartbeat: tm.heartbeat, Poll: tm.poll, Slack: tm.slack,
		Trials: 3, Seed: uint64(time.Now().UnixNano()), Kinds: []string{chaos.KillLeader, chaos.CutLeader},
		Logf: t.Logf,
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	rep, err := c.Run(context.Background())
	require.NoError(t, err)
	t.Logf("replica listed first:\n%s", rep)
	require.NotZero(t, rep.ActionsChecked, "no fenced action was performed: no candidate reached the primary")
	if !rep.OK() {
		t.Errorf("the history has %d violations:\n%s", len(rep.Violations), rep)
	}
}
