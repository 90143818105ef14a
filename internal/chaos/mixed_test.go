//go:build linux

package chaos_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/chaos"
	"github.com/casleader/casleader/internal/testdb"
)

// report logs a run's summary and appends it to CASLEADER_CHAOS_REPORT when set.
func report(t *testing.T, summary string) {
	t.Helper()
	t.Log(summary)
	if path := os.Getenv(envReport); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = f.WriteString(summary + "\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
}

// eachCluster runs run for Electors and for groups of keys keys, on MariaDB and
// PostgreSQL, side by side.
func eachCluster(t *testing.T, keys int, run func(t *testing.T, mode string, keys int, cfg chaos.Config)) {
	if os.Getenv(envRun) == "" && os.Getenv(envSoak) == "" {
		t.Skipf("the fault suite runs only when asked: %s=1 go test -race ./internal/chaos/", envRun)
	}
	for _, mode := range []struct {
		name string
		keys int
	}{{"Elector", 0}, {"Group", keys}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			for _, db := range databases {
				t.Run(db.name, func(t *testing.T) {
					t.Parallel()
					tm := suiteTimings(false)
					run(t, mode.name+" "+db.name, mode.keys, chaos.Config{
						Dialect: db.dialect, DSN: db.dsn(t), Table: testdb.Name(t), Candidates: 3, Keys: mode.keys,
						Lease: tm.lease, Renew: tm.renew, Heartbeat: tm.heartbeat, Poll: tm.poll, Slack: tm.slack,
						Seed: uint64(time.Now().UnixNano()), Logf: t.Logf,
					})
				})
			}
		})
	}
}

// TestMixedTimings runs the fault schedule (kills, freezes past the lease, cuts,
// refusals, slow links, lost replies, rolled-back rows) on clusters whose
// candidates run with two lease settings, as in a rolling deploy that changes
// them: the candidate in slot 1 with half the lease (and so half the renew
// deadline, heartbeat and poll interval) of the other two. A follower of the short
// lease must never take over a leader of the long one before the long lease has
// passed (it judges expiry by the lease the row records), and a leader of the
// short lease is replaced as soon as its own lease has passed: no belief overlap,
// tokens in order, a leader back within the longest lease's bound after each
// fault. A follower that judged by its own lease would take over a cut-off leader
// of the long lease while that leader still trusts its term (the checker reports
// the overlap).
func TestMixedTimings(t *testing.T) {
	trials := 8
	if testing.Short() {
		trials = 4
	}
	var kinds []string
	if v := os.Getenv(envKinds); v != "" {
		kinds = strings.Split(v, ",")
	}
	eachCluster(t, 10, func(t *testing.T, name string, keys int, cfg chaos.Config) {
		cfg.Leases = []time.Duration{0, cfg.Lease / 2, 0}
		cfg.Trials, cfg.Kinds, cfg.ClockOffsets = trials, kinds, true
		t.Logf("seed %d (%s=%d repeats the schedule)", cfg.Seed, envSeed, cfg.Seed)
		c, err := chaos.New(cfg)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		start := time.Now()
		rep, err := c.Run(context.Background())
		require.NoError(t, err)
		report(t, fmt.Sprintf("%s mixed-timing run: %v, seed %d, leases %v (slot 1) and %v, keys %d\n%s",
			name, time.Since(start).Round(time.Second), cfg.Seed, cfg.Leases[1], cfg.Lease, max(keys, 1), rep))
		if !rep.OK() {
			dumpHistory(t, c.History)
			t.Errorf("the history has %d violations:\n%s", len(rep.Violations), rep)
		}
		assert.NotZero(t, rep.ActionsChecked, "no fenced action was performed")
		assert.Equal(t, max(keys, 1), rep.Keys, "keys checked")
	})
}

// TestHandoverToDuplicateID runs two candidate processes started with one ID
// beside a third of its own ID, which leads; the leader is asked (through the
// store, as `casleader handover --to` does) to hand every key over to the shared
// ID, then the keys are handed back, again and again. At most one process acts in
// a term: no term is believed by two processes, beliefs never overlap, tokens stay
// in order, and each round one process of the shared ID stops with ErrDuplicateID
// without acting (a handover that both adopted, as before the target claimed it
// with an election, gives two believers of one term).
//
// Its waits do not count the time the harness's probe found the database stalled
// (casleadertest.Stall), so a machine loaded past its cores lengthens them instead
// of failing the run. For the same rule in-process, under testing/synctest, see
// TestHandoverToADuplicatedIDGivesOneActor and the group's
// TestHandoverToADuplicatedIDGivesOneActorPerKey.
func TestHandoverToDuplicateID(t *testing.T) {
	rounds := 3
	eachCluster(t, 5, func(t *testing.T, name string, keys int, cfg chaos.Config) {
		cfg.IDs = []string{"", "twin", "twin"}
		c, err := chaos.New(cfg)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		start := time.Now()
		rep, hr, err := c.RunHandovers(context.Background(), rounds)
		require.NoError(t, err)
		report(t, fmt.Sprintf("%s handover to a duplicated ID: %v, seed %d, L=%v, keys %d: %d rounds, %d processes stopped with ErrDuplicateID, %d terms believed by two processes, time to claim %v\n%s",
			name, time.Since(start).Round(time.Second), cfg.Seed, cfg.Lease, max(keys, 1), hr.Rounds, hr.Refusals, hr.SharedTerms, hr.ToClaim, rep))
		if !rep.OK() {
			dumpHistory(t, c.History)
			t.Errorf("the history has %d violations:\n%s", len(rep.Violations), rep)
		}
		assert.Zero(t, hr.SharedTerms, "terms believed by two processes")
		assert.Zero(t, rep.MaxOverlap, "belief overlap")
		assert.Equal(t, rounds, hr.Rounds)
		assert.GreaterOrEqual(t, hr.Refusals, rounds, "a process of the shared ID stops with ErrDuplicateID each round")
		assert.NotZero(t, rep.ActionsChecked, "no fenced action was performed")
	})
}
