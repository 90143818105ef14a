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

	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// fakeNotifier is a store decorator that records the elector's wake-up calls and
// lets a test wake its subscribers, like a notification arriving. The election
// calls are the embedded store's.
type fakeNotifier struct {
	*memstore.Store
	st     *memstore.Store
	mu     sync.Mutex
	events []string
	subs   map[string]func(int64)
}

var _ store.Driver = (*fakeNotifier)(nil)

func newFakeNotifier(st *memstore.Store) *fakeNotifier { return &fakeNotifier{Store: st, st: st} }

func (f *fakeNotifier) log(format string, args ...any) {
	f.mu.Lock()
	f.events = append(f.events, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fakeNotifier) Subscribe(key, _ string, wake func(int64)) func() {
	f.mu.Lock()
	if f.subs == nil {
		f.subs = map[string]func(int64){}
	}
	f.subs[key] = wake
	f.mu.Unlock()
	f.log("subscribe %s", key)
	return func() {
		f.mu.Lock()
		delete(f.subs, key)
		f.mu.Unlock()
		f.log("unsubscribe %s", key)
	}
}

func (f *fakeNotifier) Observed(key string, rec store.Record) {
	f.log("observed %s leader=%q", key, rec.LeaderID)
}

func (f *fakeNotifier) Leading(key string, token int64, leading bool) {
	// The row as the notifier would find it when told: for leading=false, the
	// release must already be written.
	rec, _, _ := f.st.Observe(context.Background(), key)
	f.log("leading %s %d %v row-leader=%q", key, token, leading, rec.LeaderID)
}

func (f *fakeNotifier) wake(key string) {
	f.mu.Lock()
	w := f.subs[key]
	f.mu.Unlock()
	if w != nil {
		w(0)
	}
}

func (f *fakeNotifier) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

func TestNotifierHearsOfTermsAfterTheReleaseIsWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		n := newFakeNotifier(st)
		el := newElector(t, n, cfg("a"))
		stop := running(t, el)
		time.Sleep(time.Millisecond)
		require.True(t, el.IsLeader())
		tok := el.Token()
		require.NoError(t, el.Resign(t.Context()))
		synctest.Wait() // the elector has read the row again and sleeps
		require.NoError(t, stop())
		assert.Equal(t, []string{
			"subscribe k",
			fmt.Sprintf(`leading k %d true row-leader="a"`, tok),
			fmt.Sprintf(`leading k %d false row-leader=""`, tok), // told after the release was written
			`observed k leader=""`,                               // then it follows (cooling down)
			"unsubscribe k",
		}, n.took())
	})
}

func TestNotificationWakesASleepingFollowerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		na, nb := newFakeNotifier(st), newFakeNotifier(st)
		ca, cb := cfg("a"), cfg("b")
		// Without the wake-up, b would sleep until the lease expires or a minute passes.
		ca.LeaseDuration, ca.RenewDeadline, ca.PollInterval = time.Hour, 50*time.Minute, time.Minute
		cb.LeaseDuration, cb.RenewDeadline, cb.PollInterval = time.Hour, 50*time.Minute, time.Minute
		a := newElector(t, na, ca)
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		b := newElector(t, nb, cb)
		stopB := running(t, b)
		time.Sleep(time.Millisecond)
		require.Equal(t, "a", b.Leader())
		assert.Contains(t, nb.took(), `observed k leader="a"`, "the follower tells the notifier what it saw")

		require.NoError(t, a.ResignFor(t.Context(), time.Hour))
		time.Sleep(time.Second)
		assert.False(t, b.IsLeader(), "no notification yet: b sleeps")
		nb.wake("k")
		time.Sleep(time.Millisecond)
		assert.True(t, b.IsLeader(), "the wake-up made b read the released row and win")
		require.NoError(t, stopA())
		require.NoError(t, stopB())
	})
}
