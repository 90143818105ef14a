package casleader_test

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

func TestStop(t *testing.T) {
	t.Run("DrainsReleasesAndWaitsForRun", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := memstore.New()
			c := cfg("a")
			drained := make(chan struct{})
			c.OnStartedLeading = func(ctx context.Context, _ int64) {
				<-ctx.Done()
				time.Sleep(heartbeat) // the work takes a while to wind down
				close(drained)
			}
			stoppedLeading := make(chan struct{})
			c.Hooks = []casleader.Hooks{{Stopped: func(casleader.Event) { close(stoppedLeading) }}}
			el := newElector(t, st, c)
			runErr := make(chan error, 1)
			go func() { runErr <- el.Run(t.Context()) }() // a context Stop does not own
			time.Sleep(time.Millisecond)
			require.True(t, el.IsLeader())

			require.NoError(t, el.Stop(t.Context()))
			assert.False(t, el.IsLeader())
			// A Run still running would make this one say it is already running.
			err := el.Run(t.Context())
			require.ErrorIs(t, err, casleader.ErrRunState)
			assert.Contains(t, err.Error(), "Stop was called", "Stop returned before Run did")
			assert.NoError(t, <-runErr)
			select {
			case <-drained:
			default:
				t.Fatal("Stop returned before OnStartedLeading did")
			}
			select {
			case <-stoppedLeading:
			default:
				t.Fatal("Stop returned before the term's end was reported (Hooks.Stopped)")
			}
			rec, found, err := st.Observe(t.Context(), "k")
			require.NoError(t, err)
			require.True(t, found)
			assert.True(t, rec.Released(), "the lease is released, so another candidate takes over at once: %+v", rec)
			assert.NoError(t, el.Stop(t.Context()), "a second Stop")
		})
	})
	t.Run("StoppedElectorDoesNotRunAgain", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := memstore.New()
			el := newElector(t, st, cfg("a"))
			require.NoError(t, el.Stop(t.Context()), "Stop without a Run")
			require.ErrorIs(t, el.Run(t.Context()), casleader.ErrRunState, "Run after Stop returns at once")
			_, found, err := st.Observe(t.Context(), "k")
			require.NoError(t, err)
			assert.False(t, found, "a stopped elector wrote nothing")
		})
	})
	t.Run("ReturnsWhenItsContextEndsFirst", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := memstore.New()
			c := cfg("a")
			c.DrainTimeout = lease - renewDL
			release := make(chan struct{})
			c.OnStartedLeading = func(ctx context.Context, _ int64) { <-release } // ignores ctx
			el := newElector(t, st, c)
			runErr := make(chan error, 1)
			go func() { runErr <- el.Run(t.Context()) }()
			time.Sleep(time.Millisecond)
			require.True(t, el.IsLeader())

			ctx, cancel := context.WithTimeout(t.Context(), c.DrainTimeout/2)
			defer cancel()
			start := time.Now()
			err := el.Stop(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, c.DrainTimeout/2, time.Since(start), "Stop waited until its context ended")
			assert.False(t, el.IsLeader(), "the leader stopped acting at once")
			assert.ErrorIs(t, <-runErr, casleader.ErrNotDrained, "Run returns on its own, leaving the blocked callback running, and says so")
			close(release)
		})
	})
	t.Run("FromTheLeadersCallbackReturnsAtOnce", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := memstore.New()
			c := cfg("a")
			stopErr := make(chan error, 1)
			var e *casleader.Elector
			c.OnStartedLeading = func(ctx context.Context, _ int64) {
				stopErr <- e.Stop(ctx)
				<-ctx.Done()
			}
			e = newElector(t, st, c)
			start := time.Now()
			require.NoError(t, e.Run(t.Context()), "Run returns after Stop from its own callback")
			require.NoError(t, <-stopErr)
			assert.Less(t, time.Since(start), heartbeat, "no DrainTimeout wait")
			rec, _, err := st.Observe(t.Context(), "k")
			require.NoError(t, err)
			assert.True(t, rec.Released(), "the callback returned, so the lease was released: %+v", rec)
		})
	})
}
