package group_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/postgres"
)

var _ store.Driver = (*hub)(nil)

// hub is a store decorator whose wake-ups wake the followers of a key when its
// leader's term ends, as the release statement's notification does on
// PostgreSQL. Every other method is the embedded store's.
type hub struct {
	store.Driver
	mu      sync.Mutex
	wake    map[string][]func(int64)
	ids     map[string][]string // the IDs given to SubscribeAs, in the order of wake
	leading map[string]bool
}

func newHub(st store.Driver) *hub {
	return &hub{Driver: st, wake: map[string][]func(int64){}, ids: map[string][]string{}, leading: map[string]bool{}}
}

func (h *hub) Subscribe(key, id string, wake func(int64)) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wake[key] = append(h.wake[key], wake)
	h.ids[key] = append(h.ids[key], id)
	return func() {}
}

// handOver wakes the subscribers of key as a handover to candidate to does.
func (h *hub) handOver(key, to string) {
	h.mu.Lock()
	wake, ids := h.wake[key], h.ids[key]
	h.mu.Unlock()
	for i, w := range wake {
		if ids[i] == to {
			w(notify.HandedOver)
		} else {
			w(notify.HandedToAnother)
		}
	}
}

func (h *hub) Observed(string, store.Record) {}

func (h *hub) Leading(key string, _ int64, leading bool) {
	h.mu.Lock()
	h.leading[key] = leading
	wake := h.wake[key]
	h.mu.Unlock()
	if !leading {
		for _, w := range wake {
			w(0)
		}
	}
}

func TestWakeupsWakeFollowedKeysOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		n := newHub(st)
		ks := keys(4)
		slow := func(c *casleader.GroupConfig) { c.PollInterval = 10 * lease }
		a := newGroup(t, n, "a", ks, slow)
		stopA := running(t, a)
		time.Sleep(time.Millisecond)
		require.Equal(t, 4, count(a, ks))
		b := newGroup(t, n, "b", ks, slow)
		stopB := running(t, b)
		time.Sleep(lease + lease/3) // between two of b\'s reads
		n.mu.Lock()
		assert.True(t, n.leading[ks[0]], "Leading(true) told")
		n.mu.Unlock()

		a.Remove(ks[:2]...)
		time.Sleep(5 * time.Millisecond)
		assert.Equal(t, 2, count(b, ks[:2]), "woken followers take the released keys at once, not after PollInterval")
		assert.Zero(t, count(b, ks[2:]))
		stopA()
		stopB()
	})
}

// TestHandoverWakesTheTargetKeyAtOnceAndOthersALittleLater: a followed key woken by
// a handover to another candidate is read timing.HandoverReadDelay later, after the
// target's read; one handed to this group is read at once, with no election (the
// row may hand the term to this process).
func TestHandoverWakesTheTargetKeyAtOnceAndOthersALittleLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(1)
		// A live lease that nobody renews: the group's next read of it is due
		// at least 360 ms (its expiry, or the last renewal expected before it) after
		// its first.
		_, _, err := st.Insert(t.Context(), ks[0], store.Candidate{ID: "x"})
		require.NoError(t, err)
		n := newHub(st)
		b := newGroup(t, n, "b", ks, func(c *casleader.GroupConfig) { c.PollInterval = 10 * lease })
		stop := running(t, b)
		defer stop()
		time.Sleep(time.Millisecond)
		reads := func() int { return st.Calls(memstore.OpObserveMany) + st.Calls(memstore.OpObserve) }
		r0 := reads()
		require.Positive(t, r0)
		n.mu.Lock()
		assert.Equal(t, []string{"b"}, n.ids[ks[0]], "subscribed with the group's ID")
		n.mu.Unlock()

		n.handOver(ks[0], "c")
		time.Sleep(timing.HandoverReadDelay - time.Millisecond)
		assert.Equal(t, r0, reads(), "handed to another: not read at once, the target reads first")
		time.Sleep(2 * time.Millisecond)
		assert.Equal(t, r0+1, reads(), "read a few milliseconds later")

		claims := st.Calls(memstore.OpElectReleased) + st.Calls(memstore.OpElect)
		n.handOver(ks[0], "b")
		time.Sleep(time.Microsecond)
		assert.Equal(t, r0+2, reads(), "handed to this group: read at once")
		assert.Equal(t, claims, st.Calls(memstore.OpElectReleased)+st.Calls(memstore.OpElect), "the row was not handed to b (a forged wake-up): the read shows it, and nothing is written")
	})
}

