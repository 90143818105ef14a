package group_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// TestHandoverToADuplicatedIDGivesOneActorPerKey: two groups run with ID "b" by
// mistake, and every key of the leading group is handed over to "b" (a step-down
// request naming it, as `casleader handover --to b` writes). Each key's handover
// is claimed with an election that one process wins: no key is ever led by both
// processes, and one of them stops with ErrDuplicateID.
func TestHandoverToADuplicatedIDGivesOneActorPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(5)
		a := newGroup(t, st, "a", ks, nil)
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		require.Equal(t, len(ks), count(a, ks))
		b1, b2 := newGroup(t, st, "b", ks, nil), newGroup(t, st, "b", ks, nil)
		done := make(chan error, 2)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		for _, b := range []*casleader.Group{b1, b2} {
			go func() { done <- b.Run(ctx) }()
		}
		time.Sleep(2 * heartbeat)
		for _, k := range ks {
			rec, _, err := st.Observe(t.Context(), k)
			require.NoError(t, err)
			ok, err := st.RequestStepDown(t.Context(), k, rec.Version, "b")
			require.NoError(t, err)
			require.True(t, ok)
		}
		var refused error
		for start := time.Now(); time.Since(start) < 4*lease && refused == nil; {
			time.Sleep(time.Millisecond)
			for _, k := range ks {
				require.False(t, b1.IsLeader(k) && b2.IsLeader(k), "key %s led by both processes with ID b", k)
				require.False(t, a.IsLeader(k) && (b1.IsLeader(k) || b2.IsLeader(k)), "key %s led by a and by b", k)
			}
			select {
			case refused = <-done:
			default:
			}
		}
		require.ErrorIs(t, refused, casleader.ErrDuplicateID, "one process of ID b stops")
		// The other leads every key: those the stopped one had claimed once their
		// leases have expired.
		time.Sleep(2*lease + poll)
		assert.Equal(t, len(ks), max(count(b1, ks), count(b2, ks)), "the other process of ID b leads every key")
		for _, k := range ks {
			rec, _, err := st.Observe(t.Context(), k)
			require.NoError(t, err)
			assert.Equal(t, "b", rec.LeaderID, "key %s", k)
			assert.False(t, rec.Handed(), "key %s claimed", k)
		}
		cancel()
		require.NoError(t, <-done)
		stopA()
	})
}
