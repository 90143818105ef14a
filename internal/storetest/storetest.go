// Package storetest is the conformance suite that every election store passes: the
// SQL stores of the dialect packages on each database, and the in-memory fake that the
// election logic is unit-tested against. The fake is trusted only because it passes
// the same suite as the databases.
//
// A test supplies a [Harness] and calls [Run]. Every subtest runs in parallel on its
// own table, and its name states the property it checks.
package storetest

import (
	"cmp"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/internal/testname"
	"github.com/casleader/casleader/store"
)

// Store is the contract the suite checks: [store.Driver], which the stores of
// packages store/mysql, store/postgres and store/sqlite and the in-memory fake
// implement.
type Store = store.Driver

// Corruptions that [Harness.Corrupt] writes: rows that casleader never writes.
const (
	// NullLeader sets leader_id to NULL (dropping the column's NOT NULL first).
	NullLeader = "null_leader"
	// FutureTick sets tick_time one hour after the database's current time.
	FutureTick = "future_tick"
	// NegativeVersion sets version to -1.
	NegativeVersion = "negative_version"
	// RolledBack sets version and term to 1 and tick_time an hour back, leaving the
	// leader: the row as a database failover that lost the later writes leaves it.
	RolledBack = "rolled_back"
	// FarFutureTick sets tick_time as far in the future as the column holds, up to
	// the year 3000 (MySQL's TIMESTAMP ends in 2038).
	FarFutureTick = "far_future_tick"
	// TopVersion sets version and term to 9223372036854775807, the BIGINT maximum.
	TopVersion = "top_version"
	// NearVersionLimit sets version and term to [rules.VersionLimit] - 2, leaving
	// the leader and a fresh tick_time.
	NearVersionLimit = "near_version_limit"
	// SkewedTick sets tick_time two seconds after the database's current time, as
	// a renewal through a server whose clock runs two seconds ahead writes it (the
	// nodes of a multi-primary cluster). It is not invalid: it is read as a live
	// lease, age zero, with [store.Record.Ahead] set.
	SkewedTick = "skewed_tick"
)

// Harness connects the suite to one store implementation.
type Harness struct {
	// Open returns a store on the election table named table, which does not exist
	// yet: the suite creates it with CreateTable where it needs it. Open fails t if it
	// cannot open the store, and registers with t.Cleanup whatever drops the table.
	Open func(t *testing.T, table string) Store
	// Corrupt overwrites the existing row of key in table, bypassing the store, with
	// the corruption named by what ([NullLeader], [FutureTick], [NegativeVersion],
	// [RolledBack], [FarFutureTick], [TopVersion], [NearVersionLimit] or
	// [SkewedTick]).
	// It fails t if the row cannot be written.
	Corrupt func(t *testing.T, table, key, what string)
	// NoWakeups says that the store's Subscribe wakes nobody (the in-memory
	// fake); the stores of the dialect packages wake their subscribers in this
	// process at their own releases and handovers.
	NoWakeups bool
}

// Run runs the conformance suite on h. Every subtest calls t.Parallel and uses a
// table of its own.
func Run(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.Open, "Harness.Open")
	require.NotNil(t, h.Corrupt, "Harness.Corrupt")
	for _, tc := range []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"MissingRowIsNotFound", missingRowIsNotFound},
		{"InsertCreatesFirstLeaderInANewTerm", insertCreatesFirstLeaderInANewTerm},
		{"InsertNeverOverwrites", insertNeverOverwrites},
		{"ElectLosesWhileLeaseIsLive", electLosesWhileLeaseIsLive},
		{"ElectWinsAfterLeaseExpiresInDatabaseTime", electWinsAfterLeaseExpiresInDatabaseTime},
		{"ElectFromStaleVersionLoses", electFromStaleVersionLoses},
		{"ElectJudgesTheLeaseTheRowRecords", electJudgesTheLeaseTheRowRecords},
		{"HandedLeaseIsClaimedByOneElection", handedLeaseIsClaimedByOneElection},
		{"ElectAfterReleaseWinsAtOnce", electAfterReleaseWinsAtOnce},
		{"ElectReleasedWinsOnlyAReleasedOrHandedRow", electReleasedWinsOnlyAReleasedOrHandedRow},
		{"TwentyRacingElectorsYieldExactlyOneWinner", twentyRacingElectorsYieldExactlyOneWinner},
		{"TermsOutrunARolledBackRow", termsOutrunARolledBackRow},
		{"TermsIncreaseWithinOneClockTick", termsIncreaseWithinOneClockTick},
		{"VersionsStopBeforeTheyCanWrap", versionsStopBeforeTheyCanWrap},
		{"RenewBumpsVersionAndResetsAge", renewBumpsVersionAndResetsAge},
		{"RenewByAnotherIDLoses", renewByAnotherIDLoses},
		{"RenewFromStaleVersionLoses", renewFromStaleVersionLoses},
		{"RenewDoesNotChangeTerm", renewDoesNotChangeTerm},
		{"ReleaseClearsLeaderAndKeepsTerm", releaseClearsLeaderAndKeepsTerm},
		{"HandoverNamesTargetWithNewTerm", handoverNamesTargetWithNewTerm},
		{"HandoverToAnIncarnationHoldsTheTerm", handoverToAnIncarnationHoldsTheTerm},
		{"RequestStepDownKeepsLeaseAndTerm", requestStepDownKeepsLeaseAndTerm},
		{"KeysAreIndependentAndCaseSensitive", keysAreIndependentAndCaseSensitive},
		{"HostileKeysAreData", hostileKeysAreData},
		{"InvalidArgumentsAreRefused", invalidArgumentsAreRefused},
		{"MissingTableSaysHowToCreateIt", missingTableSaysHowToCreateIt},
		{"CreateTableIsIdempotent", createTableIsIdempotent},
		{"CorruptRowsGiveClearErrors", corruptRowsGiveClearErrors},
		{"TickFromAServerAheadReadsAsAFreshLease", tickFromAServerAheadReadsAsAFreshLease},
		{"MembersAreWrittenReadAndDeleted", membersAreWrittenReadAndDeleted},
		{"SubscribersAreWokenByOwnReleasesOrNotAtAll", subscribersAreWokenOrNotAtAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, h)
		})
	}
}

// Durations used by the suite. Leases that must not expire during a subtest are an
// hour; leases that must expire are a fraction of the time the subtest sleeps.
const (
	longLease  = time.Hour
	shortLease = 200 * time.Millisecond
	outlive    = 300 * time.Millisecond // sleep that outlives shortLease
	freshAge   = 5 * time.Second        // generous bound on the age of a row just written
)

// open returns a store on a new table of its own, created.
func open(t *testing.T, h Harness) (Store, string) {
	t.Helper()
	table := testname.Name(t)
	s := h.Open(t, table)
	err := s.CreateTable(t.Context())
	require.NoError(t, err, "CreateTable")
	return s, table
}

// observe reads the row of key, which must exist.
func observe(t *testing.T, s Store, key string) store.Record {
	t.Helper()
	rec, found, err := s.Observe(t.Context(), key)
	require.NoError(t, err, "Observe %q", key)
	require.True(t, found, "Observe %q: row not found", key)
	return rec
}

