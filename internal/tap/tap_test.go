package tap_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/tap"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/memstore"
)

var _ casleader.Store = (*tap.Store)(nil)

func TestWinningWritesAndReadsOfTheOwnRowAreRenewalEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := memstore.New()
		cfg := casleader.Config{Key: "k", ID: "a", RenewDeadline: time.Second, LeaseDuration: 2 * time.Second}
		var calls []tap.Call
		st, state := tap.Instrument(ms, &cfg, tap.Hooks{Call: func(c tap.Call) { calls = append(calls, c) }})
		ctx := t.Context()

		term, ok, err := st.Insert(ctx, "k", "a")
		require.NoError(t, err)
		require.True(t, ok)
		require.Positive(t, term)
		t0 := time.Now()
		assert.Equal(t, t0, state.Snapshot().LastRenewal)

		time.Sleep(300 * time.Millisecond)
		ok, err = st.Renew(ctx, "k", "a", term-1) // wrong version: lost
		require.NoError(t, err)
		require.False(t, ok)
		assert.Equal(t, t0, state.Snapshot().LastRenewal, "a lost compare-and-set is no evidence")

		// The row was written 300ms ago: reading it is evidence from then.
		_, found, err := st.Observe(ctx, "k")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, t0, state.Snapshot().LastRenewal)

		ok, err = st.Renew(ctx, "k", "a", term)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, time.Now(), state.Snapshot().LastRenewal)

		require.Len(t, calls, 4)
		assert.Equal(t, []string{tap.OpInsert, tap.OpRenew, tap.OpObserve, tap.OpRenew},
			[]string{calls[0].Op, calls[1].Op, calls[2].Op, calls[3].Op})
		assert.Equal(t, "k", calls[2].Key)
		assert.Equal(t, term, calls[0].Term, "the call reports the insert's term")
		assert.Equal(t, term, calls[2].Record.Version)
		assert.Zero(t, calls[1].Term, "a renewal starts no term")
		assert.Same(t, ms, st.(*tap.Store).Unwrap())
	})
}

func TestWritesThatStartATermReportIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := casleader.Config{Key: "k", ID: "a"}
		var calls []tap.Call
		st, _ := tap.Instrument(memstore.New(), &cfg, tap.Hooks{Call: func(c tap.Call) { calls = append(calls, c) }})
		ctx := t.Context()

		inserted, ok, err := st.Insert(ctx, "k", "a")
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(time.Second)
		handed, ok, err := st.Handover(ctx, "k", "a", inserted, "b")
		require.NoError(t, err)
		require.True(t, ok)
		require.Greater(t, handed, inserted)
		_, ok, err = st.Elect(ctx, "k", "c", handed, time.Hour)
		require.NoError(t, err)
		require.False(t, ok, "the lease is live")
		time.Sleep(time.Second)
		elected, ok, err := st.Elect(ctx, "k", "c", handed, time.Second)
		require.NoError(t, err)
		require.True(t, ok)
		require.Greater(t, elected, handed)

		require.Len(t, calls, 4)
		assert.Equal(t, []int64{inserted, handed, 0, elected},
			[]int64{calls[0].Term, calls[1].Term, calls[2].Term, calls[3].Term})
	})
}

func TestCancellationIsToldApartFromATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := memstore.New()
		ms.SetDelay(memstore.AnyOp, time.Hour)
		cfg := casleader.Config{Key: "k", ID: "a"}
		var last tap.Call
		st, _ := tap.Instrument(ms, &cfg, tap.Hooks{Call: func(c tap.Call) { last = c }})

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := st.Renew(ctx, "k", "a", 1)
		cancel()
		require.ErrorIs(t, err, store.ErrTransient)
		assert.False(t, last.Cancelled, "a deadline is a timeout")
		assert.Equal(t, time.Second, last.Duration)

		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(time.Millisecond, cancel)
		_, err = st.Renew(ctx, "k", "a", 1)
		require.Error(t, err)
		assert.True(t, last.Cancelled)
	})
}

func TestCallbacksAreChainedAndLateStartsIgnored(t *testing.T) {
	var events []string
	cfg := casleader.Config{
		Key:              "k",
		OnStartedLeading: func(context.Context, int64) { events = append(events, "user started") },
		OnStoppedLeading: func() { events = append(events, "user stopped") },
		OnNewLeader:      func(id string) { events = append(events, "user leader "+id) },
	}
	_, state := tap.Instrument(memstore.New(), &cfg, tap.Hooks{
		Started:   func(int64) { events = append(events, "started") },
		Stopped:   func() { events = append(events, "stopped") },
		NewLeader: func(id string) { events = append(events, "leader "+id) },
	})
	require.NotEmpty(t, cfg.ID, "Instrument names the candidate")
	assert.Equal(t, cfg.ID, state.ID())

	cfg.OnNewLeader(cfg.ID)
	cfg.OnStartedLeading(t.Context(), 3)
	snap := state.Snapshot()
	assert.True(t, snap.Leading)
	assert.Equal(t, int64(3), snap.Token)
	assert.Equal(t, cfg.ID, snap.Leader)
	cfg.OnStoppedLeading()
	assert.False(t, state.Snapshot().Leading)

	// A term whose goroutine started after its context ended is not a lead phase,
	// and the stop that follows reports nothing to the hooks.
	dead, cancel := context.WithCancel(t.Context())
	cancel()
	cfg.OnStartedLeading(dead, 4)
	assert.False(t, state.Snapshot().Leading)
	cfg.OnStoppedLeading()

	assert.Equal(t, []string{
		"leader " + cfg.ID, "user leader " + cfg.ID,
		"started", "user started", "stopped", "user stopped",
		"user started", "user stopped",
	}, events)
}
