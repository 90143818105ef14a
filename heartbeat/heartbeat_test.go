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

var _ heartbeat.Renewer = (*memstore.Store)(nil)

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

var cfg = heartbeat.Config{Key: "k", ID: "a", Interval: interval}

func TestRenewsEveryIntervalFromTheSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		st.SetDelay(memstore.OpRenew, 20*time.Millisecond) // each round trip takes 20 ms
		start := time.Now()
		var sends []time.Duration
		ctx, cancel := context.WithTimeout(t.Context(), 450*time.Millisecond)
		defer cancel()
		res := heartbeat.Run(ctx, st, cfg, v, start, start.Add(renew), func(_ int64, sent time.Time) time.Time {
			sends = append(sends, sent.Sub(start))
			return sent.Add(renew)
		})
		assert.Equal(t, heartbeat.Stopped, res.Outcome)
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}, sends,
			"renewals are spaced by the interval between send times, whatever the round trip")
		assert.Equal(t, v+4, res.Version, "four renewals bumped the version by one each")
	})
}

func TestLostCompareAndSetEndsTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		now := time.Now()
		stale := v - 1
		res := heartbeat.Run(t.Context(), st, cfg, stale, now, now.Add(renew), func(int64, time.Time) time.Time {
			t.Fatal("a lost renewal must not be reported as renewed")
			return time.Time{}
		})
		assert.Equal(t, heartbeat.Lost, res.Outcome)
		assert.Equal(t, stale, res.Version)
	})
}

func TestHungRenewalEndsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		st.SetDelay(memstore.OpRenew, time.Hour)
		now := time.Now()
		res := heartbeat.Run(t.Context(), st, cfg, v, now, now.Add(renew), nil)
		assert.Equal(t, heartbeat.Expired, res.Outcome)
		assert.Equal(t, renew, time.Since(now), "the statement's timeout is the trust deadline")
		assert.ErrorIs(t, res.Err, store.ErrTransient)
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
		res := heartbeat.Run(ctx, st, cfg, v, now, now.Add(renew), func(_ int64, sent time.Time) time.Time {
			renewed++
			return sent.Add(renew)
		})
		assert.Equal(t, heartbeat.Stopped, res.Outcome)
		assert.Equal(t, 1, renewed, "the failed renewal was retried and succeeded")
		assert.Equal(t, 2, st.Calls(memstore.OpRenew), "one failure, one retry")
	})
}

func TestAmbiguousRenewalSurfacesAsLostOnRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		st.CommitThenFail(memstore.OpRenew, fmt.Errorf("%w: connection reset", store.ErrTransient))
		now := time.Now()
		res := heartbeat.Run(t.Context(), st, cfg, v, now, now.Add(renew), func(int64, time.Time) time.Time {
			t.Fatal("an ambiguous renewal is not a success")
			return time.Time{}
		})
		assert.Equal(t, heartbeat.Lost, res.Outcome, "the retry from the old version loses: the caller settles with a read")
	})
}

func TestDeploymentErrorFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, v := leader(t)
		st.Fail(memstore.OpRenew, fmt.Errorf("%w: missing privilege", store.ErrDeployment))
		now := time.Now()
		res := heartbeat.Run(t.Context(), st, cfg, v, now, now.Add(renew), nil)
		assert.Equal(t, heartbeat.Failed, res.Outcome)
		assert.ErrorIs(t, res.Err, store.ErrDeployment)
	})
}

func TestOutcomeString(t *testing.T) {
	assert.Equal(t, "expired", heartbeat.Expired.String())
}
