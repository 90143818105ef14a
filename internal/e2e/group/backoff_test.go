package group_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// losingStore shows released leases to every read but never lets an election win,
// as a database that judges the rows otherwise than the reads do.
type losingStore struct {
	*memstore.Store
	elects atomic.Int64
	stop   func()
}

func (s *losingStore) ElectMany(context.Context, store.Candidate, []store.KeyVersion) ([]store.Won, error) {
	if s.elects.Add(1) > 1000 {
		s.stop() // a hot loop: end it, the test reports it
	}
	return nil, nil
}

// Elect is ElectMany for one key, as the group sends it for a batch of one.
func (s *losingStore) Elect(ctx context.Context, _ string, cand store.Candidate, version int64) (int64, bool, error) {
	_, err := s.ElectMany(ctx, cand, nil)
	return 0, false, err
}

// TestElectionsThatNeverWinBackOff: a key whose election writes keep losing on a row
// that looks free is retried no faster than a backoff that doubles up to the poll
// interval.
func TestElectionsThatNeverWinBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		mem.Put(store.Record{Key: "k", Version: 7, Term: 6, Age: time.Hour}) // released
		ctx, cancel := context.WithCancel(context.Background())
		st := &losingStore{Store: mem, stop: cancel}
		const pollEvery = time.Second
		g := newGroup(t, st, "a", []string{"k"}, func(c *casleader.GroupConfig) { c.PollInterval = pollEvery })
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		const runFor = 20 * time.Second
		time.Sleep(runFor)
		cancel()
		<-done

		// Waits double from 50 ms (jitter may halve each) up to the poll interval.
		bound, slept := 0, time.Duration(0)
		for attempt := 1; slept < runFor; attempt++ {
			slept += min(50*time.Millisecond<<(attempt-1), pollEvery) / 2
			bound++
		}
		assert.LessOrEqual(t, st.elects.Load(), int64(bound+1), "election writes in %v", runFor)
		assert.Greater(t, st.elects.Load(), int64(runFor/pollEvery/2), "the group gave up campaigning")
		assert.False(t, g.IsLeader("k"))
	})
}
