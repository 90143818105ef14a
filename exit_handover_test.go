package casleader_test

import (
	"context"
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

// ends records the writes that ended a leader's terms and won their
// compare-and-set: "release" or "handover>" and the target, per key.
type ends struct {
	store.Driver
	hidden bool // writes no members rows: nobody knows this candidate
	mu     sync.Mutex
	by     map[string][]string
}

func (e *ends) note(key, what string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.by == nil {
		e.by = map[string][]string{}
	}
	e.by[key] = append(e.by[key], what)
}

func (e *ends) of(key string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.by[key]...)
}

func (e *ends) ReleaseMany(ctx context.Context, id string, kvs []store.KeyVersion) ([]store.Won, error) {
	won, err := e.Driver.ReleaseMany(ctx, id, kvs)
	for _, w := range won {
		e.note(w.Key, "release")
	}
	return won, err
}

func (e *ends) Release(ctx context.Context, key, id string, v int64) (bool, error) {
	ok, err := e.Driver.Release(ctx, key, id, v)
	if ok {
		e.note(key, "release")
	}
	return ok, err
}

func (e *ends) Handover(ctx context.Context, key, id string, v int64, to store.Candidate) (int64, bool, error) {
	term, ok, err := e.Driver.Handover(ctx, key, id, v, to)
	if ok {
		e.note(key, "handover>"+to.ID)
	}
	return term, ok, err
}

func (e *ends) HandoverMany(ctx context.Context, id string, to store.Candidate, held []store.KeyVersion) ([]store.Won, error) {
	won, err := e.Driver.HandoverMany(ctx, id, to, held)
	for _, w := range won {
		e.note(w.Key, "handover>"+to.ID)
	}
	return won, err
}

func (e *ends) PutMembers(ctx context.Context, ms []store.Member) error {
	if e.hidden {
		return nil
	}
	return e.Driver.PutMembers(ctx, ms)
}

// TestGracefulEndsOfAGroupsTermsHandTheLeaseOn: a group that leads keys whose
// members reads show a live candidate hands each key to it, with one
// compare-and-set and no release, when the key's term ends gracefully: Remove,
// Pause, the end of Run; the candidate then leads the key. A candidate that
// writes no members rows is known to nobody, and the keys are released to it.
func TestGracefulEndsOfAGroupsTermsHandTheLeaseOn(t *testing.T) {
	for _, c := range []struct {
		name   string
		hidden bool
		end    func(g *casleader.Group, stop func())
		want   string
	}{
		{"Remove", false, func(g *casleader.Group, _ func()) { g.Remove("k1", "k2") }, "handover>b"},
		{"Pause", false, func(g *casleader.Group, _ func()) { g.Pause() }, "handover>b"},
		{"RunEnds", false, func(_ *casleader.Group, stop func()) { stop() }, "handover>b"},
		{"RunEndsWithNoLiveCandidateKnown", true, func(_ *casleader.Group, stop func()) { stop() }, "release"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				ks := []string{"k1", "k2"}
				group := func(id string, s store.Driver) *casleader.Group {
					g, err := casleader.NewGroup(s, casleader.GroupConfig{ID: id, Keys: ks,
						LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll})
					require.NoError(t, err)
					return g
				}
				sa := &ends{Driver: st}
				a := group("a", sa)
				stopA := runGroup(t, a)
				synctest.Wait()
				require.True(t, a.IsLeader("k1") && a.IsLeader("k2"))
				b := group("b", &ends{Driver: st, hidden: c.hidden})
				stopB := runGroup(t, b)
				defer stopB()
				// Two members periods: a's reads of the keys it leads see b's rows.
				time.Sleep(lease)
				synctest.Wait()

				c.end(a, stopA)
				// b leads by its wake-up, or at the latest by its next read, a poll
				// away (a wake-up that came while it was busy is not queued).
				for i := 0; i < 20 && !(b.IsLeader("k1") && b.IsLeader("k2")); i++ {
					time.Sleep(poll / 10)
					synctest.Wait()
				}
				for _, k := range ks {
					assert.Equal(t, []string{c.want}, sa.of(k), "%s: the one write that ends a's term", k)
					assert.True(t, b.IsLeader(k), "%s: b leads", k)
				}
				if c.name != "RunEnds" && c.name != "RunEndsWithNoLiveCandidateKnown" {
					stopA()
				}
			})
		})
	}
}

// runGroup starts g's Run in the bubble; stop ends it (once) and checks its error.
func runGroup(t *testing.T, g *casleader.Group) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
}
