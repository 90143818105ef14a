package faultstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/faultstore"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

var errBoom = errors.New("boom")

func TestFailNextFailsOneCallWithoutWriting(t *testing.T) {
	ms := memstore.New()
	fs := faultstore.New(ms)
	ctx := context.Background()
	fs.FailNext(faultstore.OpInsert, errBoom)
	term, ok, err := fs.Insert(ctx, "k", store.Candidate{ID: "a"})
	require.ErrorIs(t, err, errBoom)
	assert.False(t, ok)
	assert.Zero(t, term)
	_, found, err := ms.Observe(ctx, "k")
	require.NoError(t, err)
	assert.False(t, found, "the failed insert wrote")
	term, ok, err = fs.Insert(ctx, "k", store.Candidate{ID: "a"})
	require.NoError(t, err)
	assert.True(t, ok)
	rec, _, err := ms.Observe(ctx, "k")
	require.NoError(t, err)
	assert.Positive(t, term)
	assert.Equal(t, rec.Term, term, "the inner store's term is passed on")
	assert.Equal(t, 2, fs.Calls(faultstore.OpInsert))
}

func TestCommitThenFailWritesAndLosesTheReply(t *testing.T) {
	ms := memstore.New()
	fs := faultstore.New(ms)
	ctx := context.Background()
	v, _, err := fs.Insert(ctx, "k", store.Candidate{ID: "a"})
	require.NoError(t, err)
	fs.CommitThenFail(faultstore.AnyOp, errBoom)
	ok, err := fs.Renew(ctx, "k", "a", v)
	require.ErrorIs(t, err, errBoom)
	assert.False(t, ok)
	rec, _, err := ms.Observe(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, v+1, rec.Version, "the renewal committed")

	fs.CommitThenFail(faultstore.OpHandover, errBoom)
	term, ok, err := fs.Handover(ctx, "k", "a", v+1, store.Candidate{ID: "b"})
	require.ErrorIs(t, err, errBoom)
	assert.False(t, ok)
	assert.Zero(t, term, "an ambiguous write reports no term")
	rec, _, err = ms.Observe(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "b", rec.LeaderID, "the handover committed")
	assert.Greater(t, rec.Term, v)
}

func TestFailLastsUntilClearedAndDelayHonoursTheContext(t *testing.T) {
	fs := faultstore.New(memstore.New())
	ctx := context.Background()
	fs.Fail(faultstore.OpObserve, errBoom)
	for range 3 {
		_, _, err := fs.Observe(ctx, "k")
		require.ErrorIs(t, err, errBoom)
	}
	fs.Fail(faultstore.OpObserve, nil)
	_, _, err := fs.Observe(ctx, "k")
	require.NoError(t, err)

	fs.SetDelay(faultstore.AnyOp, time.Hour)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, _, err = fs.Insert(dctx, "k", store.Candidate{ID: "a"})
	require.ErrorIs(t, err, store.ErrTransient)
	assert.Equal(t, 5, fs.Calls(faultstore.AnyOp))
}

func TestErrorLooksClassified(t *testing.T) {
	for _, d := range []string{"mysql", "postgres"} {
		assert.ErrorIs(t, faultstore.Error(d, faultstore.ReadOnly), store.ErrNotWritable)
		assert.ErrorIs(t, faultstore.Error(d, faultstore.Deadlock), store.ErrTransient)
		assert.ErrorIs(t, faultstore.Error(d, faultstore.Serialization), store.ErrTransient)
		assert.ErrorIs(t, faultstore.Error(d, faultstore.ConnReset), store.ErrTransient)
		assert.ErrorIs(t, faultstore.Error(d, faultstore.NoPrivilege), store.ErrDeployment)
	}
}

func TestGuardIsTheInnerStoresWithItsFaults(t *testing.T) {
	fs := faultstore.New(memstore.New())
	assert.ErrorContains(t, fs.Guard(context.Background(), nil, "k", "a", 1, time.Second), "cannot fence", "the in-memory store's own answer")
	boom := errors.New("boom")
	fs.FailNext(faultstore.OpGuard, boom)
	assert.ErrorIs(t, fs.Guard(context.Background(), nil, "k", "a", 1, time.Second), boom)
}