// TestManyKeysWokenAtOnceAreClaimedInBatches: keys woken without a version (or
// handed over) one at a time are each claimed by a statement of their own, sent
// at once; when many are woken together (a leader gave many up), those beyond
// Parallel are read in one batch and claimed by batched elections, instead of a
// statement per key queued behind each other.
func TestManyKeysWokenAtOnceAreClaimedInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(20)
		ctx := t.Context()
		versions := map[string]int64{}
		for _, k := range ks {
			v, _, err := st.Insert(ctx, k, store.Candidate{ID: "x", Lease: lease})
			require.NoError(t, err)
			versions[k] = v
		}
		b := newGroup(t, st, "b", ks, func(c *casleader.GroupConfig) { c.PollInterval = 10 * lease; c.Parallel = 2 })
		stop := running(t, b)
		defer stop()
		time.Sleep(time.Millisecond)
		require.Zero(t, count(b, ks), "x leads every key")
		for _, k := range ks {
			_, ok, err := st.Handover(ctx, k, "x", versions[k], store.Candidate{ID: "b"})
			require.NoError(t, err)
			require.True(t, ok)
		}
		reads0 := st.Calls(memstore.OpObserveMany) + st.Calls(memstore.OpObserve)
		b.Wake(ks...) // one wake-up of all of them, without a version
		time.Sleep(time.Millisecond)
		assert.Equal(t, len(ks), count(b, ks), "b claimed every key handed to it, long before its next read")
		assert.Equal(t, 2, st.Calls(memstore.OpElectReleased), "a statement of its own for Parallel keys")
		reads := st.Calls(memstore.OpObserveMany) + st.Calls(memstore.OpObserve) - reads0
		assert.Equal(t, 3, reads, "the other 18 keys read in batches of 7")
		assert.Equal(t, 3, st.Calls(memstore.OpElectMany), "and claimed in batches of 7")
	})
}

func TestPauseReleasesAndResumeCampaigns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(10)
		g := newGroup(t, st, "a", ks, nil)
		stop := running(t, g)
		time.Sleep(time.Millisecond)
		require.Equal(t, 10, count(g, ks))
		g.Pause()
		time.Sleep(time.Millisecond)
		assert.Zero(t, count(g, ks))
		recs, err := st.ObserveMany(t.Context(), ks)
		require.NoError(t, err)
		for _, k := range ks {
			assert.True(t, recs[k].Released(), "key %q: a pause releases", k)
		}
		time.Sleep(3 * lease)
		assert.Zero(t, count(g, ks), "a paused group takes no key")
		g.Resume()
		time.Sleep(poll + poll/10)
		assert.Equal(t, 10, count(g, ks), "a resumed group campaigns again")
		stop()
	})
}

func TestObserverNeverCampaignsAndReportsLeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		ks := keys(3)
		o := newGroup(t, st, "o", ks, func(c *casleader.GroupConfig) { c.Observer = true })
		stopO := running(t, o)
		time.Sleep(2 * lease)
		assert.Zero(t, count(o, ks), "an observer never creates a row")
		a := newGroup(t, st, "a", ks[:2], nil)
		stopA := running(t, a)
		time.Sleep(poll + poll/10)
		assert.Equal(t, "a", o.Leader(ks[0]))
		assert.Equal(t, "a", o.Lease(ks[1]).Leader())
		assert.Empty(t, o.Leader(ks[2]), "no row, no leader")
		stopA()
		time.Sleep(3 * lease)
		assert.Zero(t, count(o, ks), "an observer never takes a released key")
		assert.Empty(t, o.Leader(ks[0]))
		stopO()
	})
}

func TestStoreWakeupsWakeFollowedKeysOnRelease(t *testing.T) {
	// Two groups on separate pools, as in two processes; b would read its keys only
	// every minute. a's exit releases them, and the release wakes b (LISTEN/NOTIFY,
	// with the released versions).
	table := testdb.Name(t)
	open := func() *postgres.Store {
		s, err := postgres.New(pgdb.Postgres(t), table)
		require.NoError(t, err)
		return s
	}
	sa, sb := open(), open()
	require.NoError(t, sa.CreateTable(t.Context()))
	ks := keys(5)
	slow := func(c *casleader.GroupConfig) {
		c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval = time.Minute, 40*time.Second, 200*time.Millisecond, time.Minute
	}
	a := newGroup(t, sa, "a", ks, slow)
	stopA := running(t, a)
	require.Eventually(t, func() bool { return count(a, ks) == len(ks) }, 10*time.Second, time.Millisecond)
	b := newGroup(t, sb, "b", ks, slow)
	stopB := running(t, b)
	defer stopB()
	require.Eventually(t, func() bool {
		for _, k := range ks {
			if b.Leader(k) != "a" {
				return false
			}
		}
		return sb.Listening()
	}, 10*time.Second, time.Millisecond, "b follows every key and listens")
	stopA()
	require.Eventually(t, func() bool { return count(b, ks) == len(ks) }, 10*time.Second, time.Millisecond,
		"b takes every key over long before its next read, a minute away")
}