// won and lost check the outcome of a compare-and-set.
func won(t *testing.T, swapped bool, err error, what string) {
	t.Helper()
	require.NoError(t, err, what)
	require.True(t, swapped, "%s: lost, want won", what)
}

func lost(t *testing.T, swapped bool, err error, what string) {
	t.Helper()
	require.NoError(t, err, what)
	require.False(t, swapped, "%s: won, want lost", what)
}

// newTerm and noTerm check the outcome of a write that starts a term (Insert,
// Elect, Handover). newTerm returns the term, which must be above after.
func newTerm(t *testing.T, term int64, ok bool, err error, after int64, what string) int64 {
	t.Helper()
	require.NoError(t, err, what)
	require.True(t, ok, "%s: lost, want won", what)
	require.Greater(t, term, after, "%s: the new term is not above %d", what, after)
	return term
}

func noTerm(t *testing.T, term int64, ok bool, err error, what string) {
	t.Helper()
	require.NoError(t, err, what)
	require.False(t, ok, "%s: won, want lost", what)
	require.Zero(t, term, "%s: a lost write reported a term", what)
}

// insert creates key with leader id and returns its first term, which is also the
// row's version.
func insert(t *testing.T, s Store, key, id string) int64 {
	t.Helper()
	term, ok, err := s.Insert(t.Context(), key, store.Candidate{ID: id})
	return newTerm(t, term, ok, err, 0, "Insert")
}

// unchanged checks that the row of key still equals want, apart from its age.
func unchanged(t *testing.T, s Store, want store.Record) {
	t.Helper()
	got := observe(t, s, want.Key)
	got.Age, want.Age = 0, 0
	assert.Equal(t, want, got, "row changed by a write that lost")
}

func missingRowIsNotFound(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx, key := t.Context(), "nobody-here"

	rec, found, err := s.Observe(ctx, key)
	require.NoError(t, err)
	assert.False(t, found)
	assert.Zero(t, rec)

	// Compare-and-set writes on a missing row lose; they never create it.
	term, ok, err := s.Elect(ctx, key, store.Candidate{ID: "a", Lease: 0}, 0)
	noTerm(t, term, ok, err, "Elect")
	ok, err = s.Renew(ctx, key, "a", 0)
	lost(t, ok, err, "Renew")
	ok, err = s.Release(ctx, key, "a", 0)
	lost(t, ok, err, "Release")
	term, ok, err = s.Handover(ctx, key, "a", 0, store.Candidate{ID: "b"})
	noTerm(t, term, ok, err, "Handover")
	ok, err = s.RequestStepDown(ctx, key, 0, "b")
	lost(t, ok, err, "RequestStepDown")

	_, found, err = s.Observe(ctx, key)
	require.NoError(t, err)
	assert.False(t, found, "a losing write created the row")
}

func insertCreatesFirstLeaderInANewTerm(t *testing.T, h Harness) {
	s, _ := open(t, h)
	term := insert(t, s, "k", "a")

	rec := observe(t, s, "k")
	assert.Equal(t, "k", rec.Key)
	assert.Equal(t, term, rec.Version, "the row starts at its first term")
	assert.Equal(t, term, rec.Term)
	assert.Equal(t, "a", rec.LeaderID)
	assert.Empty(t, rec.HandoverTo)
	assert.False(t, rec.StepDown)
	assert.GreaterOrEqual(t, rec.Age, time.Duration(0))
	assert.Less(t, rec.Age, freshAge)
	assert.False(t, rec.Expired(longLease))
}

func insertNeverOverwrites(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v := insert(t, s, "k", "a")

	term, ok, err := s.Insert(ctx, "k", store.Candidate{ID: "b"})
	noTerm(t, term, ok, err, "second Insert")
	rec := observe(t, s, "k")
	assert.Equal(t, "a", rec.LeaderID)
	assert.Equal(t, v, rec.Version)

	// Not even a released row: taking it over is Elect's job, which checks the version.
	ok, err = s.Release(ctx, "k", "a", v)
	won(t, ok, err, "Release")
	term, ok, err = s.Insert(ctx, "k", store.Candidate{ID: "b"})
	noTerm(t, term, ok, err, "Insert over a released row")
	rec = observe(t, s, "k")
	assert.Empty(t, rec.LeaderID)
	assert.Equal(t, v+1, rec.Version)
}

func electLosesWhileLeaseIsLive(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v := insert(t, s, "k", "a")
	before := observe(t, s, "k")

	term, ok, err := s.Elect(ctx, "k", store.Candidate{ID: "b", Lease: longLease}, v)
	noTerm(t, term, ok, err, "Elect by another candidate")
	term, ok, err = s.Elect(ctx, "k", store.Candidate{ID: "a", Lease: longLease}, v)
	noTerm(t, term, ok, err, "Elect by the holder")
	unchanged(t, s, before)
}

func electWinsAfterLeaseExpiresInDatabaseTime(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v := insert(t, s, "k", "a")

	term, ok, err := s.Elect(ctx, "k", store.Candidate{ID: "b", Lease: time.Minute}, v)
	noTerm(t, term, ok, err, "Elect before the lease expired")

	time.Sleep(outlive)
	before := observe(t, s, "k")
	assert.True(t, before.Expired(shortLease), "age %v after sleeping %v", before.Age, outlive)

	start := time.Now()
	term, ok, err = s.Elect(ctx, "k", store.Candidate{ID: "b", Lease: shortLease}, v)
	term = newTerm(t, term, ok, err, v, "Elect after the lease expired")
	rec := observe(t, s, "k")
	elapsed := time.Since(start)
	assert.Equal(t, "b", rec.LeaderID)
	assert.Equal(t, term, rec.Term, "Elect returns the row's new term")
	assert.Equal(t, term, rec.Version, "the row's version jumps to the new term")
	assert.GreaterOrEqual(t, term-v, outlive.Microseconds(),
		"the term follows the database clock in microseconds: %v passed between the two terms", outlive)
	// A tick_time written by Elect is younger than the Elect call and the read
	// together; the old one is older than that by at least outlive. (Comparing
	// with before.Age instead fails on a loaded machine, where the read after
	// Elect can take longer than the sleep and the read before it.)
	assert.Less(t, rec.Age, elapsed+outlive/2, "Elect writes a fresh tick_time (age %v, read %v after Elect started; the row's age before it: %v)", rec.Age, elapsed, before.Age)
	assert.False(t, rec.Expired(longLease))
}

