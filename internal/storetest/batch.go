package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/store"
)

// RunBatch runs the conformance suite of the batched methods of [store.Driver] on
// h. Every batched call must give, per key, the outcome its
// single-key counterpart would.
func RunBatch(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.Corrupt, "Harness.Corrupt")
	for _, tc := range []struct {
		name string
		run  func(*testing.T, batchStore)
	}{
		{"ObserveManyReadsLikeObserve", observeManyReadsLikeObserve},
		{"InsertManyCreatesOnlyMissingRows", insertManyCreatesOnlyMissingRows},
		{"RenewManyWinsPerKeyOnlyAtVersionAndByHolder", renewManyWinsPerKey},
		{"ElectManyWinsOnlyReleasedOrExpiredLeases", electManyWinsOnlyExpired},
		{"ElectManyTermsOutrunARolledBackRow", electManyTermsOutrunARolledBackRow},
		{"ReleaseManyReleasesOnlyHeldKeys", releaseManyReleasesOnlyHeld},
		{"HandoverManyHandsOverOnlyHeldKeys", handoverManyHandsOverOnlyHeld},
		{"RacingBatchElectorsYieldOneWinnerPerKey", racingBatchElectors},
		{"BatchesOfOneKeySetInAnyOrderNeverDeadlock", batchesInAnyOrderNeverDeadlock},
		{"MaxBatchOfHostileKeys", maxBatchOfHostileKeys},
		{"OversizedBatchIsRefused", oversizedBatchIsRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, table := open(t, h)
			tc.run(t, batchStore{Driver: s, corrupt: func(key, what string) { h.Corrupt(t, table, key, what) }})
		})
	}
}

// batchStore is the store of one subtest, on a table of its own, with corrupt, which
// overwrites a row of that table as [Harness.Corrupt] does.
type batchStore struct {
	store.Driver
	corrupt func(key, what string)
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
	s := wonKeys(ws)
	slices.Sort(s)
	return s
}

// noTerms checks that the keys of a batched write that starts no term (RenewMany,
// ReleaseMany) report none.
func noTerms(t *testing.T, ws []store.Won, what string) {
	t.Helper()
	for _, w := range ws {
		assert.Zero(t, w.Term, "%s: key %q reported a term", what, w.Key)
	}
}

// newTerms checks the keys won by a batched write that starts a term (ElectMany,
// InsertMany) for id: each term is above the version the key was won from (from,
// 0 for a missing key), and the row now holds it as both term and version, with id
// as its leader. It returns the terms by key.
func newTerms(t *testing.T, s store.Driver, id string, ws []store.Won, from map[string]int64, what string) map[string]int64 {
	t.Helper()
	terms := make(map[string]int64, len(ws))
	for _, w := range ws {
		require.Greater(t, w.Term, from[w.Key], "%s: key %q: the new term is not above the version it was won from", what, w.Key)
		rec := observe(t, s, w.Key)
		assert.Equal(t, id, rec.LeaderID, "%s: key %q", what, w.Key)
		assert.Equal(t, w.Term, rec.Term, "%s: key %q: the reported term is not the row's", what, w.Key)
		assert.Equal(t, w.Term, rec.Version, "%s: key %q: the row's version is not its new term", what, w.Key)
		terms[w.Key] = w.Term
	}
	return terms
}

