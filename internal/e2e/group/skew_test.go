package group_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// TestGroupOnAServerAheadTakesNoLiveLease: a group whose database server's clock
// runs 2 s ahead of the leading group's sees every lease expired by its clock; it
// takes none while they are renewed, and reports the skew. A group on a server
// behind reports it with a negative sign.
func TestGroupOnAServerAheadTakesNoLiveLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const skew = 2 * time.Second
		st := memstore.New()
		ks := keys(20)
		a := newGroup(t, st, "a", ks, nil)
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		require.Equal(t, len(ks), count(a, ks))
		ahead := newGroup(t, st.Node(skew), "b", ks, nil)
		behind := newGroup(t, st.Node(-skew), "c", ks, nil)
		stopB, stopC := running(t, ahead), running(t, behind)
		for range int(10 * lease / time.Millisecond) {
			time.Sleep(time.Millisecond)
			require.Equal(t, len(ks), count(a, ks), "the leader keeps every key")
			require.Zero(t, count(ahead, ks)+count(behind, ks), "a key with two leaders")
		}
		assert.InDelta(t, skew, ahead.Stats().ClockSkew, float64(poll+heartbeat), "ahead: %v", ahead.Stats().ClockSkew)
		assert.InDelta(t, -skew, behind.Stats().ClockSkew, float64(heartbeat), "behind: %v", behind.Stats().ClockSkew)
		stopA()
		stopB()
		stopC()
	})
}

// TestTakeoversFollowTheExpiryWhateverThePhaseOfTheReads: a follower that polls
// every two heartbeats, started half a heartbeat after the leader's renewals,
// reads every lease half a heartbeat after a renewal. On one database server the
// age it reads is exact and expiry is judged by it (store.Record.OneClock): after
// the leader crashes, the keys are won within a quarter of a heartbeat of their
// expiry, by the database clock.
func TestTakeoversFollowTheExpiryWhateverThePhaseOfTheReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(20)
		a := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) { c.KeepLeaseOnExit = true })
		stopA := running(t, a)
		time.Sleep(heartbeat / 2)
		require.Equal(t, len(ks), count(a, ks))
		b := newGroup(t, st, "b", ks, func(c *casleader.GroupConfig) { c.PollInterval = 2 * heartbeat })
		stopB := running(t, b)
		time.Sleep(time.Second)
		require.Equal(t, len(ks), count(a, ks))
		ctx := context.Background()
		expiry := map[string]time.Time{}
		for _, k := range ks {
			rec, found, err := st.Observe(ctx, k)
			require.NoError(t, err)
			require.True(t, found)
			expiry[k] = time.Now().Add(-rec.Age).Add(lease)
		}
		stopA() // a crash: the leases are kept
		var late []time.Duration
		for len(late) < len(ks) && time.Since(expiry[ks[0]]) < lease {
			time.Sleep(time.Millisecond)
			for _, k := range ks {
				if _, ok := expiry[k]; ok && b.IsLeader(k) {
					late = append(late, time.Since(expiry[k]))
					delete(expiry, k)
				}
			}
		}
		require.Len(t, late, len(ks), "keys not won within a lease of their expiry")
		slices.Sort(late)
		assert.GreaterOrEqual(t, late[0], time.Duration(0), "a key won before its expiry")
		t.Logf("won after the expiry: %v", late)
		assert.Less(t, late[len(late)/2], heartbeat/4, "median delay after the expiry, of %v", late)
		stopB()
	})
}
