package casleader_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// cutStore is a candidate's link to the in-memory database: once cut, every
// statement fails as on a connection that is lost.
type cutStore struct {
	*memstore.Store
	cut atomic.Bool
}

var errCut = errors.Join(store.ErrTransient, errors.New("the link is cut"))

func (s *cutStore) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	if s.cut.Load() {
		return store.Record{}, false, errCut
	}
	return s.Store.Observe(ctx, key)
}

func (s *cutStore) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	if s.cut.Load() {
		return false, errCut
	}
	return s.Store.Renew(ctx, key, id, version)
}

func (s *cutStore) Elect(ctx context.Context, key string, cand store.Candidate, version int64) (int64, bool, error) {
	if s.cut.Load() {
		return 0, false, errCut
	}
	return s.Store.Elect(ctx, key, cand, version)
}

// TestMixedLeaseSettingsNeverGiveTwoLeaders: candidate a runs with a lease of
// 1 s (renew deadline 800 ms), candidate b with 300 ms (200 ms), as in a rolling
// deploy that changes the timing. a leads, then loses its link to the database.
// b judges the lease by the row's 1 s, not by its own 300 ms: it never leads
// while a trusts its term, and takes over once a's lease has expired. b warns
// once that the leader's lease differs from its own; a's guard refuses once its
// trust has ended.
func TestMixedLeaseSettingsNeverGiveTwoLeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		sa := &cutStore{Store: mem}
		ca := casleader.Config{Key: "k", ID: "a", LeaseDuration: time.Second, RenewDeadline: 800 * time.Millisecond,
			HeartbeatInterval: 100 * time.Millisecond, PollInterval: 100 * time.Millisecond, KeepLeaseOnExit: true}
		var logs syncBuffer
		cb := casleader.Config{Key: "k", ID: "b", LeaseDuration: 300 * time.Millisecond, RenewDeadline: 200 * time.Millisecond,
			HeartbeatInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		a := newElector(t, sa, ca)
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		require.True(t, a.IsLeader())
		token := a.Token()
		b := newElector(t, mem, cb)
		stopB := running(t, b)
		time.Sleep(2 * time.Second)
		require.True(t, a.IsLeader(), "a renews: b never takes over")
		require.False(t, b.IsLeader())

		sa.cut.Store(true)
		rec, _, err := mem.Observe(t.Context(), "k")
		require.NoError(t, err)
		renewed := time.Now().Add(-rec.Age) // a's last renewal, by the database clock
		var aEnded, bBegan time.Time
		for start := time.Now(); time.Since(start) < 3*time.Second && bBegan.IsZero(); {
			time.Sleep(time.Millisecond)
			al, bl := a.IsLeader(), b.IsLeader()
			require.False(t, al && bl, "two leaders at once, %v after the cut", time.Since(start))
			if !al && aEnded.IsZero() {
				aEnded = time.Now()
			}
			if bl {
				bBegan = time.Now()
			}
		}
		require.False(t, bBegan.IsZero(), "b never took over")
		assert.LessOrEqual(t, aEnded.Sub(renewed), 800*time.Millisecond, "a trusts its term for its own renew deadline")
		assert.GreaterOrEqual(t, bBegan.Sub(renewed), time.Second, "b took over before a's lease of 1 s expired")
		assert.Less(t, bBegan.Sub(renewed), time.Second+200*time.Millisecond, "b takes over at a's expiry, within a poll or so")
		require.ErrorIs(t, a.Fence(token).Trust(), casleader.ErrNotLeader, "a's guard refuses once its trust has ended (its local check, before any statement)")
		assert.Equal(t, 1, strings.Count(logs.String(), "runs with another lease duration"), "b warns once:\n%s", logs.String())
		assert.Contains(t, logs.String(), "lease_row=1s")
		require.NoError(t, stopB())
		_ = stopA()
	})
}

// TestHandoverToADuplicatedIDGivesOneActor: two processes run with ID "b" by
// mistake, and the leader hands the lease over to "b". The handover names the ID
// only; each "b" claims it with an election, which one wins: that one leads, the
// other never leads and stops with ErrDuplicateID once the winner renews.
func TestHandoverToADuplicatedIDGivesOneActor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		a := newElector(t, st, cfg("a"))
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		require.True(t, a.IsLeader())
		b1, b2 := newElector(t, st, cfg("b")), newElector(t, st, cfg("b"))
		done := make(chan error, 2)
		for _, b := range []*casleader.Elector{b1, b2} {
			go func() { done <- b.Run(t.Context()) }()
		}
		time.Sleep(2 * heartbeat)
		require.NoError(t, a.HandoverTo(t.Context(), "b"))
		var refused error
		for start := time.Now(); time.Since(start) < 3*lease && refused == nil; {
			time.Sleep(time.Millisecond)
			require.False(t, b1.IsLeader() && b2.IsLeader(), "both processes with ID b lead")
			require.False(t, a.IsLeader() && (b1.IsLeader() || b2.IsLeader()), "the old leader and a b lead")
			select {
			case refused = <-done:
			default:
			}
		}
		require.ErrorIs(t, refused, casleader.ErrDuplicateID, "one b stops with the duplicate ID")
		assert.True(t, b1.IsLeader() != b2.IsLeader(), "the other b leads")
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, "b", rec.LeaderID)
		assert.False(t, rec.Handed(), "claimed")
		require.NoError(t, stopA())
		for _, b := range []*casleader.Elector{b1, b2} {
			if b.IsLeader() {
				require.NoError(t, b.Stop(t.Context()))
			}
		}
		require.NoError(t, <-done)
	})
}
