package memstore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// The conformance suite runs on memstore in package store's tests, next to the SQL
// stores. These tests cover what only the fake has: its fault hooks and its clock.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errBoom = errors.New("boom")

// leader returns a store where "a" leads key "k", and the row's version: the term
// that the insert started.
func leader(t *testing.T) (*memstore.Store, int64) {
	t.Helper()
	s := memstore.New()
	term, ok, err := s.Insert(t.Context(), "k", store.Candidate{ID: "a"})
	require.NoError(t, err)
	require.True(t, ok)
	require.Positive(t, term)
	return s, term
}

func version(t *testing.T, s *memstore.Store) int64 {
	t.Helper()
	rec, found, err := s.Observe(t.Context(), "k")
	require.NoError(t, err)
	require.True(t, found)
	return rec.Version
}

func TestNewHasATableAndNewWithoutTableDoesNot(t *testing.T) {
	t.Parallel()
	require.NoError(t, memstore.New().Check(t.Context()))

	s := memstore.NewWithoutTable("elections")
	err := s.Check(t.Context())
	require.ErrorIs(t, err, store.ErrDeployment)
	assert.Contains(t, err.Error(), `"elections"`)
	require.NoError(t, s.CreateTable(t.Context()))
	require.NoError(t, s.Check(t.Context()))
}

func TestFailNextFailsOneCallWithoutWriting(t *testing.T) {
	t.Parallel()
	s, v := leader(t)
	s.FailNext(memstore.OpRenew, store.ErrTransient)

	ok, err := s.Renew(t.Context(), "k", "a", v)
	require.ErrorIs(t, err, store.ErrTransient)
	assert.Contains(t, err.Error(), `renew`)
	assert.False(t, ok)
	assert.Equal(t, v, version(t, s), "a failed call wrote")

	ok, err = s.Renew(t.Context(), "k", "a", v)
	require.NoError(t, err, "the fault fires once")
	assert.True(t, ok)
}

func TestFailNextQueuesAndAnyOpMatchesEveryOperation(t *testing.T) {
	t.Parallel()
	s, v := leader(t)
	s.FailNext(memstore.AnyOp, errBoom)
	s.FailNext(memstore.AnyOp, store.ErrNotWritable)

	_, _, err := s.Observe(t.Context(), "k")
	require.ErrorIs(t, err, errBoom)
	_, err = s.Release(t.Context(), "k", "a", v)
	require.ErrorIs(t, err, store.ErrNotWritable)
	assert.Equal(t, v, version(t, s))
}

func TestCommitThenFailWritesAndLosesTheReply(t *testing.T) {
	t.Parallel()
	s, v := leader(t)
	s.CommitThenFail(memstore.OpRenew, store.ErrTransient)

	ok, err := s.Renew(t.Context(), "k", "a", v)
	require.ErrorIs(t, err, store.ErrTransient)
	assert.False(t, ok, "an ambiguous call reports no swap")
	assert.Equal(t, v+1, version(t, s), "the write committed")
}

func TestCommitThenFailOfAnElectionReportsNoTerm(t *testing.T) {
	t.Parallel()
	s, v := leader(t)
	ok, err := s.Release(t.Context(), "k", "a", v)
	require.NoError(t, err)
	require.True(t, ok)
	s.CommitThenFail(memstore.OpElect, store.ErrTransient)

	term, ok, err := s.Elect(t.Context(), "k", store.Candidate{ID: "b", Lease: time.Hour}, v+1)
	require.ErrorIs(t, err, store.ErrTransient)
	assert.False(t, ok, "an ambiguous call reports no win")
	assert.Zero(t, term, "an ambiguous call reports no term")
	rec, _, err := s.Observe(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, "b", rec.LeaderID, "the election committed")
	assert.Greater(t, rec.Term, v)
}

func TestFailLastsUntilCleared(t *testing.T) {
	t.Parallel()
	s, v := leader(t)
	s.Fail(memstore.AnyOp, store.ErrTransient)
	for range 3 {
		_, _, err := s.Observe(t.Context(), "k")
		require.ErrorIs(t, err, store.ErrTransient)
	}
	s.Fail(memstore.AnyOp, nil)
	assert.Equal(t, v, version(t, s))
	assert.Equal(t, 4, s.Calls(memstore.OpObserve), "failed calls are counted")
	assert.Equal(t, 5, s.Calls(memstore.AnyOp), "the insert, and four observes")
}

func TestSetDelayHonoursTheContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, v := leader(t)
		s.SetDelay(memstore.OpRenew, time.Second)

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		ok, err := s.Renew(ctx, "k", "a", v)
		require.ErrorIs(t, err, store.ErrTransient)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, ok)
		assert.Equal(t, 100*time.Millisecond, time.Since(start))
		assert.Equal(t, v, version(t, s), "a call that timed out in flight wrote")

		start = time.Now()
		ok, err = s.Renew(t.Context(), "k", "a", v)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, time.Second, time.Since(start))

		s.SetDelay(memstore.OpRenew, 0)
		start = time.Now()
		_, err = s.Renew(t.Context(), "k", "a", v+1)
		require.NoError(t, err)
		assert.Zero(t, time.Since(start))
	})
}

func TestLeaseExpiresInTheBubblesTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, v := leader(t)
		time.Sleep(10 * time.Second)

		rec, _, err := s.Observe(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, 10*time.Second, rec.Age)

		term, ok, err := s.Elect(t.Context(), "k", store.Candidate{ID: "b", Lease: 10*time.Second + time.Microsecond}, v)
		require.NoError(t, err)
		assert.False(t, ok, "the lease has a microsecond left")
		assert.Zero(t, term, "a lost election reports no term")
		term, ok, err = s.Elect(t.Context(), "k", store.Candidate{ID: "b", Lease: 10 * time.Second}, v)
		require.NoError(t, err)
		assert.True(t, ok, "a lease expires when its age reaches it")
		assert.Greater(t, term, v)
	})
}

func TestTermsAreTheBubbleClockInMicrosecondsOrVersionPlusOne(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, v := leader(t)
		assert.Equal(t, time.Now().UnixMicro(), v, "the insert's term is the clock")
		assert.Equal(t, v, version(t, s), "the insert's term is the row's version")

		time.Sleep(time.Second)
		ok, err := s.Release(t.Context(), "k", "a", v)
		require.NoError(t, err)
		require.True(t, ok)
		term, ok, err := s.Elect(t.Context(), "k", store.Candidate{ID: "b", Lease: time.Hour}, v+1)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, time.Now().UnixMicro(), term, "the election's term is the clock")
		assert.Equal(t, v+time.Second.Microseconds(), term)

		// A row whose version is ahead of the clock (written by a server whose clock
		// was ahead): the next term is version+1, still above every earlier term.
		ahead := time.Now().Add(time.Hour).UnixMicro()
		s.Put(store.Record{Key: "k", Version: ahead, LeaderID: "b", Term: ahead})
		term, ok, err = s.Handover(t.Context(), "k", "b", ahead, store.Candidate{ID: "c"})
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, ahead+1, term)
		rec, _, err := s.Observe(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, store.Record{Key: "k", Version: ahead + 1, LeaderID: "c", Term: ahead + 1, HandoverTo: "c", OneClock: true}, rec)
	})
}

func TestPutWritesAnyRow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, term := leader(t)
		for v := term; v < term+4; v++ {
			ok, err := s.Renew(t.Context(), "k", "a", v)
			require.NoError(t, err)
			require.True(t, ok)
		}
		// A failover that lost writes: the row is back at the first renewal's version.
		old := store.Record{Key: "k", Version: term + 1, LeaderID: "a", Term: term, Age: 3 * time.Second, Lease: time.Second, Incarnation: "x", OneClock: true}
		s.Put(old)
		rec, found, err := s.Observe(t.Context(), "k")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, old, rec)

		ok, err := s.Renew(t.Context(), "k", "a", term+4)
		require.NoError(t, err)
		assert.False(t, ok, "the leader's next renewal loses")
	})
}

func TestCorruptNeedsARowAndAKnownCorruption(t *testing.T) {
	t.Parallel()
	s, _ := leader(t)
	require.Error(t, s.Corrupt("missing", "null_leader"))
	require.Error(t, s.Corrupt("k", "bad_checksum"))
	require.NoError(t, s.Corrupt("k", "negative_version"))
	_, _, err := s.Observe(t.Context(), "k")
	require.ErrorIs(t, err, store.ErrInvalidRow)
}
