//go:build linux

package chaos_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/chaos"
	"github.com/casleader/casleader/internal/testdb"
)

// envBalancedKeys sets the number of keys of TestBalancedGroups (default 1,000).
const envBalancedKeys = "CASLEADER_CHAOS_BALANCED_KEYS"

// envBalanced=1 runs TestBalancedGroups. It is not part of the suite's default run:
// its candidate processes sample every key's belief every millisecond, which loaded
// a 2-core machine to a load average of 70 beside the other scenarios and stalled
// the database for minutes. CI runs it alone after the suite, one database at a
// time (-parallel 1): both at once over 1,000 keys loaded 2 cores to 17 and missed
// the fairness bounds (no safety violation).
const envBalanced = "CASLEADER_CHAOS_BALANCED"

// TestBalancedGroups runs four candidate processes of a balanced group
// (GroupConfig.Balance) over 1,000 keys on MariaDB and PostgreSQL, through a random
// sequence of joins, graceful leaves, kills, pauses past the lease and network
// cuts (casleadertest.ProcessCluster.RunBalanced), and checks the history per key
// (no belief overlap outside a pause, tokens in order, no stale action, a leader
// back within the liveness bound) and, after each change of the candidates that
// take a share, a fair spread (every key led by one of them, each within one key
// of N/M) within the bound the design gives that change (RunBalanced states it:
// 2L + P + slack for a candidate lost, a few members periods of L/2 + P + slack
// for one gained or gone gracefully).
func TestBalancedGroups(t *testing.T) {
	if os.Getenv(envBalanced) != "1" {
		t.Skipf("runs only when asked, alone: %s=1 go test -race -run TestBalancedGroups ./internal/chaos/", envBalanced)
	}
	keys, events := 1000, 10
	if v := os.Getenv(envBalancedKeys); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "%s=%q", envBalancedKeys, v)
		require.Positive(t, n, "%s=%q: want a number of keys", envBalancedKeys, v)
		keys = n
	}
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			tm := suiteTimings(false)
			seed := uint64(time.Now().UnixNano())
			if v := os.Getenv(envSeed); v != "" {
				s, err := strconv.ParseUint(v, 10, 64)
				require.NoError(t, err, "%s=%q", envSeed, v)
				seed = s
			}
			t.Logf("seed %d (%s=%d repeats the schedule)", seed, envSeed, seed)
			c, err := chaos.New(chaos.Config{
				Dialect: db.dialect, DSN: db.dsn(t), Table: testdb.Name(t),
				Candidates: 4, Keys: keys, Balance: true,
				Lease: tm.lease, Renew: tm.renew, Heartbeat: tm.heartbeat, Poll: tm.poll, Slack: tm.slack,
				Seed: seed, ClockOffsets: true, Logf: t.Logf,
			})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			start := time.Now()
			rep, err := c.RunBalanced(context.Background(), events)
			require.NoError(t, err)
			report(t, fmt.Sprintf("%s balanced groups: %v, seed %d, L=%v, 4 candidates over %d keys, %d events\n%s",
				db.name, time.Since(start).Round(time.Second), seed, tm.lease, keys, events, rep))
			if !rep.OK() {
				dumpHistory(t, c.History)
				t.Errorf("the history has %d violations:\n%s", len(rep.Violations), rep)
			}
			assert.Equal(t, keys, rep.Keys, "keys checked")
			assert.Equal(t, events, rep.Trials, "events applied")
			assert.NotZero(t, rep.ActionsChecked, "no fenced action was performed")
			assert.Zero(t, rep.MaxOverlap, "belief overlap outside a pause")
			assert.Len(t, c.History.Shares, len(rep.Fair)+rep.FairUnjudged+countProp(rep.Violations, "fairness"))
			assert.NotEmpty(t, rep.Fair, "no fair spread was measured")
		})
	}
}

func countProp(vs []chaos.Violation, prop string) int {
	n := 0
	for _, v := range vs {
		if v.Property == prop {
			n++
		}
	}
	return n
}
