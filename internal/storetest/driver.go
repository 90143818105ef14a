package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/members"
	"github.com/casleader/casleader/store"
)

// membersIDs returns the members as "key/id:role" strings, in the order read.
func membersIDs(ms []store.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Key+"/"+m.ID+":"+m.Role)
	}
	return out
}

// incarnations returns the members' incarnations, in the order read.
func incarnations(ms []store.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Incarnation)
	}
	return out
}

// membersAreWrittenReadAndDeleted: the members table holds one row per key and
// candidate, read back per key (by ID) and for many keys (by key and ID) with an
// age by the store's clock and the incarnation written, deleted per candidate and
// key, and pruned by age only.
func membersAreWrittenReadAndDeleted(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	require.NoError(t, s.PutMembers(ctx, []store.Member{
		{Key: "k1", ID: "b", Role: members.RoleFollower, Priority: 1, Incarnation: "b-1"},
		{Key: "k1", ID: "a", Role: members.RoleLeader, Priority: 2, Incarnation: "a-1"},
		{Key: "k2", ID: "a", Role: members.RoleFollower, Paused: true},
	}))
	ms, err := s.Members(ctx, "k1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1/a:leader", "k1/b:follower"}, membersIDs(ms), "ordered by ID")
	for _, m := range ms {
		assert.GreaterOrEqual(t, m.Age, time.Duration(0))
		assert.Less(t, m.Age, freshAge, "a row just written")
	}
	assert.Equal(t, int64(2), ms[0].Priority)
	assert.Equal(t, []string{"a-1", "b-1"}, incarnations(ms), "each row's incarnation")
	ms, err = s.MembersOf(ctx, []string{"k2", "k1"}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1/a:leader", "k1/b:follower", "k2/a:follower"}, membersIDs(ms), "ordered by key and ID")
	assert.True(t, ms[2].Paused)
	assert.Equal(t, []string{"a-1", "b-1", ""}, incarnations(ms), "each row's incarnation, none written for k2")

	// b's next process rewrites its row with its own incarnation.
	require.NoError(t, s.PutMembers(ctx, []store.Member{{Key: "k1", ID: "b", Role: members.RoleLeader, Incarnation: "b-2"}}))
	require.NoError(t, s.DeleteMembers(ctx, "a", []string{"k1"}))
	ms, err = s.Members(ctx, "k1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1/b:leader"}, membersIDs(ms), "a's row of k1 deleted, b's rewritten")
	assert.Equal(t, []string{"b-2"}, incarnations(ms), "the rewrite replaced the incarnation")
	n, err := s.PruneMembers(ctx, time.Hour)
	require.NoError(t, err)
	assert.Zero(t, n, "no row is an hour old")
	ms, err = s.MembersOf(ctx, []string{"k1", "k2"}, time.Minute)
	require.NoError(t, err)
	assert.Len(t, ms, 2)
}

// subscribersAreWokenOrNotAtAll: a subscription returns an unsubscribe that may be
// called more than once; the store's own release wakes its subscribers in this
// process with the released version (a store with [Harness.NoWakeups] never wakes
// them); nothing wakes them once unsubscribed.
func subscribersAreWokenOrNotAtAll(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	got := make(chan int64, 16)
	unsubscribe := s.Subscribe("k", "b", func(v int64) { got <- v })
	term := insert(t, s, "k", "a")
	ok, err := s.Release(ctx, "k", "a", term)
	won(t, ok, err, "release")
	if h.NoWakeups {
		select {
		case v := <-got:
			t.Fatalf("a store without wake-ups woke its subscriber with %d", v)
		case <-time.After(100 * time.Millisecond):
		}
	} else {
		for v := int64(0); v != term+1; { // a listener's start wakes with 0 first
			select {
			case v = <-got:
			case <-time.After(freshAge):
				t.Fatalf("the store's own release did not wake its subscriber with version %d", term+1)
			}
		}
	}
	unsubscribe()
	unsubscribe()
	for len(got) > 0 { // a listener's own wake-ups (its start)
		<-got
	}
	rec := observe(t, s, "k")
	t2, ok, err := s.ElectReleased(ctx, "k", store.Candidate{ID: "a", Lease: longLease})
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, t2, rec.Version)
	_, ok, err = s.Handover(ctx, "k", "a", t2, store.Candidate{ID: "b"})
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case v := <-got:
		t.Fatalf("woken with %d after unsubscribing", v)
	case <-time.After(100 * time.Millisecond):
	}
}