// electJudgesTheLeaseTheRowRecords: every election write records its candidate's
// incarnation and lease, and an election judges the lease by the row's, not by the
// elector's own: a short-lease candidate never takes a long lease early.
func electJudgesTheLeaseTheRowRecords(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	long, err := first(s.Insert(ctx, "long", store.Candidate{ID: "a", Incarnation: "inc-a", Lease: longLease}))
	require.NoError(t, err)
	short, err := first(s.Insert(ctx, "short", store.Candidate{ID: "a", Incarnation: "inc-a", Lease: shortLease}))
	require.NoError(t, err)
	rec := observe(t, s, "long")
	assert.Equal(t, longLease, rec.Lease, "the row records the lease of the candidate that started the term")
	assert.Equal(t, "inc-a", rec.Incarnation, "and its incarnation")

	time.Sleep(outlive)
	term, ok, err := s.Elect(ctx, "long", store.Candidate{ID: "b", Incarnation: "inc-b", Lease: shortLease}, long)
	noTerm(t, term, ok, err, "Elect with a short lease of a row that records a long one")
	term, ok, err = s.Elect(ctx, "short", store.Candidate{ID: "b", Incarnation: "inc-b", Lease: longLease}, short)
	term = newTerm(t, term, ok, err, short, "Elect with a long lease of a row whose short lease expired")
	rec = observe(t, s, "short")
	assert.Equal(t, term, rec.Term)
	assert.Equal(t, longLease, rec.Lease)
	assert.Equal(t, "inc-b", rec.Incarnation)
	assert.False(t, rec.Expired(shortLease), "judged by the row's lease, not the reader's")
}

// handedLeaseIsClaimedByOneElection: a lease handed over to a candidate ID is won
// by an election of that ID only (a new term), once: of two processes that share
// the ID, one claims it.
func handedLeaseIsClaimedByOneElection(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	// A long lease, kept by the handover: with none recorded, c's election would
	// judge the row by c's short lease, and win it on a slow machine.
	v, ok, err := s.Insert(ctx, "k", store.Candidate{ID: "a", Lease: longLease})
	v = newTerm(t, v, ok, err, 0, "Insert")
	handed, ok, err := s.Handover(ctx, "k", "a", v, store.Candidate{ID: "b"})
	handed = newTerm(t, handed, ok, err, v, "Handover")
	rec := observe(t, s, "k")
	require.True(t, rec.Handed(), "the row shows the lease handed to b and not claimed")
	assert.Empty(t, rec.Incarnation, "no process holds a handed term")

	term, ok, err := s.Elect(ctx, "k", store.Candidate{ID: "c", Incarnation: "inc-c", Lease: shortLease}, handed)
	noTerm(t, term, ok, err, "Elect of a live lease handed to another")
	claim, ok, err := s.Elect(ctx, "k", store.Candidate{ID: "b", Incarnation: "inc-b1", Lease: longLease}, handed)
	claim = newTerm(t, claim, ok, err, handed, "Elect by the target (the claim)")
	term, ok, err = s.Elect(ctx, "k", store.Candidate{ID: "b", Incarnation: "inc-b2", Lease: longLease}, handed)
	noTerm(t, term, ok, err, "a second claim by another process with the target's ID")
	rec = observe(t, s, "k")
	assert.Equal(t, claim, rec.Term)
	assert.Equal(t, "inc-b1", rec.Incarnation)
	assert.False(t, rec.Handed(), "a claimed lease is no longer handed")
	term, ok, err = s.Elect(ctx, "k", store.Candidate{ID: "b", Incarnation: "inc-b2", Lease: longLease}, claim)
	noTerm(t, term, ok, err, "Elect of a claimed live lease by its ID's other process")
}

func first(v int64, _ bool, err error) (int64, error) { return v, err }

func electFromStaleVersionLoses(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v := insert(t, s, "k", "a")
	ok, err := s.Release(ctx, "k", "a", v)
	won(t, ok, err, "Release")
	before := observe(t, s, "k")

	for _, stale := range []int64{0, v, v + 2} {
		term, ok, err := s.Elect(ctx, "k", store.Candidate{ID: "b", Lease: shortLease}, stale)
		noTerm(t, term, ok, err, fmt.Sprintf("Elect from version %d with the row at %d", stale, v+1))
	}
	unchanged(t, s, before)

	term, ok, err := s.Elect(ctx, "k", store.Candidate{ID: "b", Lease: shortLease}, v+1)
	newTerm(t, term, ok, err, v+1, "Elect from the current version")
	term, ok, err = s.Elect(ctx, "k", store.Candidate{ID: "c", Lease: 0}, v+1)
	noTerm(t, term, ok, err, "Elect from the version the winner replaced")
}

func electAfterReleaseWinsAtOnce(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v := insert(t, s, "k", "a")
	ok, err := s.Release(ctx, "k", "a", v)
	won(t, ok, err, "Release")

	term, ok, err := s.Elect(ctx, "k", store.Candidate{ID: "b", Lease: longLease}, v+1)
	term = newTerm(t, term, ok, err, v+1, "Elect on a released row with an hour's lease")
	rec := observe(t, s, "k")
	assert.Equal(t, "b", rec.LeaderID)
	assert.Equal(t, term, rec.Version)
	assert.Equal(t, term, rec.Term)
}

