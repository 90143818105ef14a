package casleader_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/store"
)

// decorated is a user's store decorator: it embeds the store and overrides one
// method (it counts renewals). Everything else (wake-ups, members, handover, the
// guard) is the store's, through the embedded store.Driver.
type decorated struct {
	store.Driver
	renewals atomic.Int64
}

var _ store.Driver = (*decorated)(nil)

func (d *decorated) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	d.renewals.Add(1)
	return d.Driver.Renew(ctx, key, id, version)
}

// TestDecoratorThatEmbedsTheDriverKeepsEveryFeature: electors on decorators of a
// real store keep the members view, the guard, and the store's wake-ups: a
// handover reaches the follower long before its next read (a minute away) or the
// lease's expiry.
func TestDecoratorThatEmbedsTheDriverKeepsEveryFeature(t *testing.T) {
	t.Parallel()
	for _, d := range guardDBs() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db, _ := membersDB(t, d.open)
			da, dbb := &decorated{Driver: db.st}, &decorated{Driver: db.st}
			ca, cb := slowPolls("a"), slowPolls("b")
			require.Less(t, settle, cb.LeaseDuration/2, "a takeover within settle must be impossible without a wake-up")
			a := newElector(t, da, ca)
			stopA := running(t, a)
			defer func() { require.NoError(t, stopA()) }()
			require.Eventually(t, a.IsLeader, settle, time.Millisecond)
			b := newElector(t, dbb, cb)
			stopB := running(t, b)
			defer func() { require.NoError(t, stopB()) }()
			require.Eventually(t, func() bool { return b.Leader() == "a" }, settle, time.Millisecond)

			require.Eventually(t, func() bool {
				ms, err := a.Members(t.Context())
				return err == nil && len(ms) == 2
			}, settle, 10*time.Millisecond, "the members view through the decorator")
			require.Eventually(t, func() bool { return da.renewals.Load() > 0 }, settle, 10*time.Millisecond,
				"renewals go through the decorator")

			tx, err := db.begin(t.Context())
			require.NoError(t, err)
			require.NoError(t, tx.guard(t.Context(), a, a.Token()), "the guard through the decorator")
			tx.rollback()

			require.NoError(t, a.HandoverTo(t.Context(), "b"))
			require.Eventually(t, b.IsLeader, settle, time.Millisecond,
				"the handover wakes b through the decorator, long before its next read")
		})
	}
}
