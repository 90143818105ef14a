package heartbeat_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/heartbeat"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

const (
	interval = 100 * time.Millisecond
	renew    = 300 * time.Millisecond
)

// leader makes "a" the leader of "k" and returns the store and the row's version
// (the term the insert started).
func leader(t *testing.T) (*memstore.Store, int64) {
	st := memstore.New()
	term, ok, err := st.Insert(context.Background(), "k", store.Candidate{ID: "a"})
	require.NoError(t, err)
	require.True(t, ok)
	return st, term
}

// loop is the loop of leader "a" of "k" on st, with renewed as its Renewed.
func loop(st *memstore.Store, renewed func(int64, time.Time) time.Time) *heartbeat.Loop {
	return &heartbeat.Loop{Store: st, Key: "k", ID: "a", Interval: interval, Renewed: renewed}
}

func TestRenewsEveryIntervalFromTheSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		st.SetDelay(memstore.OpRenew, 20*time.Millisecond) // each round trip takes 20 ms
		start := time.Now()
		var sends []time.Duration
		ctx, cancel := context.WithTimeout(t.Context(), 450*time.Millisecond)
		defer cancel()
		out, version, err := loop(st, func(_ int64, sent time.Time) time.Time {
			sends = append(sends, sent.Sub(start))
			return sent.Add(renew)
		}).Run(ctx, v, start, start.Add(renew))
		assert.Equal(t, heartbeat.Stopped, out)
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}, sends,
			"renewals are spaced by the interval between send times, whatever the round trip")
		assert.Equal(t, v+4, version, "four renewals bumped the version by one each")
		assert.NoError(t, err, "every renewal succeeded")
	})
}

func TestLostCompareAndSetEndsTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		now := time.Now()
		stale := v - 1
		out, version, err := loop(st, func(int64, time.Time) time.Time {
			t.Fatal("a lost renewal must not be reported as renewed")
			return time.Time{}
		}).Run(t.Context(), stale, now, now.Add(renew))
		assert.Equal(t, heartbeat.Lost, out)
		assert.Equal(t, stale, version)
		assert.NoError(t, err, "a lost compare-and-set is an outcome, not an error")
	})
}

func TestHungRenewalEndsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		st.SetDelay(memstore.OpRenew, time.Hour)
		now := time.Now()
		out, _, err := loop(st, nil).Run(t.Context(), v, now, now.Add(renew))
		assert.Equal(t, heartbeat.Expired, out)
		assert.Equal(t, renew, time.Since(now), "the statement's timeout is the trust deadline")
		assert.ErrorIs(t, err, store.ErrTransient)
	})
}

func TestTransientErrorsAreRetriedInsideTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		st.FailNext(memstore.OpRenew, fmt.Errorf("%w: deadlock", store.ErrTransient))
		now := time.Now()
		renewed := 0
		ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
		defer cancel()
		out, _, err := loop(st, func(_ int64, sent time.Time) time.Time {
			renewed++
			return sent.Add(renew)
		}).Run(ctx, v, now, now.Add(renew))
		assert.Equal(t, heartbeat.Stopped, out)
		assert.Equal(t, 1, renewed, "the failed renewal was retried and succeeded")
		assert.Equal(t, 2, st.Calls(memstore.OpRenew), "one failure, one retry")
		assert.NoError(t, err, "the retry succeeded: no error is left to report")
	})
}

func TestAmbiguousRenewalSurfacesAsLostOnRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		st.CommitThenFail(memstore.OpRenew, fmt.Errorf("%w: connection reset", store.ErrTransient))
		now := time.Now()
		out, _, err := loop(st, func(int64, time.Time) time.Time {
			t.Fatal("an ambiguous renewal is not a success")
			return time.Time{}
		}).Run(t.Context(), v, now, now.Add(renew))
		assert.Equal(t, heartbeat.Lost, out, "the retry from the old version loses: the caller settles with a read")
		assert.NoError(t, err)
	})
}

func TestDeploymentErrorFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		st.Fail(memstore.OpRenew, fmt.Errorf("%w: missing privilege", store.ErrDeployment))
		now := time.Now()
		out, _, err := loop(st, nil).Run(t.Context(), v, now, now.Add(renew))
		assert.Equal(t, heartbeat.Failed, out)
		assert.ErrorIs(t, err, store.ErrDeployment)
	})
}

func TestOutcomeString(t *testing.T) {
	assert.Equal(t, "expired", heartbeat.Expired.String())
}
