package notify_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/store"
)

// countingListener counts how many of its Run calls run at once, and records what
// Wakeups forwards to it.
type countingListener struct {
	running, starts, max atomic.Int32
	mu                   sync.Mutex
	calls                []string
}

func (l *countingListener) Run(ctx context.Context) error {
	l.starts.Add(1)
	n := l.running.Add(1)
	for {
		m := l.max.Load()
		if n <= m || l.max.CompareAndSwap(m, n) {
			break
		}
	}
	<-ctx.Done()
	l.running.Add(-1)
	return nil
}

func (l *countingListener) Observed(key string, _ store.Record) { l.log("observed " + key) }
func (l *countingListener) Leading(key string, _ int64, leading bool) {
	l.log("leading " + key + map[bool]string{true: " true", false: " false"}[leading])
}
func (l *countingListener) Announce(key string, version int64) { l.log("announce " + key) }
func (l *countingListener) AnnounceHandover(key, to string)    { l.log("announce " + key + " to " + to) }
func (l *countingListener) Listening() bool                    { return true }
func (l *countingListener) log(s string) {
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
}

func TestWakeupsRunOneListenerFromTheFirstSubscriberToTheLast(t *testing.T) {
	l := &countingListener{}
	w := notify.NewWakeups("t", notify.NewHub(), l)
	assert.Equal(t, "t", w.Table())
	assert.False(t, w.Running(), "nobody subscribes: nothing runs")
	var unsubs []func()
	for _, k := range []string{"a", "a", "b"} {
		unsubs = append(unsubs, w.Subscribe(k, "", func(int64) {}))
	}
	require.Eventually(t, func() bool { return l.running.Load() == 1 }, settle, time.Millisecond)
	assert.True(t, w.Running())
	assert.True(t, w.Listening(), "the listener runs and says it listens")
	unsubs[0]()
	unsubs[0]() // twice: once
	unsubs[1]()
	assert.True(t, w.Running(), "b still subscribes")
	unsubs[2]()
	assert.False(t, w.Running())
	assert.Zero(t, l.running.Load(), "the last unsubscribe waits for the listener to return")
	assert.Equal(t, int32(1), l.starts.Load())
	assert.Equal(t, int32(1), l.max.Load())

	defer w.Subscribe("c", "", func(int64) {})()
	require.Eventually(t, func() bool { return l.running.Load() == 1 }, settle, time.Millisecond, "a new subscriber starts it again")
}

func TestWakeupsWakeThisProcessAndForwardToTheListener(t *testing.T) {
	l := &countingListener{}
	w := notify.NewWakeups("t", notify.NewHub(), l)
	got := make(chan int64, 10)
	defer w.Subscribe("k", "", func(v int64) { got <- v })()
	w.Released("k", 42)
	assert.Equal(t, int64(42), <-got, "the store's own release wakes its subscribers at once, with the version")
	w.Observed("k", store.Record{})
	w.Leading("k", 7, true)
	defer w.Subscribe("k", "b", func(v int64) { got <- -100 + v })() // -101 handed over, -102 to another
	w.HandedOver("k", "b")
	assert.ElementsMatch(t, []int64{notify.HandedOver, -100 + notify.HandedOver}, []int64{<-got, <-got},
		"the store's own handover wakes its target, and a subscriber that did not name itself, to read the row")
	w.HandedOver("k", "c")
	assert.ElementsMatch(t, []int64{notify.HandedOver, -100 + notify.HandedToAnother}, []int64{<-got, <-got},
		"a handover to another candidate wakes the named subscriber to read later")
	assert.Equal(t, []string{"announce k", "observed k", "leading k true", "announce k to b", "announce k to c"}, l.calls)

	// No listener: in-process wake-ups only.
	w = notify.NewWakeups("t", notify.NewHub(), nil)
	defer w.Subscribe("k", "", func(v int64) { got <- v })()
	w.Released("k", 43)
	assert.Equal(t, int64(43), <-got)
	w.Observed("k", store.Record{}) // nothing to forward to: no panic
	w.Leading("k", 1, false)
}

func TestHubWakesARepeatedReleaseOnce(t *testing.T) {
	h := notify.NewHub()
	var got []int64
	defer h.Subscribe("k", func(v int64) { got = append(got, v) })()
	assert.True(t, h.Wake("k", 5))
	assert.True(t, h.Wake("k", 5), "announced twice (by the store and by the database): woken once")
	assert.True(t, h.Wake("k", 0))
	assert.True(t, h.Wake("k", 0), "wake-ups without a version are never merged")
	assert.True(t, h.Wake("k", 6))
	assert.True(t, h.Wake("k", notify.HandedOver))
	assert.True(t, h.Wake("k", notify.HandedOver), "handovers carry no version: never merged")
	assert.False(t, h.Wake("other", 1), "no subscriber")
	assert.Equal(t, []int64{5, 0, 0, 6, notify.HandedOver, notify.HandedOver}, got)
}

func TestHubWakesAHandoverTargetToReadAndTheOthersToReadLater(t *testing.T) {
	h := notify.NewHub()
	got := map[string][]int64{}
	for _, id := range []string{"a", "b", "c d", ""} {
		defer h.SubscribeAs("k", id, func(v int64) { got[id] = append(got[id], v) })()
	}
	assert.True(t, h.HandOver("k", "c d"))
	assert.True(t, h.HandOver("k", "c d"), "handovers carry no version: never merged")
	assert.True(t, h.Wake("k", notify.HandedOver), "a handover whose target is not known")
	assert.False(t, h.HandOver("other", "a"), "no subscriber")
	ho, other := notify.HandedOver, notify.HandedToAnother
	assert.Equal(t, map[string][]int64{
		"a":   {other, other, ho},
		"b":   {other, other, ho},
		"c d": {ho, ho, ho},
		"":    {ho, ho, ho}, // subscribed without an ID: cannot tell, reads at once
	}, got)
}

// settle bounds what happens at once on a quiet machine; a loaded 2-core machine
// running the whole suite needs more.
const settle = 30 * time.Second