// electReleasedWinsOnlyAReleasedOrHandedRow: the election of a woken follower that
// does not know the row's version wins a released row whatever its version, in a
// new term, and the lease handed over to its own ID (the claim of a handover's
// target); nothing else: not a live lease, not an expired one (only Elect judges
// expiry, by the database clock), not a lease handed over to another candidate or
// asked to step down, not a missing row, and not a row that another racer has just
// won or claimed.
func electReleasedWinsOnlyAReleasedOrHandedRow(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()

	term, ok, err := s.ElectReleased(ctx, "missing", store.Candidate{ID: "b"})
	noTerm(t, term, ok, err, "ElectReleased on a missing row")
	_, found, err := s.Observe(ctx, "missing")
	require.NoError(t, err)
	assert.False(t, found, "ElectReleased created a row")

	v := insert(t, s, "k", "a")
	live := observe(t, s, "k")
	term, ok, err = s.ElectReleased(ctx, "k", store.Candidate{ID: "b"})
	noTerm(t, term, ok, err, "ElectReleased on a live lease")
	unchanged(t, s, live)

	ok, err = s.RequestStepDown(ctx, "k", v, "")
	won(t, ok, err, "RequestStepDown")
	asked := observe(t, s, "k")
	term, ok, err = s.ElectReleased(ctx, "k", store.Candidate{ID: "b"})
	noTerm(t, term, ok, err, "ElectReleased on a lease asked to step down")
	unchanged(t, s, asked)

	ok, err = s.Release(ctx, "k", "a", asked.Version)
	won(t, ok, err, "Release")
	released := observe(t, s, "k")
	require.True(t, released.Released())
	start := time.Now()
	term, ok, err = s.ElectReleased(ctx, "k", store.Candidate{ID: "b"})
	elapsed := time.Since(start)
	term = newTerm(t, term, ok, err, released.Version, "ElectReleased on a released row")
	rec := observe(t, s, "k")
	assert.Equal(t, "b", rec.LeaderID)
	assert.Equal(t, term, rec.Version, "the reported term is the row's new version")
	assert.Equal(t, term, rec.Term)
	assert.Empty(t, rec.HandoverTo)
	assert.False(t, rec.StepDown)
	assert.Less(t, rec.Age, elapsed+freshAge, "ElectReleased writes a fresh tick_time")
	assert.False(t, rec.Expired(longLease))

	term2, ok, err := s.ElectReleased(ctx, "k", store.Candidate{ID: "c"})
	noTerm(t, term2, ok, err, "ElectReleased after another won")
	// The winner leads from the term it was given.
	ok, err = s.Renew(ctx, "k", "b", term)
	won(t, ok, err, "Renew from the term ElectReleased reported")

	// An expired lease that was not released is left to Elect, which judges its
	// age by the database clock.
	v = insert(t, s, "expired", "dead")
	time.Sleep(outlive)
	expired := observe(t, s, "expired")
	require.True(t, expired.Expired(shortLease))
	term, ok, err = s.ElectReleased(ctx, "expired", store.Candidate{ID: "b"})
	noTerm(t, term, ok, err, "ElectReleased on an expired lease that was not released")
	unchanged(t, s, expired)

	// A lease handed over names its new leader: only that candidate claims it,
	// once, in a new term.
	handedTerm, ok, err := s.Handover(ctx, "expired", "dead", v, store.Candidate{ID: "c"})
	newTerm(t, handedTerm, ok, err, v, "Handover")
	handed := observe(t, s, "expired")
	require.True(t, handed.Handed())
	term, ok, err = s.ElectReleased(ctx, "expired", store.Candidate{ID: "b"})
	noTerm(t, term, ok, err, "ElectReleased on a lease handed over to another")
	unchanged(t, s, handed)
	claim := store.Candidate{ID: "c", Incarnation: "c-1", Lease: longLease}
	term, ok, err = s.ElectReleased(ctx, "expired", claim)
	term = newTerm(t, term, ok, err, handedTerm, "ElectReleased by the handover's target")
	rec = observe(t, s, "expired")
	assert.Equal(t, "c", rec.LeaderID)
	assert.Equal(t, term, rec.Version, "the reported term is the row's new version")
	assert.Equal(t, term, rec.Term)
	assert.Equal(t, "c-1", rec.Incarnation, "the claim records the claimant's incarnation")
	assert.Empty(t, rec.HandoverTo, "the claim clears the handover")
	assert.False(t, rec.Handed())
	claimed := observe(t, s, "expired")
	term2, ok, err = s.ElectReleased(ctx, "expired", store.Candidate{ID: "c", Incarnation: "c-2", Lease: longLease})
	noTerm(t, term2, ok, err, "ElectReleased of a claimed lease by a process with the same ID")
	unchanged(t, s, claimed)
	ok, err = s.Renew(ctx, "expired", "c", term)
	won(t, ok, err, "Renew from the term of the claim")

	// A step-down request that names the leader's own ID (handover_to = leader_id,
	// as a handover leaves it) is not a handover (Record.Handed): not claimed.
	ok, err = s.RequestStepDown(ctx, "expired", term+1, "c")
	won(t, ok, err, "RequestStepDown to the leader's own ID")
	asked = observe(t, s, "expired")
	require.Equal(t, asked.LeaderID, asked.HandoverTo)
	require.False(t, asked.Handed())
	term, ok, err = s.ElectReleased(ctx, "expired", store.Candidate{ID: "c", Incarnation: "c-2", Lease: longLease})
	noTerm(t, term, ok, err, "ElectReleased on a lease asked to step down")
	unchanged(t, s, asked)
}

func twentyRacingElectorsYieldExactlyOneWinner(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	const n = 20

	type win struct {
		id   string
		term int64
	}
	// race runs try concurrently for n candidates and returns the winners.
	race := func(t *testing.T, try func(id string) (int64, bool, error)) []win {
		var (
			mu      sync.Mutex
			winners []win
			wg      sync.WaitGroup
			start   = make(chan struct{})
			ready   atomic.Int32
		)
		for i := range n {
			id := fmt.Sprintf("candidate-%02d", i)
			wg.Go(func() {
				ready.Add(1)
				<-start
				term, ok, err := try(id)
				assert.NoError(t, err, id)
				if ok {
					mu.Lock()
					winners = append(winners, win{id, term})
					mu.Unlock()
				} else {
					assert.Zero(t, term, "%s lost but got a term", id)
				}
			})
		}
		for ready.Load() < n {
			time.Sleep(time.Millisecond)
		}
		close(start)
		wg.Wait()
		return winners
	}

	t.Run("ElectOnAnExpiredLease", func(t *testing.T) {
		v := insert(t, s, "elect", "dead")
		time.Sleep(outlive)
		winners := race(t, func(id string) (int64, bool, error) {
			return s.Elect(ctx, "elect", store.Candidate{ID: id, Lease: shortLease}, v)
		})
		require.Len(t, winners, 1, "winners: %v", winners)
		rec := observe(t, s, "elect")
		assert.Equal(t, winners[0].id, rec.LeaderID)
		assert.Equal(t, winners[0].term, rec.Version)
		assert.Equal(t, winners[0].term, rec.Term)
		assert.Greater(t, rec.Term, v)
	})
	t.Run("ElectReleasedOnAReleasedRow", func(t *testing.T) {
		v := insert(t, s, "released", "gone")
		ok, err := s.Release(ctx, "released", "gone", v)
		won(t, ok, err, "Release")
		winners := race(t, func(id string) (int64, bool, error) { return s.ElectReleased(ctx, "released", store.Candidate{ID: id}) })
		require.Len(t, winners, 1, "winners: %v", winners)
		rec := observe(t, s, "released")
		assert.Equal(t, winners[0].id, rec.LeaderID)
		assert.Equal(t, winners[0].term, rec.Version, "the reported term is the row's new version")
		assert.Equal(t, winners[0].term, rec.Term)
		assert.Greater(t, rec.Term, v+1, "the new term is above the released version")
	})
	t.Run("InsertOnAMissingRow", func(t *testing.T) {
		winners := race(t, func(id string) (int64, bool, error) { return s.Insert(ctx, "insert", store.Candidate{ID: id}) })
		require.Len(t, winners, 1, "winners: %v", winners)
		rec := observe(t, s, "insert")
		assert.Equal(t, winners[0].id, rec.LeaderID)
		assert.Equal(t, winners[0].term, rec.Version)
	})
}

// termsOutrunARolledBackRow: after a failover that lost writes, the row is back at an
// old version; the next election must still issue a term above every term issued
// before, so fenced writes never go backwards.
func termsOutrunARolledBackRow(t *testing.T, h Harness) {
	s, table := open(t, h)
	ctx := t.Context()
	first := insert(t, s, "k", "a")
	ok, err := s.Release(ctx, "k", "a", first)
	won(t, ok, err, "Release")
	term, ok, err := s.Elect(ctx, "k", store.Candidate{ID: "b", Lease: longLease}, first+1)
	lostTerm := newTerm(t, term, ok, err, first+1, "Elect")
	ok, err = s.Renew(ctx, "k", "b", lostTerm)
	won(t, ok, err, "Renew")

	h.Corrupt(t, table, "k", RolledBack)
	old := observe(t, s, "k")
	require.Equal(t, int64(1), old.Version, "the rolled-back row")
	require.Equal(t, int64(1), old.Term)
	require.True(t, old.Expired(longLease), "the rolled-back lease is an hour old")

	term, ok, err = s.Elect(ctx, "k", store.Candidate{ID: "c", Lease: longLease}, old.Version)
	term = newTerm(t, term, ok, err, lostTerm, "Elect from the rolled-back version")
	rec := observe(t, s, "k")
	assert.Equal(t, "c", rec.LeaderID)
	assert.Equal(t, term, rec.Term)

	// A handover from a rolled-back row starts a fresh term too.
	h.Corrupt(t, table, "k", RolledBack)
	term2, ok, err := s.Handover(ctx, "k", "c", 1, store.Candidate{ID: "d"})
	newTerm(t, term2, ok, err, term, "Handover from the rolled-back version")
	assert.Equal(t, term2, observe(t, s, "k").Term)

	// The leader of the lost term cannot renew it: its version is gone, and the CAS
	// names a version the row will not reach again.
	ok, err = s.Renew(ctx, "k", "b", lostTerm+1)
	lost(t, ok, err, "Renew of the lost term")
}

