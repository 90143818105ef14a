package group_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/store/memstore"
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
