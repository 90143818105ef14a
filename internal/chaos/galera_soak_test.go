//go:build linux

package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/chaos"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/schema"
)

// envGaleraSoak runs TestGaleraSoak for this long (a Go duration, e.g. 20m).
const envGaleraSoak = "CASLEADER_GALERA_SOAK"

// TestGaleraSoak is a soak on the Galera cluster of CASLEADER_GALERA_DSNS, which
// must be .ci/galera's on this machine: one candidate per node (Electors, the
// soak's timings), the fault suite's faults on the candidates, and meanwhile node 2
// or 3 killed (SIGKILL) and restarted (a state transfer) in a loop, one at a time
// so that the cluster keeps its quorum. Node 1 stays up: the harness reads the
// history through it. The safety properties must hold (no two leaders, fenced
// writes in token order); liveness violations are reported, since a leader's
// node dying leaves its candidate without a database until the node is back, and
// the liveness bound has 15 s more slack: the surviving nodes stall commits until
// they have evicted a killed one.
func TestGaleraSoak(t *testing.T) {
	v := os.Getenv(envGaleraSoak)
	if v == "" {
		t.Skipf("%s=20m runs a soak on the Galera cluster of %s (.ci/galera on this machine), killing nodes", envGaleraSoak, testdb.EnvGalera)
	}
	soak, err := time.ParseDuration(v)
	require.NoError(t, err, "%s=%q", envGaleraSoak, v)
	dsns := testdb.GaleraDSNs(t)
	require.Len(t, dsns, 3, "three nodes")
	seed := uint64(time.Now().UnixNano())
	tm := suiteTimings(true)
	// A node that dies stalls the others' commits until they evict it
	// (.ci/galera: evs.suspect_timeout 5 s, evs.inactive_timeout 10 s): the
	// liveness bound waits for that too.
	tm.slack += 15 * time.Second
	c, err := chaos.New(chaos.Config{
		Dialect: schema.MySQL, DSN: dsns[0], Nodes: dsns, Table: testdb.Name(t), Candidates: 3,
		Lease: tm.lease, Renew: tm.renew, Heartbeat: tm.heartbeat, Poll: tm.poll, Slack: tm.slack,
		Duration: soak, Seed: seed, ClockOffsets: true,
		Logf: t.Logf,
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	// Node kills, until the run ends.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var kills int
	var downs []time.Duration // how long each killed node took to be synced again
	var nodeErr error
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 1))
		for ctx.Err() == nil {
			wait := 10*time.Second + time.Duration(rng.Int64N(int64(20*time.Second)))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			n := fmt.Sprint(2 + rng.IntN(2))
			killed := time.Now()
			if out, err := exec.Command("bash", "../../.ci/galera", "kill", n).CombinedOutput(); err != nil {
				nodeErr = fmt.Errorf("kill node %s: %v\n%s", n, err, out)
				return
			}
			kills++
			t.Logf("%s node %s killed", time.Now().Format("15:04:05.000"), n)
			time.Sleep(2*time.Second + time.Duration(rng.Int64N(int64(5*time.Second))))
			if out, err := exec.Command("bash", "../../.ci/galera", "join", n).CombinedOutput(); err != nil {
				nodeErr = fmt.Errorf("restart node %s: %v\n%s", n, err, out)
				return
			}
			downs = append(downs, time.Since(killed))
			t.Logf("%s node %s synced again, %v after the kill", time.Now().Format("15:04:05.000"), n, downs[len(downs)-1].Round(time.Second))
		}
	})
	start := time.Now()
	rep, err := c.Run(context.Background())
	stop()
	wg.Wait()
	require.NoError(t, err)
	require.NoError(t, nodeErr)

	byProperty := map[string]int{}
	for _, v := range rep.Violations {
		byProperty[v.Property]++
	}
	slices.Sort(downs)
	t.Logf("Galera soak: %v, seed %d, L=%v R=%v H=%v P=%v slack=%v; %d node kills (node back and synced after %v..%v)\n%s",
		time.Since(start).Round(time.Second), seed, tm.lease, tm.renew, tm.heartbeat, tm.poll, tm.slack,
		kills, first(downs), last(downs), rep)
	require.NotZero(t, rep.ActionsChecked, "no fenced action was performed")
	require.Zero(t, byProperty["token-order"], "fenced writes went back in token")
	require.Zero(t, byProperty["belief-overlap"], "two leaders at once")
	if !rep.OK() {
		dumpHistory(t, c.History)
	}
}

func first(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[0].Round(time.Second)
}

func last(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[len(d)-1].Round(time.Second)
}
