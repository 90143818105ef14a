package casleader_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// TestLeaseAloneScalesTheOtherDurations: a Config that sets only LeaseDuration gets
// a renew deadline, heartbeat and drain timeout in the defaults' proportions,
// instead of the 10 s and 2 s defaults that a short lease cannot take.
func TestLeaseAloneScalesTheOtherDurations(t *testing.T) {
	el := newElector(t, memstore.New(), casleader.Config{Key: "k", ID: "a", LeaseDuration: 3 * time.Second})
	c := el.Config()
	assert.Equal(t, 3*time.Second, c.LeaseDuration)
	assert.Equal(t, 2*time.Second, c.RenewDeadline)
	assert.Equal(t, 400*time.Millisecond, c.HeartbeatInterval)
	assert.Equal(t, time.Second, c.DrainTimeout)

	el = newElector(t, memstore.New(), casleader.Config{Key: "k", ID: "a"})
	c = el.Config()
	assert.Equal(t, []time.Duration{15 * time.Second, 10 * time.Second, 2 * time.Second, 5 * time.Second},
		[]time.Duration{c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval}, "the documented defaults")
}
