package term

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// renew is the trust the tests give a term.
const renew = 600 * time.Millisecond

func TestTrustTurnsFalseAtTheDeadlineWithoutATimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr Trust
		assert.False(t, tr.IsLeader(), "the zero value does not lead")
		assert.Zero(t, tr.Token())
		tr.Set(42, time.Now().Add(renew))
		assert.True(t, tr.IsLeader())
		assert.Equal(t, int64(42), tr.Token())
		until, ok := tr.Until()
		assert.True(t, ok)
		assert.Equal(t, time.Now().Add(renew), until)
		time.Sleep(renew - time.Nanosecond)
		assert.True(t, tr.IsLeader())
		time.Sleep(time.Nanosecond)
		assert.False(t, tr.IsLeader(), "trust ends exactly at the deadline")
		assert.Zero(t, tr.Token())
		_, ok = tr.Until()
		assert.False(t, ok)

		tr.Set(43, time.Now().Add(renew))
		tr.Clear()
		assert.False(t, tr.IsLeader())
		assert.Zero(t, tr.Token())
		tr.Set(44, time.Now().Add(-time.Second))
		assert.False(t, tr.IsLeader(), "a passed deadline publishes nothing")
	})
}