// termsIncreaseWithinOneClockTick: terms follow the database clock, whose
// resolution may be coarse (SQLite's is a millisecond). Elections from a rolled-back
// row in quick succession, many within one tick of that clock, must still issue
// strictly increasing terms.
func termsIncreaseWithinOneClockTick(t *testing.T, h Harness) {
	s, table := open(t, h)
	ctx := t.Context()
	last := insert(t, s, "k", "a")
	for i := range 30 {
		h.Corrupt(t, table, "k", RolledBack)
		term, ok, err := s.Elect(ctx, "k", store.Candidate{ID: "b", Lease: longLease}, 1)
		last = newTerm(t, term, ok, err, last, fmt.Sprintf("Elect %d from the rolled-back row", i))
	}
}

// versionsStopBeforeTheyCanWrap: a row whose version nears the top of BIGINT is
// refused with an error that says what to do, before any write could wrap its
// version or term to a negative number.
func versionsStopBeforeTheyCanWrap(t *testing.T, h Harness) {
	s, table := open(t, h)
	ctx := t.Context()

	limitError := func(err error, what string) {
		t.Helper()
		require.ErrorIs(t, err, store.ErrInvalidRow, what)
		assert.Contains(t, err.Error(), "limit", "%s: the error names the limit", what)
		assert.Contains(t, err.Error(), "delete the row", "%s: the error says what to do", what)
	}

	t.Run("AtTheTopOfBigint", func(t *testing.T) {
		insert(t, s, "top", "a")
		h.Corrupt(t, table, "top", TopVersion)
		_, found, err := s.Observe(ctx, "top")
		limitError(err, "Observe")
		assert.False(t, found)
		const top = int64(1<<63 - 1)
		_, err = s.Renew(ctx, "top", "a", top)
		limitError(err, "Renew")
		_, _, err = s.Elect(ctx, "top", store.Candidate{ID: "b", Lease: 0}, top)
		limitError(err, "Elect")
		_, _, err = s.Handover(ctx, "top", "a", top, store.Candidate{ID: "b"})
		limitError(err, "Handover")
		_, err = s.Release(ctx, "top", "a", top)
		limitError(err, "Release")
		_, err = s.RequestStepDown(ctx, "top", top, "b")
		limitError(err, "RequestStepDown")
		// Nothing was written: the row still reads as at the limit, not wrapped.
		_, _, err = s.Observe(ctx, "top")
		limitError(err, "Observe after the refused writes")
	})
	t.Run("BelowTheLimit", func(t *testing.T) {
		insert(t, s, "near", "a")
		h.Corrupt(t, table, "near", NearVersionLimit)
		rec := observe(t, s, "near")
		require.Equal(t, rules.VersionLimit-2, rec.Version)
		ok, err := s.Renew(ctx, "near", "a", rec.Version)
		won(t, ok, err, "Renew to the last version below the limit")
		rec = observe(t, s, "near")
		require.Equal(t, rules.VersionLimit-1, rec.Version)
		_, err = s.Renew(ctx, "near", "a", rec.Version)
		limitError(err, "Renew to the limit")
		_, _, err = s.Elect(ctx, "near", store.Candidate{ID: "b", Lease: 0}, rec.Version)
		limitError(err, "Elect to the limit")
		assert.Equal(t, rules.VersionLimit-1, observe(t, s, "near").Version, "a refused write changed the row")
	})
	t.Run("ElectReleasedBelowTheLimit", func(t *testing.T) {
		insert(t, s, "released", "a")
		h.Corrupt(t, table, "released", NearVersionLimit)
		ok, err := s.Release(ctx, "released", "a", rules.VersionLimit-2)
		won(t, ok, err, "Release to the last version below the limit")
		before := observe(t, s, "released")
		require.Equal(t, rules.VersionLimit-1, before.Version)
		// The version is not named, so the write cannot be refused beforehand: it
		// must not win (the next read reports the row).
		term, ok, err := s.ElectReleased(ctx, "released", store.Candidate{ID: "b"})
		noTerm(t, term, ok, err, "ElectReleased to the limit")
		unchanged(t, s, before)
	})
}

func renewBumpsVersionAndResetsAge(t *testing.T, h Harness) {
	s, _ := open(t, h)
	v := insert(t, s, "k", "a")
	time.Sleep(outlive)
	before := observe(t, s, "k")
	assert.GreaterOrEqual(t, before.Age, outlive/2, "age after sleeping %v", outlive)

	start := time.Now()
	ok, err := s.Renew(t.Context(), "k", "a", v)
	won(t, ok, err, "Renew")
	rec := observe(t, s, "k")
	elapsed := time.Since(start)
	assert.Equal(t, v+1, rec.Version)
	assert.Equal(t, "a", rec.LeaderID)
	// A tick_time written by Renew is younger than the Renew call and the read
	// together; the old one is older than that by at least outlive/2 (as in
	// electWinsAfterLeaseExpiresInDatabaseTime: comparing with before.Age fails
	// on a loaded machine, where the two calls can take longer than the sleep).
	assert.Less(t, rec.Age, elapsed+outlive/2, "Renew writes a fresh tick_time (age %v, read %v after Renew started; the row's age before it: %v)", rec.Age, elapsed, before.Age)
}

func renewByAnotherIDLoses(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v := insert(t, s, "k", "a")
	before := observe(t, s, "k")

	for _, id := range []string{"b", "A", "aa", " a"} {
		ok, err := s.Renew(ctx, "k", id, v)
		lost(t, ok, err, fmt.Sprintf("Renew by %q", id))
	}
	unchanged(t, s, before)
}

func renewFromStaleVersionLoses(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v := insert(t, s, "k", "a")

	ok, err := s.Renew(ctx, "k", "a", v)
	won(t, ok, err, "first Renew")
	before := observe(t, s, "k")
	for _, stale := range []int64{0, v, v + 2} {
		ok, err := s.Renew(ctx, "k", "a", stale)
		lost(t, ok, err, fmt.Sprintf("Renew from version %d with the row at %d", stale, v+1))
	}
	unchanged(t, s, before)

	ok, err = s.Renew(ctx, "k", "a", v+1)
	won(t, ok, err, "Renew from the current version")
	assert.Equal(t, v+2, observe(t, s, "k").Version)
}

