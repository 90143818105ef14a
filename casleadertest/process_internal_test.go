//go:build linux

package casleadertest

import (
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/schema"
)

// On SQLite the schedule draws only faults on processes and rows, for the leader
// and for followers alike: there is no link to cut, slow or reset.
func TestSQLiteScheduleLeavesNetworkFaultsOut(t *testing.T) {
	for _, dialect := range []schema.Dialect{schema.SQLite, schema.MySQL} {
		c := &ProcessCluster{cfg: ProcessConfig{Dialect: dialect}, rng: rand.New(rand.NewPCG(1, 2))}
		leader := &proc{id: "leader", cmd: &exec.Cmd{}}
		c.slots = []*proc{leader, {id: "f1", cmd: &exec.Cmd{}}, {id: "f2", cmd: &exec.Cmd{}}}
		seen := map[string]bool{}
		for range 2000 {
			for _, p := range c.pick(leader) {
				seen[p.kind] = true
			}
		}
		var network []string
		for k := range seen {
			if networkFaults[k] {
				network = append(network, k)
			}
		}
		if dialect == schema.SQLite {
			assert.Empty(t, network, "network faults drawn on SQLite")
			for _, k := range []string{KillLeader, StopLeader, RollbackRow, KillFollower, StopFollower} {
				assert.True(t, seen[k], "%s never drawn on SQLite", k)
			}
		} else {
			assert.Len(t, network, len(networkFaults), "every network fault is drawn on %s", dialect)
		}
	}
}

// Naming a network fault for SQLite is an error that says why, before anything
// is opened or started.
func TestSQLiteRefusesNetworkFaults(t *testing.T) {
	_, err := NewProcessCluster(ProcessConfig{
		Dialect: schema.SQLite, DSN: filepath.Join(t.TempDir(), "db"), Table: "t",
		Lease: 2e9, Renew: 1e9, Heartbeat: 2e8, Poll: 4e8,
		Kinds: []string{KillLeader, CutLeader, SlowFollower},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[cut-leader slow-follower]")
	assert.Contains(t, err.Error(), "do not apply to SQLite")
}

// TestEndedByTellsADeathBySIGTERM: the exit of a candidate that the end of a
// run's SIGTERM reached before it set up its handler is expected; any other is not.
func TestEndedByTellsADeathBySIGTERM(t *testing.T) {
	t.Parallel()
	assert.True(t, endedBy(exec.Command("/bin/sh", "-c", "kill -TERM $$").Run(), syscall.SIGTERM), "killed by SIGTERM")
	assert.False(t, endedBy(exec.Command("/bin/sh", "-c", "kill -KILL $$").Run(), syscall.SIGTERM), "killed by SIGKILL")
	assert.False(t, endedBy(exec.Command("/bin/sh", "-c", "exit 1").Run(), syscall.SIGTERM), "exit status 1")
	assert.False(t, endedBy(nil, syscall.SIGTERM), "no error")
}
