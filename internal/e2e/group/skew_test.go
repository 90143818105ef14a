package group_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
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

// starved is a store whose every other batched read reaches the database delay
// after it was sent, as when the process is starved of CPU or waits for a pooled
// connection: the read's send time is taken before the delay, its ages after it.
// starved is a follower's store whose every other batched read reaches the
// database delay after it was sent, as when the process is starved of CPU or
// waits for a pooled connection: the read's send time is taken before the
// delay, the ages it reads after it. After each read that was not held, it lets
// the leader's next renewal go (heldRenewals), so that the leader renews right
// after that read and not again before the held read that follows: the row's
// age then covers the delay.
type starved struct {
	store.Driver
	delay time.Duration
	n     atomic.Int64
	renew chan struct{}
}

func (s *starved) ObserveMany(ctx context.Context, keys []string) (map[string]store.Record, error) {
	held := s.n.Add(1)%2 == 0
	if held {
		time.Sleep(s.delay)
	}
	recs, err := s.Driver.ObserveMany(ctx, keys)
	if !held {
		select {
		case s.renew <- struct{}{}:
		default:
		}
	}
	return recs, err
}

// heldRenewals is the leader's store: each renewal waits for a read of the
// follower's (starved) that was not held.
type heldRenewals struct {
	store.Driver
	renew chan struct{}
}

func (h *heldRenewals) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	select {
	case <-h.renew: // a signal left from before: wait for a fresh one
	default:
	}
	select {
	case <-h.renew:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Driver.RenewMany(ctx, id, held)
}

// TestStarvedReadsShowNoClockSkew: a follower whose every other read reaches the
// database late, by a delay beyond a quarter of the margin L - R (what
// timing.SkewNotable finds notable), reports no clock skew and logs no warning
// of it, on a single server (one clock: SQLite, PostgreSQL, a MariaDB that is
// not a Galera node) and on two servers of a cluster whose clocks agree: a delay
// of its own is not a disagreement between clocks. A read that sees a renewal
// made after the previous read bounds the row's true age by the time since that
// previous read was sent; measured up to the late read's send time instead of
// its reply, the bound is short by the delay, and the delay is taken for skew.
func TestStarvedReadsShowNoClockSkew(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster bool
	}{{"OneServer", false}, {"TwoServersInStep", true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				if tc.cluster {
					st.Node(0) // from now on st is a node of a multi-primary cluster
				}
				ks := keys(20)
				renew := make(chan struct{}, 1)
				renew <- struct{}{} // the first renewal goes
				a := newGroup(t, &heldRenewals{Driver: st, renew: renew}, "a", ks, func(c *casleader.GroupConfig) { c.HeartbeatInterval, c.BatchSize = renewDL/2, len(ks) })
				stopA := running(t, a)
				time.Sleep(time.Millisecond)
				require.Equal(t, len(ks), count(a, ks))
				var logs bytes.Buffer
				delay := (lease - renewDL) / 2 // notable: a quarter of the margin or more
				b := newGroup(t, &starved{Driver: st, delay: delay, renew: renew}, "b", ks, func(c *casleader.GroupConfig) {
					c.PollInterval, c.BatchSize = poll/10, len(ks)
					c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
				})
				stopB := running(t, b)
				var most time.Duration
				for range 10 * int(lease/poll) {
					time.Sleep(poll)
					require.Equal(t, len(ks), count(a, ks), "the leader keeps every key")
					s := b.Stats().ClockSkew
					most = max(most, s, -s)
				}
				stopB()
				stopA()
				assert.Zero(t, most, "clock skew reported by the starved follower")
				assert.False(t, strings.Contains(logs.String(), timing.SkewMessage), "the starved follower warned of clock skew:\n%s", logs.String())
			})
		})
	}
}
