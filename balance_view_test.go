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
	"github.com/casleader/casleader/store"
)

// handovers records the targets of the handovers that won their compare-and-set
// (one key or many),
// and has each target claim its lease at once, for an hour, as a candidate that
// is not running here.
type handovers struct {
	*memstore.Store
	mu sync.Mutex
	to map[string][]string // per key
}

func (h *handovers) Handover(ctx context.Context, key, id string, v int64, to store.Candidate) (int64, bool, error) {
	term, ok, err := h.Store.Handover(ctx, key, id, v, to)
	if ok {
		h.claimed(key, to.ID, term)
	}
	return term, ok, err
}

// claimed records the handover of key to to in term, and has to claim it.
func (h *handovers) claimed(key, to string, term int64) {
	h.mu.Lock()
	h.to[key] = append(h.to[key], to)
	h.mu.Unlock()
	h.Put(store.Record{Key: key, Version: term + 1, Term: term + 1, LeaderID: to, Lease: time.Hour, Incarnation: to})
}

func (h *handovers) HandoverMany(ctx context.Context, id string, to store.Candidate, held []store.KeyVersion) ([]store.Won, error) {
	won, err := h.Store.HandoverMany(ctx, id, to, held)
	for _, w := range won {
		h.claimed(w.Key, to.ID, w.Term)
	}
	return won, err
}

func (h *handovers) all() map[string][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]string{}
	for k, v := range h.to {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// A balanced candidate hands its surplus to the candidates below their share by
// the rows as they are, not by its followers' last reads: a follower reads a live
// lease again only after PollInterval (here an hour), so those reads can be old.
// Here candidate c leads 6 of 12 keys beside b's 6; b's keys then move to e
// behind c's back (c's reads still say b), and d and e join. By the rows, b and
// d lead none and e leads 6: c hands its 3 extra keys to b and d, each once, and
// none to e, which would have to hand them on.
func TestBalanceHandsOverByTheRowsNotByStaleReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		st := &handovers{Store: mem, to: map[string][]string{}}
		var ks, bs []string
		for i := range 12 {
			ks = append(ks, fmt.Sprintf("k%02d", i))
		}
		live := func(ids ...string) {
			ms := make([]store.Member, len(ids))
			for i, id := range ids {
				ms[i] = store.Member{Key: ks[0], ID: id, Role: "follower"}
			}
			require.NoError(t, mem.PutMembers(t.Context(), ms))
		}
		for _, k := range ks[:6] {
			mem.Put(store.Record{Key: k, Version: 1, Term: 1, LeaderID: "b", Lease: time.Hour, Incarnation: "b1"})
			bs = append(bs, k)
		}
		live("b")
		g, err := casleader.NewGroup(st, casleader.GroupConfig{ID: "c", Keys: ks, Balance: true,
			LeaseDuration: 10 * time.Second, RenewDeadline: 6 * time.Second, HeartbeatInterval: 2 * time.Second, PollInterval: time.Hour})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		time.Sleep(time.Second) // c reads every row and takes the 6 free keys
		live("b")
		time.Sleep(5 * time.Second)
		require.Equal(t, 6, g.Stats().Leading, "c takes the keys b does not lead")

		for _, k := range bs {
			mem.Put(store.Record{Key: k, Version: 2, Term: 2, LeaderID: "e", Lease: time.Hour, Incarnation: "e1"})
		}
		for range 6 { // three balanced periods (half a lease each)
			live("b", "d", "e")
			time.Sleep(5 * time.Second)
		}
		got := st.all() // before Run ends: its end hands over the rest
		cancel()
		require.NoError(t, <-done)

		n := 0
		for k, to := range got {
			assert.Len(t, to, 1, "key %s handed over once: %v", k, to)
			assert.NotContains(t, to, "e", "key %s handed to e, which leads 6 keys by the rows (its share is 3): %v", k, got)
			n += len(to)
		}
		assert.Equal(t, 3, n, "c hands over exactly its 3 keys beyond its share of 12 over 4: %v", got)
	})
}