func renewDoesNotChangeTerm(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v := insert(t, s, "k", "a")
	ok, err := s.Release(ctx, "k", "a", v)
	won(t, ok, err, "Release")
	term, ok, err := s.Elect(ctx, "k", store.Candidate{ID: "b", Lease: longLease}, v+1)
	term = newTerm(t, term, ok, err, v+1, "Elect")

	for version := term; version < term+3; version++ {
		ok, err := s.Renew(ctx, "k", "b", version)
		won(t, ok, err, fmt.Sprintf("Renew from version %d", version))
		rec := observe(t, s, "k")
		assert.Equal(t, version+1, rec.Version)
		assert.Equal(t, term, rec.Term, "Renew changed the term")
	}
}

func releaseClearsLeaderAndKeepsTerm(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v := insert(t, s, "k", "a")
	before := observe(t, s, "k")

	ok, err := s.Release(ctx, "k", "b", v)
	lost(t, ok, err, "Release by a non-holder")
	ok, err = s.Release(ctx, "k", "a", v-1)
	lost(t, ok, err, "Release from a stale version")
	unchanged(t, s, before)

	ok, err = s.Release(ctx, "k", "a", v)
	won(t, ok, err, "Release")
	rec := observe(t, s, "k")
	assert.Empty(t, rec.LeaderID)
	assert.True(t, rec.Released())
	assert.True(t, rec.Expired(longLease), "a released lease is expired whatever its age")
	assert.Zero(t, rec.Remaining(longLease))
	assert.Equal(t, v+1, rec.Version)
	assert.Equal(t, v, rec.Term, "Release kept the last leader's term")

	// The former holder cannot renew or release again.
	ok, err = s.Renew(ctx, "k", "a", v+1)
	lost(t, ok, err, "Renew after Release")
	ok, err = s.Release(ctx, "k", "a", v+1)
	lost(t, ok, err, "second Release")
	ok, err = s.RequestStepDown(ctx, "k", v+1, "")
	lost(t, ok, err, "RequestStepDown with no leader")
}

func handoverNamesTargetWithNewTerm(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v := insert(t, s, "k", "a")
	before := observe(t, s, "k")

	term, ok, err := s.Handover(ctx, "k", "b", v, store.Candidate{ID: "c"})
	noTerm(t, term, ok, err, "Handover by a non-holder")
	term, ok, err = s.Handover(ctx, "k", "a", v-1, store.Candidate{ID: "b"})
	noTerm(t, term, ok, err, "Handover from a stale version")
	unchanged(t, s, before)

	time.Sleep(outlive)
	before = observe(t, s, "k")
	term, ok, err = s.Handover(ctx, "k", "a", v, store.Candidate{ID: "b"})
	term = newTerm(t, term, ok, err, v, "Handover")
	rec := observe(t, s, "k")
	assert.Equal(t, "b", rec.LeaderID)
	assert.Equal(t, term, rec.Version)
	assert.Equal(t, term, rec.Term, "the target leads in a new term")
	assert.Less(t, rec.Age, before.Age, "Handover writes a fresh tick_time")
	assert.Equal(t, "b", rec.HandoverTo, "a handover names its target, so the target knows the term was handed to it")
	assert.False(t, rec.StepDown)

	ok, err = s.Renew(ctx, "k", "a", term)
	lost(t, ok, err, "Renew by the former leader")
	ok, err = s.Renew(ctx, "k", "b", term)
	won(t, ok, err, "Renew by the target")
}

// handoverToAnIncarnationHoldsTheTerm: a handover that names its target's
// incarnation leaves the term held by that process (its ID and incarnation, no
// handover_to, a fresh tick, the lease kept), which it leads from a read; no
// election takes that live lease, not even one by the target's ID.
func handoverToAnIncarnationHoldsTheTerm(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	v, ok, err := s.Insert(ctx, "k", store.Candidate{ID: "a", Incarnation: "inc-a", Lease: longLease})
	v = newTerm(t, v, ok, err, 0, "Insert")
	time.Sleep(outlive)
	before := observe(t, s, "k")

	term, ok, err := s.Handover(ctx, "k", "a", v, store.Candidate{ID: "b", Incarnation: "inc-b"})
	term = newTerm(t, term, ok, err, v, "Handover")
	rec := observe(t, s, "k")
	assert.Equal(t, "b", rec.LeaderID)
	assert.Equal(t, "inc-b", rec.Incarnation, "the row names the target's process")
	assert.Empty(t, rec.HandoverTo, "the term is held, not handed and unclaimed")
	assert.False(t, rec.Handed())
	assert.Equal(t, term, rec.Term)
	assert.Equal(t, longLease, rec.Lease, "the handover keeps the lease")
	assert.Less(t, rec.Age, before.Age, "Handover writes a fresh tick_time")
	assert.False(t, rec.Expired(longLease))

	for _, cand := range []store.Candidate{{ID: "b", Incarnation: "inc-dup", Lease: shortLease}, {ID: "c", Incarnation: "inc-c", Lease: shortLease}} {
		term2, ok, err := s.Elect(ctx, "k", cand, term)
		noTerm(t, term2, ok, err, "Elect of the handed live lease by "+cand.Incarnation)
		term2, ok, err = s.ElectReleased(ctx, "k", cand)
		noTerm(t, term2, ok, err, "ElectReleased of the handed live lease by "+cand.Incarnation)
	}
	ok, err = s.Renew(ctx, "k", "b", term)
	won(t, ok, err, "Renew by the target")
}

