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

// leader returns a store where "a" leads key "k" at version 1.
func leader(t *testing.T) *memstore.Store {
	t.Helper()
	s := memstore.New()
	ok, err := s.Insert(t.Context(), "k", "a")
	require.NoError(t, err)
	require.True(t, ok)
	return s
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
	s := leader(t)
	s.FailNext(memstore.OpRenew, store.ErrTransient)

	ok, err := s.Renew(t.Context(), "k", "a", 1)
	require.ErrorIs(t, err, store.ErrTransient)
	assert.Contains(t, err.Error(), `renew`)
	assert.False(t, ok)
	assert.Equal(t, int64(1), version(t, s), "a failed call wrote")

	ok, err = s.Renew(t.Context(), "k", "a", 1)
	require.NoError(t, err, "the fault fires once")
	assert.True(t, ok)
}

func TestFailNextQueuesAndAnyOpMatchesEveryOperation(t *testing.T) {
	t.Parallel()
	s := leader(t)
	s.FailNext(memstore.AnyOp, errBoom)
	s.FailNext(memstore.AnyOp, store.ErrNotWritable)

	_, _, err := s.Observe(t.Context(), "k")
	require.ErrorIs(t, err, errBoom)
	_, err = s.Release(t.Context(), "k", "a", 1)
	require.ErrorIs(t, err, store.ErrNotWritable)
	assert.Equal(t, int64(1), version(t, s))
}

func TestCommitThenFailWritesAndLosesTheReply(t *testing.T) {
	t.Parallel()
	s := leader(t)
	s.CommitThenFail(memstore.OpRenew, store.ErrTransient)

	ok, err := s.Renew(t.Context(), "k", "a", 1)
	require.ErrorIs(t, err, store.ErrTransient)
	assert.False(t, ok, "an ambiguous call reports no swap")
	assert.Equal(t, int64(2), version(t, s), "the write committed")
}

func TestFailLastsUntilCleared(t *testing.T) {
	t.Parallel()
	s := leader(t)
	s.Fail(memstore.AnyOp, store.ErrTransient)
	for range 3 {
		_, _, err := s.Observe(t.Context(), "k")
		require.ErrorIs(t, err, store.ErrTransient)
	}
	s.Fail(memstore.AnyOp, nil)
	assert.Equal(t, int64(1), version(t, s))
	assert.Equal(t, 4, s.Calls(memstore.OpObserve), "failed calls are counted")
	assert.Equal(t, 5, s.Calls(memstore.AnyOp), "the insert, and four observes")
}

func TestSetDelayHonoursTheContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := leader(t)
		s.SetDelay(memstore.OpRenew, time.Second)

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		ok, err := s.Renew(ctx, "k", "a", 1)
		require.ErrorIs(t, err, store.ErrTransient)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, ok)
		assert.Equal(t, 100*time.Millisecond, time.Since(start))
		assert.Equal(t, int64(1), version(t, s), "a call that timed out in flight wrote")

		start = time.Now()
		ok, err = s.Renew(t.Context(), "k", "a", 1)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, time.Second, time.Since(start))

		s.SetDelay(memstore.OpRenew, 0)
		start = time.Now()
		_, err = s.Renew(t.Context(), "k", "a", 2)
		require.NoError(t, err)
		assert.Zero(t, time.Since(start))
	})
}

func TestLeaseExpiresInTheBubblesTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := leader(t)
		time.Sleep(10 * time.Second)

		rec, _, err := s.Observe(t.Context(), "k")
		require.NoError(t, err)
		assert.Equal(t, 10*time.Second, rec.Age)

		ok, err := s.Elect(t.Context(), "k", "b", 1, 10*time.Second+time.Microsecond)
		require.NoError(t, err)
		assert.False(t, ok, "the lease has a microsecond left")
		ok, err = s.Elect(t.Context(), "k", "b", 1, 10*time.Second)
		require.NoError(t, err)
		assert.True(t, ok, "a lease expires when its age reaches it")
	})
}

func TestPutWritesAnyRow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := leader(t)
		for v := int64(1); v < 5; v++ {
			ok, err := s.Renew(t.Context(), "k", "a", v)
			require.NoError(t, err)
			require.True(t, ok)
		}
		// A failover that lost writes: the row is back at version 2.
		old := store.Record{Key: "k", Version: 2, LeaderID: "a", Term: 1, Age: 3 * time.Second}
		s.Put(old)
		rec, found, err := s.Observe(t.Context(), "k")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, old, rec)

		ok, err := s.Renew(t.Context(), "k", "a", 5)
		require.NoError(t, err)
		assert.False(t, ok, "the leader's next renewal loses")
	})
}

func TestCorruptNeedsARowAndAKnownCorruption(t *testing.T) {
	t.Parallel()
	s := leader(t)
	require.Error(t, s.Corrupt("missing", "null_leader"))
	require.Error(t, s.Corrupt("k", "bad_checksum"))
	require.NoError(t, s.Corrupt("k", "negative_version"))
	_, _, err := s.Observe(t.Context(), "k")
	require.ErrorIs(t, err, store.ErrInvalidRow)
}
