package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/store"
)

// Batch is the set of batched methods (one statement for many keys) that
// [RunBatch] checks, on top of [Store].
type Batch interface {
	Store
	ObserveMany(ctx context.Context, keys []string) (map[string]store.Record, error)
	InsertMany(ctx context.Context, id string, keys []string) (inserted []store.Won, err error)
	ElectMany(ctx context.Context, id string, from []store.KeyVersion, lease time.Duration) (won []store.Won, err error)
	RenewMany(ctx context.Context, id string, held []store.KeyVersion) (renewed []store.Won, err error)
	ReleaseMany(ctx context.Context, id string, held []store.KeyVersion) (released []store.Won, err error)
}

// RunBatch runs the conformance suite of the batched methods on h, whose stores must
// implement [Batch]. Every batched call must give, per key, the outcome its
// single-key counterpart would.
func RunBatch(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(*testing.T, Batch)
	}{
		{"ObserveManyReadsLikeObserve", observeManyReadsLikeObserve},
		{"InsertManyCreatesOnlyMissingRows", insertManyCreatesOnlyMissingRows},
		{"RenewManyWinsPerKeyOnlyAtVersionAndByHolder", renewManyWinsPerKey},
		{"ElectManyWinsOnlyReleasedOrExpiredLeases", electManyWinsOnlyExpired},
		{"ReleaseManyReleasesOnlyHeldKeys", releaseManyReleasesOnlyHeld},
		{"RacingBatchElectorsYieldOneWinnerPerKey", racingBatchElectors},
		{"MaxBatchOfHostileKeys", maxBatchOfHostileKeys},
		{"OversizedBatchIsRefused", oversizedBatchIsRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _ := open(t, h)
			b, ok := s.(Batch)
			require.True(t, ok, "%T does not implement storetest.Batch", s)
			tc.run(t, b)
		})
	}
}

// tickSlack absorbs the database clock's resolution and rate against the local
// monotonic clock when an age is compared with a locally measured interval.
const tickSlack = 5 * time.Millisecond

func kv(key string, version int64) store.KeyVersion {
	return store.KeyVersion{Key: key, Version: version}
}

// sorted returns the keys of ws, sorted, after checking that each Since is no later
// than now (it bounds the write's execution from below).
func sorted(t *testing.T, ws []store.Won) []string {
	t.Helper()
	for _, w := range ws {
		assert.False(t, w.Since.IsZero(), "key %q: zero Since", w.Key)
		assert.False(t, w.Since.After(time.Now()), "key %q: Since in the future", w.Key)
	}
	s := store.Keys(ws)
	slices.Sort(s)
	return s
}

