package group_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// renewOrder records the keys of every renewal, in the order they were sent.
type renewOrder struct {
	*memstore.Store
	mu   sync.Mutex
	sent []string
}

func (s *renewOrder) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	s.mu.Lock()
	for _, kv := range held {
		s.sent = append(s.sent, kv.Key)
	}
	s.mu.Unlock()
	return s.Store.RenewMany(ctx, id, held)
}

// Renew records the key of a single-key renewal (a batch of one).
func (s *renewOrder) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	s.mu.Lock()
	s.sent = append(s.sent, key)
	s.mu.Unlock()
	return s.Store.Renew(ctx, key, id, version)
}

func (s *renewOrder) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// A round of renewals sends the keys in the order of their trust deadlines, so a
// key is renewed once per round at the same place: each round repeats the order of
// the one before. With keys in a map's order, 8 keys would come in the same order
// twice in a row with a probability of 1 in 40,320.
func TestRenewalRoundsRenewTheEarliestDeadlineFirst(t *testing.T) {
	st := &renewOrder{Store: memstore.New()}
	ks := keys(8)
	g := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) { c.BatchSize, c.Parallel = 1, 1 })
	stop := running(t, g)
	defer stop()
	const rounds = 4
	require.Eventually(t, func() bool { return len(st.keys()) >= rounds*len(ks) }, 20*lease, heartbeat/4)
	sent := st.keys()
	require.Equal(t, len(ks), count(g, ks), "the group leads every key")
	first := sent[:len(ks)]
	require.ElementsMatch(t, ks, first, "the first round renews every key once")
	for r := 1; r < rounds; r++ {
		require.Equal(t, first, sent[r*len(ks):(r+1)*len(ks)], "round %d renews the keys in the order of round 1", r+1)
	}
}