func requestStepDownKeepsLeaseAndTerm(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()

	t.Run("LeaseAndTermKept", func(t *testing.T) {
		v := insert(t, s, "k", "a")
		time.Sleep(outlive / 3)
		before := observe(t, s, "k")

		ok, err := s.RequestStepDown(ctx, "k", v-1, "b")
		lost(t, ok, err, "RequestStepDown from a stale version")
		ok, err = s.RequestStepDown(ctx, "k", v, "b")
		won(t, ok, err, "RequestStepDown")
		rec := observe(t, s, "k")
		assert.Equal(t, "a", rec.LeaderID)
		assert.Equal(t, v, rec.Term)
		assert.Equal(t, v+1, rec.Version)
		assert.True(t, rec.StepDown)
		assert.Equal(t, "b", rec.HandoverTo)
		assert.GreaterOrEqual(t, rec.Age, before.Age, "RequestStepDown touched tick_time")

		// The leader's renewal from the version it wrote loses, so it reads the row
		// and sees the request; from the new version it wins.
		ok, err = s.Renew(ctx, "k", "a", v)
		lost(t, ok, err, "Renew from the version before the request")
		ok, err = s.Renew(ctx, "k", "a", v+1)
		won(t, ok, err, "Renew from the request's version")
		// A renewal does not clear the request: it stands until the leader releases,
		// hands over, or loses the lease to an election.
		rec = observe(t, s, "k")
		assert.True(t, rec.StepDown, "Renew cleared the request")
		assert.Equal(t, "b", rec.HandoverTo)
	})
	t.Run("WithoutTarget", func(t *testing.T) {
		v := insert(t, s, "none", "a")
		ok, err := s.RequestStepDown(ctx, "none", v, "")
		won(t, ok, err, "RequestStepDown")
		rec := observe(t, s, "none")
		assert.True(t, rec.StepDown)
		assert.Empty(t, rec.HandoverTo)
	})
	t.Run("ReleaseClearsIt", func(t *testing.T) {
		v := insert(t, s, "release", "a")
		ok, err := s.RequestStepDown(ctx, "release", v, "b")
		won(t, ok, err, "RequestStepDown")
		ok, err = s.Release(ctx, "release", "a", v+1)
		won(t, ok, err, "Release")
		rec := observe(t, s, "release")
		assert.False(t, rec.StepDown)
		assert.Empty(t, rec.HandoverTo)
	})
	t.Run("HandoverAnswersIt", func(t *testing.T) {
		v := insert(t, s, "handover", "a")
		ok, err := s.RequestStepDown(ctx, "handover", v, "b")
		won(t, ok, err, "RequestStepDown")
		term, ok, err := s.Handover(ctx, "handover", "a", v+1, store.Candidate{ID: "b"})
		newTerm(t, term, ok, err, v+1, "Handover")
		rec := observe(t, s, "handover")
		assert.Equal(t, "b", rec.LeaderID)
		assert.False(t, rec.StepDown, "the request is answered")
		assert.Equal(t, "b", rec.HandoverTo, "the handed term names its target")
	})
	t.Run("ElectClearsItAndTheLeaseStillExpires", func(t *testing.T) {
		v := insert(t, s, "elect", "a")
		time.Sleep(outlive)
		// The request does not refresh the lease: it still expires from the last renewal.
		ok, err := s.RequestStepDown(ctx, "elect", v, "b")
		won(t, ok, err, "RequestStepDown")
		term, ok, err := s.Elect(ctx, "elect", store.Candidate{ID: "c", Lease: shortLease}, v+1)
		term = newTerm(t, term, ok, err, v+1, "Elect after the lease expired")
		rec := observe(t, s, "elect")
		assert.Equal(t, "c", rec.LeaderID)
		assert.Equal(t, term, rec.Term)
		assert.False(t, rec.StepDown)
		assert.Empty(t, rec.HandoverTo)
	})
}

func keysAreIndependentAndCaseSensitive(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	keys := map[string]string{"Key": "a", "key": "b", "KEY": "c"}
	terms := map[string]int64{}
	for key, id := range keys {
		terms[key] = insert(t, s, key, id)
	}
	for key, id := range keys {
		rec := observe(t, s, key)
		assert.Equal(t, key, rec.Key)
		assert.Equal(t, id, rec.LeaderID, "key %q", key)
	}

	// Writes on one key leave the others alone.
	ok, err := s.Renew(ctx, "Key", "a", terms["Key"])
	won(t, ok, err, `Renew "Key"`)
	ok, err = s.Release(ctx, "key", "b", terms["key"])
	won(t, ok, err, `Release "key"`)
	assert.Equal(t, store.Record{Key: "Key", Version: terms["Key"] + 1, LeaderID: "a", Term: terms["Key"]}, zeroAge(observe(t, s, "Key")))
	assert.Equal(t, store.Record{Key: "key", Version: terms["key"] + 1, LeaderID: "", Term: terms["key"]}, zeroAge(observe(t, s, "key")))
	assert.Equal(t, store.Record{Key: "KEY", Version: terms["KEY"], LeaderID: "c", Term: terms["KEY"]}, zeroAge(observe(t, s, "KEY")))

	// Leader IDs are case-sensitive too.
	ok, err = s.Renew(ctx, "KEY", "C", terms["KEY"])
	lost(t, ok, err, `Renew "KEY" by "C"`)
}

// zeroAge drops what depends on the moment and the server: the age, and whether
// the server has one clock.
func zeroAge(r store.Record) store.Record {
	r.Age, r.OneClock = 0, false
	return r
}

func hostileKeysAreData(t *testing.T, h Harness) {
	s, table := open(t, h)
	ctx := t.Context()
	keys := []string{
		`x'; DROP TABLE t; --`,
		`'); DROP TABLE ` + table + `; --`,
		`"; DROP TABLE "` + table + `"; --`,
		"`; DROP TABLE `" + table + "`; --",
		`'`, `"`, "`", `\`, `\\`, `\'`, `\"`, `''`,
		`%`, `_`, `a%b`, `?`, `$1`, `:name`, `@p1`, `--`, `/*`, `*/`, `;`,
		" leading space", "tab\tinside", "new\nline", "\r\n\tx",
		"ключ-選挙-🗳️", "e\u0301", "\u00e9", "\u200b", "\U0001F600",
		strings.Repeat("k", store.MaxKeyLen),
		strings.Repeat("é", store.MaxKeyLen/2) + "x", // 255 bytes, 128 characters
		strings.Repeat("🗳", store.MaxKeyLen/4),       // 252 bytes of 4-byte characters
	}
	// Each key is also its leader's ID.
	first := map[string]int64{}
	for _, key := range keys {
		term, ok, err := s.Insert(ctx, key, store.Candidate{ID: key})
		first[key] = newTerm(t, term, ok, err, 0, fmt.Sprintf("Insert %q", key))
	}
	// Each is then handed over to the next key as a new leader ID.
	next := func(i int) string { return keys[(i+1)%len(keys)] }
	for i, key := range keys {
		rec := observe(t, s, key)
		assert.Equal(t, key, rec.Key, "key read back")
		assert.Equal(t, key, rec.LeaderID, "leader ID read back")
		v := first[key]
		assert.Equal(t, v, rec.Version, "key %q", key)
		ok, err := s.Renew(ctx, key, key, v)
		won(t, ok, err, fmt.Sprintf("Renew %q", key))
		term, ok, err := s.Handover(ctx, key, key, v+1, store.Candidate{ID: next(i)})
		first[key] = newTerm(t, term, ok, err, v+1, fmt.Sprintf("Handover %q", key))
	}
	for i, key := range keys {
		rec := observe(t, s, key)
		assert.Equal(t, first[key], rec.Version, "key %q", key)
		assert.Equal(t, next(i), rec.LeaderID, "key %q", key)
	}

	// The table is still there and still works.
	require.NoError(t, s.Check(ctx))
	insert(t, s, "plain", "a")
	assert.Equal(t, "a", observe(t, s, "plain").LeaderID)
}