func observeManyReadsLikeObserve(t *testing.T, s Batch) {
	ctx := t.Context()
	insert(t, s, "a", "x")
	insert(t, s, "b", "y")
	ok, err := s.Release(ctx, "b", "y", 1)
	won(t, ok, err, "Release")
	ok, err = s.RequestStepDown(ctx, "a", 1, "y")
	won(t, ok, err, "RequestStepDown")

	got, err := s.ObserveMany(ctx, []string{"a", "b", "missing", "a"})
	require.NoError(t, err)
	require.Len(t, got, 2, "missing keys are absent, duplicates merged")
	for _, k := range []string{"a", "b"} {
		assert.Equal(t, zeroAge(observe(t, s, k)), zeroAge(got[k]), "key %q", k)
		assert.Less(t, got[k].Age, freshAge)
	}
	got, err = s.ObserveMany(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func insertManyCreatesOnlyMissingRows(t *testing.T, s Batch) {
	ctx := t.Context()
	insert(t, s, "taken", "other")
	ins, err := s.InsertMany(ctx, "me", []string{"taken", "new1", "new2", "new1"})
	require.NoError(t, err)
	assert.Equal(t, []string{"new1", "new2"}, sorted(t, ins))
	for _, k := range []string{"new1", "new2"} {
		rec := observe(t, s, k)
		assert.Equal(t, "me", rec.LeaderID)
		assert.Equal(t, int64(1), rec.Version)
		assert.Equal(t, int64(1), rec.Term)
	}
	assert.Equal(t, "other", observe(t, s, "taken").LeaderID)
	ins, err = s.InsertMany(ctx, "me", []string{"new1"})
	require.NoError(t, err)
	assert.Empty(t, ins, "a second insert never overwrites, not even its own row")
}

func renewManyWinsPerKey(t *testing.T, s Batch) {
	ctx := t.Context()
	for _, k := range []string{"k1", "k2", "stale", "request", "released", "other"} {
		id := "me"
		if k == "other" {
			id = "them"
		}
		insert(t, s, k, id)
	}
	ok, err := s.Renew(ctx, "stale", "me", 1)
	won(t, ok, err, "Renew")
	ok, err = s.RequestStepDown(ctx, "request", 1, "")
	won(t, ok, err, "RequestStepDown")
	ok, err = s.Release(ctx, "released", "me", 1)
	won(t, ok, err, "Release")
	time.Sleep(outlive)

	held := []store.KeyVersion{kv("k1", 1), kv("k2", 1), kv("stale", 1), kv("request", 1), kv("released", 1), kv("other", 1), kv("missing", 1)}
	sent := time.Now()
	renewed, err := s.RenewMany(ctx, "me", held)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1", "k2"}, sorted(t, renewed))
	rec := observe(t, s, "k1")
	assert.Equal(t, int64(2), rec.Version)
	assert.Equal(t, int64(1), rec.Term, "a renewal keeps the term")
	// The row was outlive old before; a fresh tick_time is younger than the call.
	assert.LessOrEqual(t, rec.Age, time.Since(sent)+tickSlack, "a renewal writes a fresh tick_time")
	assert.Equal(t, int64(2), observe(t, s, "stale").Version, "stale version untouched")
	assert.Equal(t, int64(2), observe(t, s, "request").Version, "the step-down request's version stands")
	assert.Equal(t, int64(1), observe(t, s, "other").Version)
	_, found, err := s.Observe(ctx, "missing")
	require.NoError(t, err)
	assert.False(t, found, "a batched write created a row")

	// From the new versions, again.
	renewed, err = s.RenewMany(ctx, "me", []store.KeyVersion{kv("k1", 2), kv("k2", 2), kv("request", 2)})
	require.NoError(t, err)
	assert.Equal(t, []string{"k1", "k2", "request"}, sorted(t, renewed))
}

func electManyWinsOnlyExpired(t *testing.T, s Batch) {
	ctx := t.Context()
	for _, k := range []string{"expired", "released", "stale", "live"} {
		insert(t, s, k, "old")
	}
	ok, err := s.Release(ctx, "released", "old", 1)
	won(t, ok, err, "Release")
	time.Sleep(outlive)
	ok, err = s.Renew(ctx, "live", "old", 1)
	won(t, ok, err, "Renew")
	sent := time.Now()
	won2, err := s.ElectMany(ctx, "me", []store.KeyVersion{kv("expired", 1), kv("released", 2), kv("stale", 0), kv("live", 2), kv("missing", 0)}, shortLease)
	require.NoError(t, err)
	assert.Equal(t, []string{"expired", "released"}, sorted(t, won2))
	for k, v := range map[string]int64{"expired": 2, "released": 3} {
		rec := observe(t, s, k)
		assert.Equal(t, "me", rec.LeaderID)
		assert.Equal(t, v, rec.Version)
		assert.Equal(t, v, rec.Term, "the term is the version at which the leader won")
		assert.LessOrEqual(t, rec.Age, time.Since(sent)+tickSlack, "an election writes a fresh tick_time")
	}
	assert.Equal(t, "old", observe(t, s, "live").LeaderID)
	assert.Equal(t, "old", observe(t, s, "stale").LeaderID)
}

func releaseManyReleasesOnlyHeld(t *testing.T, s Batch) {
	ctx := t.Context()
	insert(t, s, "mine", "me")
	insert(t, s, "moved", "me")
	insert(t, s, "theirs", "them")
	ok, err := s.Renew(ctx, "moved", "me", 1)
	won(t, ok, err, "Renew")
	rel, err := s.ReleaseMany(ctx, "me", []store.KeyVersion{kv("mine", 1), kv("moved", 1), kv("theirs", 1)})
	require.NoError(t, err)
	assert.Equal(t, []string{"mine"}, sorted(t, rel))
	rec := observe(t, s, "mine")
	assert.True(t, rec.Released())
	assert.Equal(t, int64(2), rec.Version)
	assert.Equal(t, int64(1), rec.Term)
	assert.Equal(t, "me", observe(t, s, "moved").LeaderID)
	assert.Equal(t, "them", observe(t, s, "theirs").LeaderID)
}

func racingBatchElectors(t *testing.T, s Batch) {
	ctx := t.Context()
	const nKeys, nCandidates = 50, 8
	var keys []string
	for i := range nKeys {
		keys = append(keys, fmt.Sprintf("key-%02d", i))
	}
	ins, err := s.InsertMany(ctx, "dead", keys)
	require.NoError(t, err)
	require.Len(t, ins, nKeys)
	time.Sleep(outlive)
	from := make([]store.KeyVersion, nKeys)
	for i, k := range keys {
		from[i] = store.KeyVersion{Key: k, Version: 1}
	}
	var mu sync.Mutex
	winners := map[string][]string{}
	var wg sync.WaitGroup
	for c := range nCandidates {
		id := fmt.Sprintf("c%d", c)
		order := slices.Clone(from)
		if c%2 == 1 {
			slices.Reverse(order)
		}
		wg.Go(func() {
			won, err := s.ElectMany(ctx, id, order, shortLease)
			assert.NoError(t, err, id)
			mu.Lock()
			for _, k := range store.Keys(won) {
				winners[k] = append(winners[k], id)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	got, err := s.ObserveMany(ctx, keys)
	require.NoError(t, err)
	for _, k := range keys {
		require.Len(t, winners[k], 1, "key %q: winners %v", k, winners[k])
		assert.Equal(t, winners[k][0], got[k].LeaderID, "key %q", k)
	}
}

func maxBatchOfHostileKeys(t *testing.T, s Batch) {
	ctx := t.Context()
	keys := []string{`x'; DROP TABLE t; --`, `'`, `"`, "`", `\`, `?`, `$1`, `?1`, "new\nline", "ключ-🗳️", strings.Repeat("k", store.MaxKeyLen)}
	for i := len(keys); i < store.MaxBatch; i++ {
		keys = append(keys, fmt.Sprintf("key-%05d", i))
	}
	ins, err := s.InsertMany(ctx, "me", keys)
	require.NoError(t, err)
	require.Len(t, ins, len(keys))
	held := make([]store.KeyVersion, len(keys))
	for i, k := range keys {
		held[i] = store.KeyVersion{Key: k, Version: 1}
	}
	renewed, err := s.RenewMany(ctx, "me", held)
	require.NoError(t, err)
	assert.Len(t, renewed, len(keys))
	got, err := s.ObserveMany(ctx, keys)
	require.NoError(t, err)
	require.Len(t, got, len(keys))
	for _, k := range keys[:11] {
		assert.Equal(t, int64(2), got[k].Version, "key %q", k)
		assert.Equal(t, "me", got[k].LeaderID, "key %q", k)
	}
	for i := range held {
		held[i].Version = 2
	}
	rel, err := s.ReleaseMany(ctx, "me", held)
	require.NoError(t, err)
	assert.Len(t, rel, len(keys))
}

func oversizedBatchIsRefused(t *testing.T, s Batch) {
	ctx := t.Context()
	keys := make([]string, store.MaxBatch+1)
	held := make([]store.KeyVersion, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprint(i)
		held[i] = store.KeyVersion{Key: keys[i], Version: 1}
	}
	_, err := s.ObserveMany(ctx, keys)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.InsertMany(ctx, "me", keys)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.RenewMany(ctx, "me", held)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.ElectMany(ctx, "me", held, shortLease)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.ReleaseMany(ctx, "me", held)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.RenewMany(ctx, "me", []store.KeyVersion{kv("ok", 1), kv("bad ", 1)})
	assert.ErrorIs(t, err, store.ErrInvalidArgument, "an invalid key fails the batch")
}
