package casleader_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// lateReplyStore answers one renewal late: it sends it, the database commits it, and
// the reply arrives after delay whatever the context says, as when a driver has
// already read the reply when the statement's deadline passes.
type lateReplyStore struct {
	*memstore.Store
	delay    time.Duration
	armed    atomic.Bool // the next renewal answers late
	armedObs atomic.Bool // the next read answers late
}

func (s *lateReplyStore) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	if s.armedObs.CompareAndSwap(true, false) {
		rec, found, err := s.Store.Observe(context.WithoutCancel(ctx), key)
		time.Sleep(s.delay)
		return rec, found, err
	}
	return s.Store.Observe(ctx, key)
}

func (s *lateReplyStore) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	if s.armed.CompareAndSwap(true, false) {
		ok, err := s.Store.Renew(context.WithoutCancel(ctx), key, id, version)
		time.Sleep(s.delay)
		return ok, err
	}
	return s.Store.Renew(ctx, key, id, version)
}

// TestLateRenewalReplyDoesNotLeaveALeaderWithoutItsContext: the chaos soak found
// leaders whose IsLeader() turned false at the trust deadline (their leadership
// context was cancelled then) and true again a few milliseconds later, in the same
// term, when a renewal sent before the deadline reported success after it. The
// elector then leads on, renewing, with OnStartedLeading's context cancelled and no
// new OnStartedLeading: the lease is held and nobody works. Whenever IsLeader() is
// true, the current term's context must be live.
func TestLateRenewalReplyDoesNotLeaveALeaderWithoutItsContext(t *testing.T) {
	// The leader wins at 0 and renews every H = 60 ms; R = 250 ms.
	t.Run("Renewal", func(t *testing.T) {
		// The renewal sent at 60 ms answers at 260 ms: after the deadline (250 ms),
		// before the deadline it would give (310 ms).
		lateReply(t, time.Millisecond, renewDL-heartbeat+10*time.Millisecond, func(st *lateReplyStore) { st.armed.Store(true) })
	})
	t.Run("ReadThatSettlesALostRenewal", func(t *testing.T) {
		// The renewal sent at 120 ms commits but its connection drops; its retry (5 to
		// 10 ms later) loses its compare-and-set; the read that settles it (sent at
		// 125 to 130 ms, age 5 to 10 ms) answers 215 ms later: after the deadline
		// (310 ms), before the one it would give (365 to 375 ms).
		lateReply(t, 110*time.Millisecond, 215*time.Millisecond, func(st *lateReplyStore) {
			st.CommitThenFail(memstore.OpRenew, fmt.Errorf("%w: connection reset", store.ErrTransient))
			st.armedObs.Store(true)
		})
	})
}

// lateReply runs a leader, calls arm at the given time after it won, and checks that
// IsLeader() is never true while the current term's context is cancelled.
func lateReply(t *testing.T, at, delay time.Duration, arm func(*lateReplyStore)) {
	synctest.Test(t, func(t *testing.T) {
		st := &lateReplyStore{Store: memstore.New(), delay: delay}
		var mu sync.Mutex
		var ctxs []context.Context
		c := cfg("a")
		c.OnStartedLeading = func(ctx context.Context, _ int64) {
			mu.Lock()
			ctxs = append(ctxs, ctx)
			mu.Unlock()
			<-ctx.Done()
		}
		el := newElector(t, st, c)
		stop := running(t, el)
		synctest.Wait()
		require.True(t, el.IsLeader())
		time.Sleep(at)
		synctest.Wait()
		arm(st)

		leadAgain := false
		for end := time.Now().Add(3 * lease); time.Now().Before(end); time.Sleep(time.Millisecond) {
			synctest.Wait()
			if !el.IsLeader() {
				continue
			}
			mu.Lock()
			cur := ctxs[len(ctxs)-1]
			n := len(ctxs)
			mu.Unlock()
			if !assert.NoError(t, cur.Err(), "IsLeader() is true (token %d) while the term's context is cancelled", el.Token()) {
				break
			}
			leadAgain = leadAgain || n > 1
		}
		assert.True(t, leadAgain, "the candidate, whose lease was never taken, leads again in a new leadership period")
		require.NoError(t, stop())
	})
}