func invalidArgumentsAreRefused(t *testing.T, h Harness) {
	s, _ := open(t, h)
	ctx := t.Context()
	const key = "valid"
	insert(t, s, key, "a")
	before := observe(t, s, key)

	for _, tc := range []struct {
		name, bad string
		lax       string // the key a store that truncates or trims might write instead
	}{
		{"Empty", "", ""},
		{"256Bytes", strings.Repeat("k", store.MaxKeyLen+1), strings.Repeat("k", store.MaxKeyLen)},
		{"InvalidUTF8", "k\xff", "k"},
		{"NULByte", "k\x00", "k"},
		{"TrailingSpace", "k ", "k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, found, err := s.Observe(ctx, tc.bad)
			require.ErrorIs(t, err, store.ErrInvalidArgument, "Observe")
			assert.False(t, found)
			_, _, err = s.Insert(ctx, tc.bad, store.Candidate{ID: "a"})
			require.ErrorIs(t, err, store.ErrInvalidArgument, "Insert with the key")
			_, _, err = s.Insert(ctx, "other", store.Candidate{ID: tc.bad})
			require.ErrorIs(t, err, store.ErrInvalidArgument, "Insert with the ID")
			v := before.Version
			for _, call := range []struct {
				what string
				err  error
			}{
				{"Elect with the key", third(s.Elect(ctx, tc.bad, store.Candidate{ID: "a", Lease: 0}, v))},
				{"Elect with the ID", third(s.Elect(ctx, key, store.Candidate{ID: tc.bad, Lease: 0}, v))},
				{"ElectReleased with the key", third(s.ElectReleased(ctx, tc.bad, store.Candidate{ID: "a"}))},
				{"ElectReleased with the ID", third(s.ElectReleased(ctx, key, store.Candidate{ID: tc.bad}))},
				{"Renew with the key", second(s.Renew(ctx, tc.bad, "a", v))},
				{"Renew with the ID", second(s.Renew(ctx, key, tc.bad, v))},
				{"Release with the key", second(s.Release(ctx, tc.bad, "a", v))},
				{"Release with the ID", second(s.Release(ctx, key, tc.bad, v))},
				{"Handover with the key", third(s.Handover(ctx, tc.bad, "a", v, store.Candidate{ID: "b"}))},
				{"Handover with the ID", third(s.Handover(ctx, key, tc.bad, v, store.Candidate{ID: "b"}))},
				{"Handover with the target", third(s.Handover(ctx, key, "a", v, store.Candidate{ID: tc.bad}))},
				{"Handover with the target's incarnation", third(s.Handover(ctx, key, "a", v, store.Candidate{ID: "b", Incarnation: cmp.Or(tc.bad, "\x00")}))},
				{"RequestStepDown with the key", second(s.RequestStepDown(ctx, tc.bad, v, "b"))},
			} {
				assert.ErrorIs(t, call.err, store.ErrInvalidArgument, call.what)
			}
			if tc.bad != "" { // an empty target means none
				_, err = s.RequestStepDown(ctx, key, v, tc.bad)
				require.ErrorIs(t, err, store.ErrInvalidArgument, "RequestStepDown with the target")
			}

			// Nothing was written.
			unchanged(t, s, before)
			for _, k := range []string{"other", tc.lax} {
				if k == "" {
					continue
				}
				_, found, err := s.Observe(ctx, k)
				require.NoError(t, err)
				assert.False(t, found, "row %q written", k)
			}
		})
	}
}

// second returns the error of a compare-and-set; third that of a write that starts
// a term.
func second(_ bool, err error) error { return err }

func third(_ int64, _ bool, err error) error { return err }

func missingTableSaysHowToCreateIt(t *testing.T, h Harness) {
	table := testname.Name(t)
	s := h.Open(t, table)
	ctx := t.Context()

	deploymentError := func(err error, op string) {
		t.Helper()
		require.ErrorIs(t, err, store.ErrDeployment, op)
		assert.Contains(t, err.Error(), table, "%s: the error names the table", op)
		assert.Contains(t, err.Error(), "casleader migrate", "%s: the error says how to create the table", op)
		var mt *store.MissingTableError
		if assert.ErrorAs(t, err, &mt, "%s: a missing table is a *store.MissingTableError", op) {
			assert.Equal(t, table, mt.Table, "%s: MissingTableError.Table", op)
		}
	}
	_, found, err := s.Observe(ctx, "k")
	deploymentError(err, "Observe")
	assert.False(t, found)
	_, _, err = s.Insert(ctx, "k", store.Candidate{ID: "a"})
	deploymentError(err, "Insert")
	_, _, err = s.Elect(ctx, "k", store.Candidate{ID: "a", Lease: shortLease}, 1)
	deploymentError(err, "Elect")
	_, err = s.Renew(ctx, "k", "a", 1)
	deploymentError(err, "Renew")
	deploymentError(s.Check(ctx), "Check")

	require.NoError(t, s.CreateTable(ctx))
	require.NoError(t, s.Check(ctx))
	insert(t, s, "k", "a")
}

func createTableIsIdempotent(t *testing.T, h Harness) {
	s := h.Open(t, testname.Name(t))
	ctx := t.Context()
	require.NoError(t, s.CreateTable(ctx), "first CreateTable")
	require.NoError(t, s.CreateTable(ctx), "second CreateTable")
	require.NoError(t, s.Check(ctx))

	// Creating it again leaves its rows alone.
	insert(t, s, "k", "a")
	require.NoError(t, s.CreateTable(ctx), "CreateTable on a table with rows")
	assert.Equal(t, "a", observe(t, s, "k").LeaderID)
}

// tickFromAServerAheadReadsAsAFreshLease: a tick_time a little in the future of the
// reading server's clock (written by a server whose clock runs ahead) is a live
// lease of age zero, and Record.Ahead says by how much the tick is ahead: the
// evidence of clock skew that the election reports. Elections judge it by the
// reading server's clock: the lease is not expired there.
func tickFromAServerAheadReadsAsAFreshLease(t *testing.T, h Harness) {
	s, table := open(t, h)
	ctx := t.Context()
	insert(t, s, "k", "a")
	h.Corrupt(t, table, "k", SkewedTick)
	rec := observe(t, s, "k")
	assert.Equal(t, "a", rec.LeaderID)
	assert.Zero(t, rec.Age)
	assert.Greater(t, rec.Ahead, time.Second, "ahead %v", rec.Ahead)
	assert.LessOrEqual(t, rec.Ahead, 2*time.Second, "ahead %v", rec.Ahead)
	assert.False(t, rec.Expired(time.Second))
	_, won, err := s.Elect(ctx, "k", store.Candidate{ID: "b", Lease: time.Second}, rec.Version)
	require.NoError(t, err)
	assert.False(t, won, "the lease is live by the reading server's clock")
}

func corruptRowsGiveClearErrors(t *testing.T, h Harness) {
	s, table := open(t, h)
	ctx := t.Context()
	insert(t, s, "healthy", "a")

	for _, tc := range []struct{ what, mention string }{
		{NullLeader, "leader_id"},
		{FutureTick, "future"},
		{NegativeVersion, "version"},
		{FarFutureTick, "future"},
		{TopVersion, "limit"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			key := tc.what
			insert(t, s, key, "a")
			h.Corrupt(t, table, key, tc.what)

			var (
				found bool
				err   error
			)
			require.NotPanics(t, func() { _, found, err = s.Observe(ctx, key) })
			require.ErrorIs(t, err, store.ErrInvalidRow)
			assert.Contains(t, err.Error(), tc.mention)
			assert.Contains(t, err.Error(), key, "the error names the key")
			assert.False(t, found)

			// Writes on a corrupt row may win or lose, but never panic.
			require.NotPanics(t, func() {
				_, _ = s.Renew(ctx, key, "a", 1)
				_, _ = s.RequestStepDown(ctx, key, 1, "b")
				_, _ = s.Release(ctx, key, "a", 1)
				_, _, _ = s.Elect(ctx, key, store.Candidate{ID: "b", Lease: 0}, 1)
			})
		})
	}

	// Other rows are unaffected.
	assert.Equal(t, "a", observe(t, s, "healthy").LeaderID)
}
