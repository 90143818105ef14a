package detector_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/detector"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

const (
	lease = time.Second
	poll  = 400 * time.Millisecond
)

var cfg = detector.Watch{Key: "k", Poll: poll, Timeout: 100 * time.Millisecond}

// watch runs w over the rows of st.
func watch(ctx context.Context, st interface {
	Observe(ctx context.Context, key string) (store.Record, bool, error)
}, w detector.Watch, wake <-chan struct{}, decide func(detector.Observation) (time.Duration, bool)) (detector.Observation, error) {
	w.Store = st
	return w.Run(ctx, wake, decide)
}

// untilExpired is the follower's decision: wait for the lease's remainder, stop once
// it has expired.
func untilExpired(o detector.Observation) (time.Duration, bool) {
	if !o.Found || o.Expired(lease) {
		return 0, true
	}
	return o.Remaining(lease), false
}

func TestSleepsUntilTheObservedLeaseCanExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		_, _, err := st.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		start := time.Now()
		obs, err := watch(t.Context(), st, cfg, nil, untilExpired)
		require.NoError(t, err)
		waited := time.Since(start)
		assert.GreaterOrEqual(t, waited, lease, "never decides before the lease expired in database time")
		assert.Less(t, waited, lease+poll/10, "wakes at expiry, not a poll interval later")
		assert.Equal(t, "a", obs.LeaderID)
		// Reads: at 0, then capped by the poll interval (400, 800), then at expiry.
		assert.Equal(t, 4, st.Calls(memstore.OpObserve))
	})
}

func TestWakeReadsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		v, _, err := st.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		wake := make(chan struct{}, 1)
		done := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			_, err := watch(t.Context(), st, cfg, wake, untilExpired)
			assert.NoError(t, err)
			done <- time.Since(start)
		}()
		time.Sleep(50 * time.Millisecond)
		ok, err := st.Release(t.Context(), "k", "a", v)
		require.NoError(t, err)
		require.True(t, ok)
		wake <- struct{}{}
		assert.Equal(t, 50*time.Millisecond, <-done, "a wake-up ends the sleep")
	})
}

// TestWokenMayAskForALaterRead: a wake-up after which Woken asks for a read a little
// later (a handover to another candidate) reads then, not at once; never later than
// the read was due; and a wake-up that stops the watch returns without a read.
func TestWokenMayAskForALaterRead(t *testing.T) {
	const later = 5 * time.Millisecond
	for _, c := range []struct {
		name   string
		wokeAt time.Duration // after the first read; the next one is due at poll plus a jitter of at most 2 ms
		from   time.Duration // when the second read is sent: from, to
		to     time.Duration
	}{
		{"ReadsAfterTheWaitAsked", 50 * time.Millisecond, 50*time.Millisecond + later, 50*time.Millisecond + later},
		{"NeverLaterThanDue", poll - time.Millisecond, poll, poll + 2*time.Millisecond}, // not at poll+4ms
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				_, _, err := st.Insert(t.Context(), "k", store.Candidate{ID: "a"})
				require.NoError(t, err)
				wake := make(chan struct{}, 1)
				var reads []time.Duration
				start := time.Now()
				cfg := cfg
				cfg.Woken = func() (bool, time.Duration) { return false, later }
				ctx, cancel := context.WithCancel(t.Context())
				go func() {
					time.Sleep(c.wokeAt)
					wake <- struct{}{}
				}()
				_, err = watch(ctx, st, cfg, wake, func(o detector.Observation) (time.Duration, bool) {
					if reads = append(reads, time.Since(start)); len(reads) == 2 {
						cancel()
					}
					return time.Hour, false // capped by the poll interval
				})
				require.ErrorIs(t, err, context.Canceled)
				require.Len(t, reads, 2)
				assert.GreaterOrEqual(t, reads[1], c.from)
				assert.LessOrEqual(t, reads[1], c.to)
			})
		})
	}
	t.Run("StopReturnsWithoutARead", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := memstore.New()
			_, _, err := st.Insert(t.Context(), "k", store.Candidate{ID: "a"})
			require.NoError(t, err)
			wake := make(chan struct{}, 1)
			cfg := cfg
			cfg.Woken = func() (bool, time.Duration) { return true, later }
			wake <- struct{}{}
			obs, err := watch(t.Context(), st, cfg, wake, func(detector.Observation) (time.Duration, bool) { return time.Hour, false })
			require.NoError(t, err)
			assert.True(t, obs.Woken)
			assert.Equal(t, 1, st.Calls(memstore.OpObserve), "the first read only")
		})
	})
}