func observeManyReadsLikeObserve(t *testing.T, s batchStore) {
	ctx := t.Context()
	va := insert(t, s, "a", "x")
	vb := insert(t, s, "b", "y")
	ok, err := s.Release(ctx, "b", "y", vb)
	won(t, ok, err, "Release")
	ok, err = s.RequestStepDown(ctx, "a", va, "y")
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

func insertManyCreatesOnlyMissingRows(t *testing.T, s batchStore) {
	ctx := t.Context()
	insert(t, s, "taken", "other")
	ins, err := s.InsertMany(ctx, store.Candidate{ID: "me"}, []string{"taken", "new1", "new2", "new1"})
	require.NoError(t, err)
	assert.Equal(t, []string{"new1", "new2"}, sorted(t, ins))
	newTerms(t, s, "me", ins, nil, "InsertMany")
	assert.Equal(t, "other", observe(t, s, "taken").LeaderID)
	ins, err = s.InsertMany(ctx, store.Candidate{ID: "me"}, []string{"new1"})
	require.NoError(t, err)
	assert.Empty(t, ins, "a second insert never overwrites, not even its own row")
}

func renewManyWinsPerKey(t *testing.T, s batchStore) {
	ctx := t.Context()
	v := map[string]int64{}
	for _, k := range []string{"k1", "k2", "stale", "request", "released", "other"} {
		id := "me"
		if k == "other" {
			id = "them"
		}
		v[k] = insert(t, s, k, id)
	}
	ok, err := s.Renew(ctx, "stale", "me", v["stale"])
	won(t, ok, err, "Renew")
	ok, err = s.RequestStepDown(ctx, "request", v["request"], "")
	won(t, ok, err, "RequestStepDown")
	ok, err = s.Release(ctx, "released", "me", v["released"])
	won(t, ok, err, "Release")
	time.Sleep(outlive)

	held := []store.KeyVersion{kv("k1", v["k1"]), kv("k2", v["k2"]), kv("stale", v["stale"]), kv("request", v["request"]),
		kv("released", v["released"]), kv("other", v["other"]), kv("missing", 1)}
	sent := time.Now()
	renewed, err := s.RenewMany(ctx, "me", held)
	require.NoError(t, err)
	assert.Equal(t, []string{"k1", "k2"}, sorted(t, renewed))
	noTerms(t, renewed, "RenewMany")
	rec := observe(t, s, "k1")
	assert.Equal(t, v["k1"]+1, rec.Version, "a renewal bumps the version by one")
	assert.Equal(t, v["k1"], rec.Term, "a renewal keeps the term")
	// The row was outlive old before; a fresh tick_time is younger than the call.
	assert.LessOrEqual(t, rec.Age, time.Since(sent)+tickSlack, "a renewal writes a fresh tick_time")
	assert.Equal(t, v["stale"]+1, observe(t, s, "stale").Version, "stale version untouched")
	assert.Equal(t, v["request"]+1, observe(t, s, "request").Version, "the step-down request's version stands")
	assert.Equal(t, v["other"], observe(t, s, "other").Version)
	_, found, err := s.Observe(ctx, "missing")
	require.NoError(t, err)
	assert.False(t, found, "a batched write created a row")

	// From the new versions, again.
	renewed, err = s.RenewMany(ctx, "me", []store.KeyVersion{kv("k1", v["k1"]+1), kv("k2", v["k2"]+1), kv("request", v["request"]+1)})
	require.NoError(t, err)
	assert.Equal(t, []string{"k1", "k2", "request"}, sorted(t, renewed))
}

func electManyWinsOnlyExpired(t *testing.T, s batchStore) {
	ctx := t.Context()
	v := map[string]int64{}
	for _, k := range []string{"expired", "released", "stale"} {
		v[k] = insert(t, s, k, "old")
	}
	// "live" records a lease of a minute in its row, so that however long a
	// loaded machine takes between its renewal and the election, it is live.
	term, ok, err := s.Insert(ctx, "live", store.Candidate{ID: "old", Lease: time.Minute})
	v["live"] = newTerm(t, term, ok, err, 0, "Insert")
	ok, err = s.Release(ctx, "released", "old", v["released"])
	won(t, ok, err, "Release")
	time.Sleep(outlive)
	ok, err = s.Renew(ctx, "live", "old", v["live"])
	won(t, ok, err, "Renew")
	from := map[string]int64{"expired": v["expired"], "released": v["released"] + 1, "stale": v["stale"] - 1, "live": v["live"] + 1, "missing": 0}
	sent := time.Now()
	won2, err := s.ElectMany(ctx, store.Candidate{ID: "me", Lease: shortLease}, []store.KeyVersion{kv("expired", from["expired"]), kv("released", from["released"]),
		kv("stale", from["stale"]), kv("live", from["live"]), kv("missing", from["missing"])})

	require.NoError(t, err)
	assert.Equal(t, []string{"expired", "released"}, sorted(t, won2))
	terms := newTerms(t, s, "me", won2, from, "ElectMany")
	for k, term := range terms {
		assert.GreaterOrEqual(t, term-v[k], outlive.Microseconds(),
			"key %q: the term follows the database clock in microseconds: %v passed since the first term", k, outlive)
		assert.LessOrEqual(t, observe(t, s, k).Age, time.Since(sent)+tickSlack, "key %q: an election writes a fresh tick_time", k)
	}
	assert.Equal(t, "old", observe(t, s, "live").LeaderID)
	assert.Equal(t, "old", observe(t, s, "stale").LeaderID)

	// The new leader renews from its term, by one.
	renewed, err := s.RenewMany(ctx, "me", []store.KeyVersion{kv("expired", terms["expired"]), kv("released", terms["released"])})
	require.NoError(t, err)
	assert.Equal(t, []string{"expired", "released"}, sorted(t, renewed))
}

// electManyTermsOutrunARolledBackRow: after a failover that lost writes, rows are
// back at an old version; the next batched election must still issue terms above
// every term issued before, so fenced writes never go backwards.
func electManyTermsOutrunARolledBackRow(t *testing.T, s batchStore) {
	ctx := t.Context()
	keys := []string{"k1", "k2"}
	ins, err := s.InsertMany(ctx, store.Candidate{ID: "a"}, keys)
	require.NoError(t, err)
	require.Len(t, ins, len(keys))
	first := newTerms(t, s, "a", ins, nil, "InsertMany")
	rel, err := s.ReleaseMany(ctx, "a", []store.KeyVersion{kv("k1", first["k1"]), kv("k2", first["k2"])})
	require.NoError(t, err)
	require.Len(t, rel, len(keys))
	from := map[string]int64{"k1": first["k1"] + 1, "k2": first["k2"] + 1}
	el, err := s.ElectMany(ctx, store.Candidate{ID: "b", Lease: longLease}, []store.KeyVersion{kv("k1", from["k1"]), kv("k2", from["k2"])})
	require.NoError(t, err)
	require.Len(t, el, len(keys))
	lostTerms := newTerms(t, s, "b", el, from, "ElectMany")
	renewed, err := s.RenewMany(ctx, "b", []store.KeyVersion{kv("k1", lostTerms["k1"]), kv("k2", lostTerms["k2"])})
	require.NoError(t, err)
	require.Len(t, renewed, len(keys))

	for _, k := range keys {
		s.corrupt(k, RolledBack)
		old := observe(t, s, k)
		require.Equal(t, int64(1), old.Version, "key %q: the rolled-back row", k)
		require.Equal(t, int64(1), old.Term, "key %q", k)
		require.True(t, old.Expired(longLease), "key %q: the rolled-back lease is an hour old", k)
	}
	el, err = s.ElectMany(ctx, store.Candidate{ID: "c", Lease: longLease}, []store.KeyVersion{kv("k1", 1), kv("k2", 1)})
	require.NoError(t, err)
	assert.Equal(t, keys, sorted(t, el))
	// Above the lost terms, not only above the rolled-back version.
	newTerms(t, s, "c", el, lostTerms, "ElectMany from the rolled-back version")

	// The leader of the lost terms cannot renew them: their versions are gone, and the
	// CAS names versions the rows will not reach again.
	renewed, err = s.RenewMany(ctx, "b", []store.KeyVersion{kv("k1", lostTerms["k1"]+1), kv("k2", lostTerms["k2"]+1)})
	require.NoError(t, err)
	assert.Empty(t, renewed, "renewals of the lost terms")
}

func releaseManyReleasesOnlyHeld(t *testing.T, s batchStore) {
	ctx := t.Context()
	mine := insert(t, s, "mine", "me")
	moved := insert(t, s, "moved", "me")
	theirs := insert(t, s, "theirs", "them")
	ok, err := s.Renew(ctx, "moved", "me", moved)
	won(t, ok, err, "Renew")
	rel, err := s.ReleaseMany(ctx, "me", []store.KeyVersion{kv("mine", mine), kv("moved", moved), kv("theirs", theirs)})
	require.NoError(t, err)
	assert.Equal(t, []string{"mine"}, sorted(t, rel))
	noTerms(t, rel, "ReleaseMany")
	rec := observe(t, s, "mine")
	assert.True(t, rec.Released())
	assert.Equal(t, mine+1, rec.Version)
	assert.Equal(t, mine, rec.Term, "a release keeps the last leader's term")
	assert.Equal(t, "me", observe(t, s, "moved").LeaderID)
	assert.Equal(t, "them", observe(t, s, "theirs").LeaderID)
}

// handoverManyHandsOverOnlyHeld: a batched handover passes each lease held at its
// version to the target in a new term, as Handover does (the row names the target
// as leader and handed-to, with no incarnation and the lease kept), and leaves the
// keys it does not hold at that version alone; the target claims a handed lease
// with one election, which nobody else can win. Naming the target's incarnation
// leaves the rows held by that process.
func handoverManyHandsOverOnlyHeld(t *testing.T, s batchStore) {
	ctx := t.Context()
	mine, ok, err := s.Insert(ctx, "mine", store.Candidate{ID: "me", Incarnation: "inc-me", Lease: longLease})
	mine = newTerm(t, mine, ok, err, 0, "Insert")
	also := insert(t, s, "also", "me")
	moved := insert(t, s, "moved", "me")
	theirs := insert(t, s, "theirs", "them")
	ok, err = s.Renew(ctx, "moved", "me", moved)
	won(t, ok, err, "Renew")
	handed, err := s.HandoverMany(ctx, "me", store.Candidate{ID: "you"}, []store.KeyVersion{kv("mine", mine), kv("also", also), kv("moved", moved), kv("theirs", theirs)})
	require.NoError(t, err)
	assert.Equal(t, []string{"also", "mine"}, sorted(t, handed))
	terms := newTerms(t, s, "you", handed, map[string]int64{"mine": mine, "also": also}, "HandoverMany")
	for _, k := range []string{"mine", "also"} {
		rec := observe(t, s, k)
		assert.True(t, rec.Handed(), "key %q: the row shows the lease handed to you and not claimed", k)
		assert.Empty(t, rec.Incarnation, "key %q: no process holds a handed term", k)
	}
	assert.Equal(t, longLease, observe(t, s, "mine").Lease, "the handover keeps the lease")
	assert.Equal(t, "me", observe(t, s, "moved").LeaderID)
	assert.Equal(t, "them", observe(t, s, "theirs").LeaderID)

	term, ok, err := s.Elect(ctx, "mine", store.Candidate{ID: "other", Incarnation: "inc-o", Lease: shortLease}, terms["mine"])
	noTerm(t, term, ok, err, "Elect of a live lease handed to another")
	claim, ok, err := s.Elect(ctx, "mine", store.Candidate{ID: "you", Incarnation: "inc-y", Lease: shortLease}, terms["mine"])
	newTerm(t, claim, ok, err, terms["mine"], "Elect by the target (the claim)")
	again, err := s.HandoverMany(ctx, "me", store.Candidate{ID: "you"}, []store.KeyVersion{kv("also", also)})
	require.NoError(t, err)
	assert.Empty(t, again, "a handover from a version already handed over")

	// Naming the target's incarnation: each row is held by that process. A long
	// lease, kept by the handover, so that the last elections find it live however
	// slow the machine is (with no lease recorded, an election judges the row by
	// its own short lease).
	held := map[string]int64{}
	for _, k := range []string{"named-a", "named-b"} {
		v, ok, err := s.Insert(ctx, k, store.Candidate{ID: "me", Lease: longLease})
		held[k] = newTerm(t, v, ok, err, 0, "Insert")
	}
	a, b := held["named-a"], held["named-b"]
	handed, err = s.HandoverMany(ctx, "me", store.Candidate{ID: "you", Incarnation: "inc-you"}, []store.KeyVersion{kv("named-a", a), kv("named-b", b)})
	require.NoError(t, err)
	terms = newTerms(t, s, "you", handed, map[string]int64{"named-a": a, "named-b": b}, "HandoverMany naming the incarnation")
	for _, k := range []string{"named-a", "named-b"} {
		rec := observe(t, s, k)
		assert.Equal(t, "inc-you", rec.Incarnation, "key %q", k)
		assert.False(t, rec.Handed(), "key %q: held, not handed and unclaimed", k)
		term, ok, err := s.Elect(ctx, k, store.Candidate{ID: "you", Incarnation: "inc-dup", Lease: shortLease}, terms[k])
		noTerm(t, term, ok, err, "Elect of a live lease held by another process with the ID")
	}
}

func racingBatchElectors(t *testing.T, s batchStore) {
	ctx := t.Context()
	const nKeys, nCandidates = 50, 8
	var keys []string
	for i := range nKeys {
		keys = append(keys, fmt.Sprintf("key-%02d", i))
	}
	ins, err := s.InsertMany(ctx, store.Candidate{ID: "dead"}, keys)
	require.NoError(t, err)
	require.Len(t, ins, nKeys)
	time.Sleep(outlive)
	first := make(map[string]int64, nKeys)
	from := make([]store.KeyVersion, 0, nKeys)
	for _, w := range ins {
		first[w.Key] = w.Term
		from = append(from, store.KeyVersion{Key: w.Key, Version: w.Term})
	}
	type win struct {
		id   string
		term int64
	}
	var mu sync.Mutex
	winners := map[string][]win{}
	var wg sync.WaitGroup
	for c := range nCandidates {
		id := fmt.Sprintf("c%d", c)
		order := slices.Clone(from)
		if c%2 == 1 {
			slices.Reverse(order)
		}
		wg.Go(func() {
			won, err := s.ElectMany(ctx, store.Candidate{ID: id, Lease: shortLease}, order)
			assert.NoError(t, err, id)
			mu.Lock()
			for _, w := range won {
				winners[w.Key] = append(winners[w.Key], win{id, w.Term})
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	got, err := s.ObserveMany(ctx, keys)
	require.NoError(t, err)
	for _, k := range keys {
		require.Len(t, winners[k], 1, "key %q: winners %v", k, winners[k])
		assert.Equal(t, winners[k][0].id, got[k].LeaderID, "key %q", k)
		assert.Equal(t, winners[k][0].term, got[k].Term, "key %q", k)
		assert.Equal(t, got[k].Term, got[k].Version, "key %q", k)
		assert.Greater(t, got[k].Term, first[k], "key %q", k)
	}
}

// batchesInAnyOrderNeverDeadlock races candidates that elect the same keys over and
// over, each passing them in its own order (ascending, descending, shuffled): a store
// that locked rows in the order it was given them would deadlock two of them (on
// PostgreSQL, SQLSTATE 40P01). Every call must succeed, and no term of a key may be
// won twice.
func batchesInAnyOrderNeverDeadlock(t *testing.T, s batchStore) {
	ctx := t.Context()
	const nKeys, nCandidates, rounds = 200, 4, 15
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%03d", i)
	}
	_, err := s.InsertMany(ctx, store.Candidate{ID: "first"}, keys)
	require.NoError(t, err)
	var mu sync.Mutex
	won := map[store.Won]string{} // key and term (Since zeroed) -> winner
	wins := 0
	var wg sync.WaitGroup
	for c := range nCandidates {
		id := fmt.Sprintf("c%d", c)
		rng := rand.New(rand.NewPCG(uint64(c), 1))
		wg.Go(func() {
			for range rounds {
				got, err := s.ObserveMany(ctx, keys)
				if !assert.NoError(t, err, id) {
					return
				}
				from := make([]store.KeyVersion, 0, nKeys)
				for _, k := range keys {
					from = append(from, kv(k, got[k].Version))
				}
				switch c {
				case 0:
				case 1:
					slices.Reverse(from)
				default:
					rng.Shuffle(len(from), func(i, j int) { from[i], from[j] = from[j], from[i] })
				}
				// A lease of 1µs: every row is expired, so a candidate wins each key
				// whose version it read first.
				ws, err := s.ElectMany(ctx, store.Candidate{ID: id, Lease: time.Microsecond}, from)
				if !assert.NoError(t, err, "%s: racing batched elections must not fail", id) {
					return
				}
				mu.Lock()
				for _, w := range ws {
					w.Since = time.Time{}
					if prev, dup := won[w]; dup {
						t.Errorf("key %q term %d won by %s and %s", w.Key, w.Term, prev, id)
					}
					won[w] = id
					wins++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.GreaterOrEqual(t, wins, nKeys, "the candidates won fewer keys than one round holds")
}

func maxBatchOfHostileKeys(t *testing.T, s batchStore) {
	ctx := t.Context()
	keys := []string{`x'; DROP TABLE t; --`, `'`, `"`, "`", `\`, `?`, `$1`, `?1`, "new\nline", "ключ-🗳️", strings.Repeat("k", store.MaxKeyLen)}
	for i := len(keys); i < store.MaxBatch; i++ {
		keys = append(keys, fmt.Sprintf("key-%05d", i))
	}
	ins, err := s.InsertMany(ctx, store.Candidate{ID: "me"}, keys)
	require.NoError(t, err)
	require.Len(t, ins, len(keys))
	held := make([]store.KeyVersion, len(ins))
	for i, w := range ins {
		require.Positive(t, w.Term, "key %q", w.Key)
		held[i] = store.KeyVersion{Key: w.Key, Version: w.Term}
	}
	renewed, err := s.RenewMany(ctx, "me", held)
	require.NoError(t, err)
	assert.Len(t, renewed, len(keys))
	got, err := s.ObserveMany(ctx, keys)
	require.NoError(t, err)
	require.Len(t, got, len(keys))
	for _, w := range ins {
		assert.Equal(t, w.Term+1, got[w.Key].Version, "key %q", w.Key)
		assert.Equal(t, w.Term, got[w.Key].Term, "key %q", w.Key)
		assert.Equal(t, "me", got[w.Key].LeaderID, "key %q", w.Key)
	}
	for i := range held {
		held[i].Version++
	}
	rel, err := s.ReleaseMany(ctx, "me", held)
	require.NoError(t, err)
	assert.Len(t, rel, len(keys))
}

func oversizedBatchIsRefused(t *testing.T, s batchStore) {
	ctx := t.Context()
	keys := make([]string, store.MaxBatch+1)
	held := make([]store.KeyVersion, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprint(i)
		held[i] = store.KeyVersion{Key: keys[i], Version: 1}
	}
	_, err := s.ObserveMany(ctx, keys)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.InsertMany(ctx, store.Candidate{ID: "me"}, keys)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.RenewMany(ctx, "me", held)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.ElectMany(ctx, store.Candidate{ID: "me", Lease: shortLease}, held)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.ReleaseMany(ctx, "me", held)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.RenewMany(ctx, "me", []store.KeyVersion{kv("ok", 1), kv("bad ", 1)})
	assert.ErrorIs(t, err, store.ErrInvalidArgument, "an invalid key fails the batch")
}

// wonKeys returns the keys of ws, in order.
func wonKeys(ws []store.Won) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Key
	}
	return out
}
