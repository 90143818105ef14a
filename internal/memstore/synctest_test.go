package memstore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// The package example's scenario in fake time: with the default timings the work
// stops at the renew deadline, 10 s after the last renewal, before the 15 s lease.
func TestWorkStopsWhenRenewalsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		err := workStopsWhenRenewalsFail(memstore.New(), casleader.Config{Key: "nightly-report", ID: "replica-1"})
		assert.ErrorIs(t, err, context.Canceled)
		took := time.Since(start)
		assert.LessOrEqual(t, took, 10*time.Second, "the work stops by the renew deadline")
		assert.Greater(t, took, 8*time.Second, "the last renewal was at most one heartbeat (2 s) before the failure")
	})
}
