package casleader_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/store"
)

// refusingStore shows a released lease to every read but never lets an election
// write win: it loses (a database that judges the row otherwise than the read, as
// with a tick_time in the far future) or fails (a statement the table refuses, as
// a MySQL INT version did with error 1264).
type refusingStore struct {
	*memstore.Store
	fail   error // nil: the write loses
	elects atomic.Int64
	stop   func() // ends Run when the writes run away
}

func (s *refusingStore) Elect(ctx context.Context, key string, cand store.Candidate, version int64) (int64, bool, error) {
	if s.elects.Add(1) > 1000 {
		s.stop() // a hot loop: end it, the test reports it
	}
	return 0, false, s.fail
}

// levelCounter counts log records per level.
type levelCounter struct {
	mu sync.Mutex
	n  map[slog.Level]int
}

func (c *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *levelCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.n[r.Level]++
	c.mu.Unlock()
	return nil
}
func (c *levelCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *levelCounter) WithGroup(string) slog.Handler      { return c }

func (c *levelCounter) count(l slog.Level) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[l]
}

// TestElectionWritesThatNeverWinBackOff: a follower whose election writes keep
// losing or failing on a row that looks free retries them no faster than a backoff
// that doubles up to the poll interval, and says so at WARN, once per retry.LogEvery.
func TestElectionWritesThatNeverWinBackOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail error
	}{
		{"Lost", nil},
		{"Failed", fmt.Errorf("Error 1264 (22003): Out of range value for column 'version'")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New()
				mem.Put(store.Record{Key: "k", Version: 7, Term: 6, Age: time.Hour}) // released
				st := &refusingStore{Store: mem, fail: tc.fail}
				logs := &levelCounter{n: map[slog.Level]int{}}
				c := cfg("a")
				c.PollInterval = time.Second
				c.Logger = slog.New(logs)
				ctx, cancel := context.WithCancel(t.Context())
				st.stop = cancel
				el := newElector(t, st, c)
				done := make(chan error, 1)
				go func() { done <- el.Run(ctx) }()

				const runFor = 20 * time.Second
				time.Sleep(runFor)
				cancel()
				<-done

				// After one immediate retry, waits double from 50 ms (jitter may
				// halve each) up to the poll interval (jitter may halve it too): at
				// most this many writes.
				bound, slept := 1, time.Duration(0)
				for attempt := 1; slept < runFor; attempt++ {
					slept += min(50*time.Millisecond<<(attempt-1), c.PollInterval) / 2
					bound++
				}
				assert.LessOrEqual(t, st.elects.Load(), int64(bound+1), "election writes in %v", runFor)
				assert.Greater(t, st.elects.Load(), int64(runFor/c.PollInterval/2), "the follower gave up campaigning")
				warns := logs.count(slog.LevelWarn)
				assert.GreaterOrEqual(t, warns, 1, "the failing writes are reported at WARN")
				assert.LessOrEqual(t, warns, int(runFor/retry.LogEvery)+1, "WARN lines are rate-limited")
			})
		})
	}
}

// TestFarFutureTickIsNotCampaignedFor: a row whose tick_time lies centuries ahead is
// an invalid row, reported at ERROR once per retry.LogEvery; the follower neither
// campaigns for it nor reads it faster than the backoff allows.
func TestFarFutureTickIsNotCampaignedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		mem.Put(store.Record{Key: "k", Version: 7, Term: 6, LeaderID: "b"})
		_ = mem.Corrupt("k", "far_future_tick")
		st := &refusingStore{Store: mem}
		logs := &levelCounter{n: map[slog.Level]int{}}
		c := cfg("a")
		c.PollInterval = time.Second
		c.Logger = slog.New(logs)
		ctx, cancel := context.WithCancel(t.Context())
		st.stop = cancel
		el := newElector(t, st, c)
		done := make(chan error, 1)
		go func() { done <- el.Run(ctx) }()
		const runFor = 20 * time.Second
		time.Sleep(runFor)
		cancel()
		<-done
		assert.Zero(t, st.elects.Load(), "campaigned for an invalid row")
		assert.LessOrEqual(t, mem.Calls(memstore.OpObserve), int(runFor/(c.PollInterval/2))+8, "reads of the invalid row")
		errs := logs.count(slog.LevelError)
		assert.GreaterOrEqual(t, errs, 1, "the invalid row is reported at ERROR")
		assert.LessOrEqual(t, errs, int(runFor/retry.LogEvery)+1, "ERROR lines are rate-limited")
		assert.False(t, el.IsLeader())
	})
}

var _ store.Driver = (*refusingStore)(nil)
