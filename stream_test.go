package casleader_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// withoutTime drops the times of statuses, for comparisons.
func withoutTime(ss []casleader.Status) []casleader.Status {
	out := make([]casleader.Status, len(ss))
	for i, s := range ss {
		s.Time = time.Time{}
		out[i] = s
	}
	return out
}

func TestListenGivesTheCurrentStatusThenEachChangeInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		el := newElector(t, memstore.New(), cfg("a"))
		ctx, cancel := context.WithCancel(t.Context())
		ch := el.Listen(ctx)
		var got []casleader.Status
		read := make(chan struct{})
		go func() {
			defer close(read)
			for s := range ch {
				got = append(got, s)
			}
		}()
		// The listener waits for each status before the next comes (the elector
		// publishes at most two at once, and a waiting listener takes the first
		// directly), so it misses none here.
		synctest.Wait()
		stop := running(t, el)
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		token := el.Token()
		synctest.Wait()
		require.NoError(t, stop())
		cancel()
		<-read // the channel is closed once ctx has ended
		assert.Equal(t, []casleader.Status{
			{Seq: 0},
			{Seq: 1, Leading: true, Token: token, Leader: "a"},
			{Seq: 2, Leader: "a"}, // stepped down: stops acting first
			{Seq: 3},              // then releases the lease
		}, withoutTime(got))
		assert.True(t, got[0].Time.IsZero())
		for _, s := range got[1:] {
			assert.False(t, s.Time.IsZero(), "status %d has no time", s.Seq)
		}
	})
}

// A listener that never reads, beside one that reads every status: neither delays
// the renewals. Leadership passes back and forth between two candidates; every
// renewal of every term is sent exactly HeartbeatInterval after the one before (the
// in-memory store answers at once and synctest's clock moves only when all
// goroutines wait), and the listener that never read holds the latest status.
func TestListenerThatNeverReadsNeverDelaysARenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		type renewal struct {
			term int64
			sent time.Time
		}
		var mu sync.Mutex
		var renewals []renewal
		terms := map[string]int64{} // by candidate ID
		hooks := casleader.Hooks{
			Started: func(e casleader.Event) {
				mu.Lock()
				defer mu.Unlock()
				terms[e.ID] = e.Token
			},
			Call: func(c casleader.Call) {
				mu.Lock()
				defer mu.Unlock()
				if c.Op == "renew" && c.Err == nil && c.Swapped {
					renewals = append(renewals, renewal{terms[c.ID], c.Sent})
				}
			},
		}
		a, b := cfg("a"), cfg("b")
		a.Hooks, b.Hooks = []casleader.Hooks{hooks}, []casleader.Hooks{hooks}
		ea, eb := newElector(t, st, a), newElector(t, st, b)

		ctx, cancel := context.WithCancel(t.Context())
		stuck := ea.Listen(ctx)     // never read until the end
		var seen []casleader.Status // guarded by mu
		read := make(chan struct{})
		prompt := ea.Listen(ctx)
		go func() {
			defer close(read)
			for s := range prompt {
				mu.Lock()
				seen = append(seen, s)
				mu.Unlock()
			}
		}()
		stopA := running(t, ea)
		time.Sleep(time.Millisecond)
		require.True(t, ea.IsLeader())
		stopB := running(t, eb)
		leader, other := ea, eb
		const handovers = 6
		for range handovers {
			time.Sleep(5 * heartbeat)
			require.NoError(t, leader.Resign(t.Context()))
			for !other.IsLeader() {
				time.Sleep(time.Millisecond)
			}
			leader, other = other, leader
		}
		time.Sleep(5 * heartbeat)
		synctest.Wait() // every goroutine waits: the prompt listener has read the latest

		last := <-stuck
		mu.Lock()
		latest := seen[len(seen)-1]
		mu.Unlock()
		assert.Equal(t, latest, last, "the listener that never read holds the latest status, not the first")
		assert.Greater(t, last.Seq, uint64(2*handovers), "many changes were published while it never read")
		assert.True(t, last.Leading, "a leads after an even number of handovers")
		assert.Equal(t, ea.Token(), last.Token)
		assert.Equal(t, "a", last.Leader)

		require.NoError(t, stopA())
		require.NoError(t, stopB())
		cancel()
		<-read
		for i := 1; i < len(seen); i++ {
			assert.Greater(t, seen[i].Seq, seen[i-1].Seq, "in order")
		}

		require.GreaterOrEqual(t, len(renewals), handovers*4)
		n := 0
		for i := 1; i < len(renewals); i++ {
			if renewals[i].term != renewals[i-1].term {
				continue // a new term: its first renewal follows its election
			}
			assert.Equal(t, heartbeat, renewals[i].sent.Sub(renewals[i-1].sent),
				fmt.Sprintf("renewal %d of term %d", i, renewals[i].term))
			n++
		}
		assert.GreaterOrEqual(t, n, handovers*3, "renewals compared")
	})
}

func TestListenClosesTheChannelWhenItsContextEnds(t *testing.T) {
	el := newElector(t, memstore.New(), cfg("a"))
	ctx, cancel := context.WithCancel(t.Context())
	ch := el.Listen(ctx)
	assert.Equal(t, casleader.Status{}, <-ch, "the current status at once")
	cancel()
	_, open := <-ch
	assert.False(t, open, "closed once ctx has ended")

	ended, cancel2 := context.WithCancel(t.Context())
	cancel2()
	ch = el.Listen(ended)
	<-ch // the current status is there even for an ended context
	_, open = <-ch
	assert.False(t, open)
}