func TestTransientErrorsAreRetriedAndDeploymentErrorsReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		st.FailNext(memstore.OpObserve, fmt.Errorf("%w: connection refused", store.ErrTransient))
		obs, err := watch(t.Context(), st, cfg, nil, untilExpired)
		require.NoError(t, err)
		assert.False(t, obs.Found)
		assert.Equal(t, 2, st.Calls(memstore.OpObserve))

		missing := memstore.NewWithoutTable("gone")
		_, err = watch(t.Context(), missing, cfg, nil, untilExpired)
		assert.ErrorIs(t, err, store.ErrDeployment)
	})
}

func TestInvalidRowIsRetriedNotFatal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		_, _, err := st.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		require.NoError(t, st.Corrupt("k", "future_tick"))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err = watch(ctx, st, cfg, nil, untilExpired)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "kept retrying until the context ended: %v", err)
		assert.Greater(t, st.Calls(memstore.OpObserve), 2)
	})
}

func TestContextEndStopsWatching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		_, _, err := st.Insert(t.Context(), "k", store.Candidate{ID: "a"})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err = watch(ctx, st, cfg, nil, func(detector.Observation) (time.Duration, bool) { return lease, false })
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// TestHalfTheReadsFollowARenewal: a leader renews every 100 ms; a follower that
// reads every 200 ms (its Poll, or the time until the lease can expire) from half a
// heartbeat after a renewal would read every row 50 ms old. With Heartbeat set,
// reads timed after a renewal see it a moment old, and no read waits longer than it
// would have.
func TestHalfTheReadsFollowARenewal(t *testing.T) {
	const heartbeat = 100 * time.Millisecond
	for _, tc := range []struct {
		name       string
		poll, left time.Duration
	}{
		{"CappedByPoll", 2 * heartbeat, lease},
		{"UntilTheLeaseCanExpire", 10 * heartbeat, 2 * heartbeat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				st.Node(0) // a cluster of servers (Galera): reads are not on one clock
				v, _, err := st.Insert(t.Context(), "k", store.Candidate{ID: "a"})
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(t.Context())
				renewed := make(chan struct{})
				go func() {
					defer close(renewed)
					for ctx.Err() == nil {
						time.Sleep(heartbeat)
						ok, err := st.Renew(context.Background(), "k", "a", v)
						if !assert.NoError(t, err) || !assert.True(t, ok) {
							return
						}
						v++
					}
				}()
				time.Sleep(heartbeat / 2)
				c := cfg
				c.Poll, c.Heartbeat = tc.poll, heartbeat
				var ages, gaps []time.Duration
				last := time.Now()
				_, err = watch(ctx, st, c, nil, func(o detector.Observation) (time.Duration, bool) {
					ages = append(ages, o.Age)
					gaps = append(gaps, o.Sent.Sub(last))
					last = o.Sent
					return tc.left, len(ages) == 20
				})
				require.NoError(t, err)
				cancel()
				<-renewed
				assert.Equal(t, heartbeat/2, ages[0])
				assert.Less(t, slices.Min(ages), heartbeat/10, "a read soon after a renewal, of %v", ages)
				assert.LessOrEqual(t, slices.Max(gaps), min(tc.poll, tc.left)+2*time.Millisecond, "no wait beyond Poll, the lease and the jitter, of %v", gaps)
			})
		})
	}
}
