package group_test

import (
	"context"
	"fmt"
	"slices"
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

// keyEvents records what hooks report, one line per event, per key.
type keyEvents struct {
	mu    sync.Mutex
	lines map[string][]string
	calls map[string]map[string]int // op -> key -> calls
	sizes map[string][]int          // op -> Call.Keys of each call
}

func newKeyEvents() *keyEvents {
	return &keyEvents{lines: map[string][]string{}, calls: map[string]map[string]int{}, sizes: map[string][]int{}}
}

func (e *keyEvents) add(key, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lines[key] = append(e.lines[key], fmt.Sprintf(format, args...))
}

func (e *keyEvents) of(key string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.lines[key])
}

// hooks records every event but renewals (counted) and reads (counted).
func (e *keyEvents) hooks() casleader.Hooks {
	return casleader.Hooks{
		Call: func(c casleader.Call) {
			e.mu.Lock()
			if e.calls[c.Op] == nil {
				e.calls[c.Op] = map[string]int{}
			}
			e.calls[c.Op][c.Key]++
			e.sizes[c.Op] = append(e.sizes[c.Op], c.Keys)
			e.mu.Unlock()
			if c.ID != "a" {
				e.add(c.Key, "call %s by %q", c.Op, c.ID)
			}
			if c.Op != "renew" && c.Op != "observe" {
				e.add(c.Key, "call %s swapped=%v term=%d err=%v", c.Op, c.Swapped, c.Term, c.Err)
			}
		},
		Started: func(ev casleader.Event) { e.add(ev.Key, "started %d by %q", ev.Token, ev.ID) },
		Renewed: func(ev casleader.Event) {
			if ev.RenewDeadline != renewDL || ev.LeaseDuration != lease || ev.Until.IsZero() {
				e.add(ev.Key, "renewed %d with %v/%v until %v", ev.Token, ev.LeaseDuration, ev.RenewDeadline, ev.Until)
			}
		},
		Stopped: func(ev casleader.Event) { e.add(ev.Key, "stopped %d", ev.Token) },
		Leader:  func(ev casleader.Event) { e.add(ev.Key, "leader %q", ev.Leader) },
	}
}

// A group's hooks see, per key, what an elector's see: its store calls, one per
// key of each batched statement, the term's start, its leader, and its end after
// the release.
func TestHooksSeeEveryKeysCallsAndTermInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(3)
		ev := newKeyEvents()
		var renewals int
		g := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) {
			c.BatchSize = 2
			c.Hooks = []casleader.Hooks{ev.hooks(), {Renewed: func(casleader.Event) { renewals++ }}}
		})
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		require.Equal(t, 3, count(g, ks))
		tokens := map[string]int64{}
		for _, k := range ks {
			tokens[k] = g.Token(k)
		}
		time.Sleep(5 * heartbeat)
		stop()
		for _, k := range ks {
			assert.Equal(t, []string{
				fmt.Sprintf("call insert swapped=true term=%d err=<nil>", tokens[k]),
				fmt.Sprintf("started %d by \"a\"", tokens[k]),
				`leader "a"`,
				"call release swapped=true term=0 err=<nil>",
				`leader ""`,
				fmt.Sprintf("stopped %d", tokens[k]),
			}, ev.of(k), k)
		}
		ev.mu.Lock()
		defer ev.mu.Unlock()
		for _, k := range ks {
			assert.Equal(t, 1, ev.calls["observe"][k], "one read of %s", k)
			assert.Equal(t, 5, ev.calls["renew"][k], "one renewal of %s per heartbeat", k)
		}
		assert.Equal(t, 3*6, renewals, "Renewed at each term's start and after each renewal")
		assert.ElementsMatch(t, []int{2, 2, 1}, ev.sizes["observe"], "a batch of two keys is reported once per key, with its size")
		assert.Len(t, ev.sizes["renew"], 15)
		assert.Equal(t, 10, countOf(ev.sizes["renew"], 2), "each round renews a batch of two keys and one of one")
	})
}

func countOf(xs []int, x int) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// A term that ends without a release (its renewals failed) is in the lead phase
// until its work has returned: Stopped comes then, as for an elector.
func TestLostTermIsStoppedOnceItsWorkReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(2)
		ev := newKeyEvents()
		work := make(chan struct{})
		g := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) {
			c.Hooks = []casleader.Hooks{ev.hooks()}
			c.OnStartedLeading = func(ctx context.Context, key string, _ int64) {
				if key == ks[0] {
					<-work // ignores its context
				}
			}
		})
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		require.Equal(t, 2, count(g, ks))
		token0, token1 := g.Token(ks[0]), g.Token(ks[1])
		st.Fail(memstore.OpRenewMany, fmt.Errorf("%w: connection refused", store.ErrTransient))
		st.Fail(memstore.OpObserveMany, fmt.Errorf("%w: connection refused", store.ErrTransient))
		time.Sleep(renewDL + time.Millisecond)
		synctest.Wait()
		require.Zero(t, count(g, ks), "both terms ended at their deadline")
		assert.Contains(t, ev.of(ks[1]), fmt.Sprintf("stopped %d", token1), "its work returned at once")
		assert.NotContains(t, ev.of(ks[0]), fmt.Sprintf("stopped %d", token0), "its work still runs")
		close(work)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.Contains(t, ev.of(ks[0]), fmt.Sprintf("stopped %d", token0), "its work returned")
		st.Fail(memstore.OpRenewMany, nil)
		st.Fail(memstore.OpObserveMany, nil)
		stop()
	})
}

// A group that keeps its leases on exit ends each key's lead phase when Run
// returns, without a release.
func TestKeptLeasesAreStoppedWithoutARelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(2)
		ev := newKeyEvents()
		g := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) {
			c.KeepLeaseOnExit = true
			c.Hooks = []casleader.Hooks{ev.hooks()}
		})
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		require.Equal(t, 2, count(g, ks))
		tokens := map[string]int64{ks[0]: g.Token(ks[0]), ks[1]: g.Token(ks[1])}
		stop()
		for _, k := range ks {
			assert.Equal(t, []string{
				fmt.Sprintf("call insert swapped=true term=%d err=<nil>", tokens[k]),
				fmt.Sprintf("started %d by \"a\"", tokens[k]),
				`leader "a"`,
				fmt.Sprintf("stopped %d", tokens[k]),
			}, ev.of(k), k)
		}
	})
}
