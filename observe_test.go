package casleader_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// events records what hooks report, one line per event.
type events struct {
	mu    sync.Mutex
	lines []string
}

func (ev *events) add(format string, args ...any) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.lines = append(ev.lines, fmt.Sprintf(format, args...))
}

func (ev *events) all() []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]string(nil), ev.lines...)
}

// hooks records every event except renewals, which depend on timing. el, set
// before Run, is asked whether it leads at Started and Stopped.
func (ev *events) hooks(renewDeadline time.Duration, el **casleader.Elector) casleader.Hooks {
	var sent time.Time // of the last write that won, to check Renewed's deadline
	return casleader.Hooks{
		Call: func(c casleader.Call) {
			if c.Swapped {
				sent = c.Sent
			}
			if c.Key != "k" || c.Keys != 1 {
				ev.add("call %s of key %q in a statement of %d keys", c.Op, c.Key, c.Keys)
			}
			if c.Op == "renew" {
				return
			}
			ev.add("call %s found=%v swapped=%v term=%d err=%v", c.Op, c.Found, c.Swapped, c.Term, c.Err)
		},
		Started: func(e casleader.Event) {
			ev.add("started %s/%s %d leader=%v", e.Key, e.ID, e.Token, (*el).IsLeader())
		},
		Renewed: func(e casleader.Event) {
			if e.Until.Sub(sent) != renewDeadline || e.RenewDeadline != renewDeadline {
				ev.add("renewed %d until %v after the write, want %v", e.Token, e.Until.Sub(sent), renewDeadline)
			}
		},
		Stopped: func(e casleader.Event) {
			ev.add("stopped %s/%s %d leader=%v", e.Key, e.ID, e.Token, (*el).IsLeader())
		},
		Leader: func(e casleader.Event) { ev.add("leader %q", e.Leader) },
		Skew:   func(e casleader.Event) { ev.add("skew %v", e.Skew) },
	}
}

func TestHooksSeeEveryStoreCallAndTermInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var ev events
		var renewals, cancelled int
		c := cfg("a")
		var el *casleader.Elector
		c.Hooks = []casleader.Hooks{ev.hooks(renewDL, &el), {
			Call: func(c casleader.Call) {
				if c.Op == "renew" && c.Swapped && c.Err == nil {
					renewals++
				}
				if c.Cancelled {
					cancelled++
				}
			},
		}}
		el = newElector(t, st, c)
		assert.Empty(t, ev.all(), "no event before Run")
		stop := running(t, el)
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		token := el.Token()
		time.Sleep(5 * heartbeat)
		require.NoError(t, stop())
		assert.Equal(t, []string{
			"call observe found=false swapped=false term=0 err=<nil>",
			fmt.Sprintf("call insert found=false swapped=true term=%d err=<nil>", token),
			fmt.Sprintf("started k/a %d leader=true", token),
			`leader "a"`,
			"call release found=false swapped=true term=0 err=<nil>",
			`leader ""`,
			fmt.Sprintf("stopped k/a %d leader=false", token),
		}, ev.all())
		assert.Equal(t, 5, renewals, "one renewal per heartbeat")
		assert.Zero(t, cancelled, "no call was cancelled")
	})
}

// A call that the elector cancels itself (to exit, pause or resign) is told apart
// from one that reached its deadline: only the latter is the database's doing.
func TestHookCallsTellCancellationFromATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		st.SetDelay(memstore.OpObserve, time.Hour) // reads hang until their context ends
		var mu sync.Mutex
		var calls []casleader.Call
		c := cfg("a")
		c.Hooks = []casleader.Hooks{{Call: func(c casleader.Call) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, c)
		}}}
		el := newElector(t, st, c)
		stop := running(t, el)
		time.Sleep(renewDL + time.Millisecond) // the first read times out at RenewDeadline
		synctest.Wait()
		mu.Lock()
		require.NotEmpty(t, calls)
		first := calls[0]
		mu.Unlock()
		assert.Equal(t, "observe", first.Op)
		assert.ErrorIs(t, first.Err, store.ErrTransient)
		assert.False(t, first.Cancelled, "a read that reached its deadline is a timeout")
		assert.Equal(t, renewDL, first.Duration)

		time.Sleep(poll) // a later read is in flight
		require.NoError(t, stop())
		mu.Lock()
		last := calls[len(calls)-1]
		mu.Unlock()
		assert.Equal(t, "observe", last.Op)
		require.Error(t, last.Err)
		assert.True(t, last.Cancelled, "the read that Run's end cancelled")
	})
}
