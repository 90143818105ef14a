package group_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
)

// TestPreferredLeaderForEveryKey: a group of low priority that leads every key
// hands each key over to a group of higher priority once that group has been live
// for a full lease (one batched members read per lease), one handover per
// key, and the keys stay with the preferred group.
func TestPreferredLeaderForEveryKey(t *testing.T) {
	t.Parallel()
	for _, d := range membersDatabases() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			cs, _, _ := openMembers(t, d.open)
			st := cs.membersStore // the store itself: it reads the members of many keys
			ks := keys(3)
			var mu sync.Mutex
			var buf bytes.Buffer
			logger := slog.New(slog.NewTextHandler(lockedBuffer{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelInfo}))
			handed := func() int {
				mu.Lock()
				defer mu.Unlock()
				return strings.Count(buf.String(), "handing the key over: the preferred leader rule")
			}
			start := func(id string, priority int) *casleader.Group {
				g := newGroup(t, st, id, ks, func(c *casleader.GroupConfig) {
					patient(c)
					c.Priority, c.Logger = priority, logger
				})
				t.Cleanup(running(t, g))
				return g
			}

			low := start("low", 0)
			require.Eventually(t, func() bool { return count(low, ks) == len(ks) }, 10*patientLease, 10*time.Millisecond)
			begin := time.Now()
			hi := start("hi", 5)
			require.Eventually(t, func() bool { return count(hi, ks) == len(ks) }, 10*patientLease, 10*time.Millisecond,
				"every key moves to the preferred group")
			assert.GreaterOrEqual(t, time.Since(begin), patientLease-patientLease/4,
				"not before the preferred group was live for a lease (less the latency of the reads)")
			assert.Equal(t, len(ks), handed(), "one handover per key")

			// No flapping: the preferred group never hands a key over (a key lost
			// under load is a failover; the rule then allows one handover back).
			time.Sleep(2 * patientLease)
			mu.Lock()
			defer mu.Unlock()
			for _, l := range strings.Split(buf.String(), "\n") {
				if strings.Contains(l, "handing over to a live candidate of higher priority") {
					assert.Contains(t, l, "id=low", "only the low group hands over")
					assert.Contains(t, l, "handover_to=hi", "only to the preferred group")
				}
			}
		})
	}
}
