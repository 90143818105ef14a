package timing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/store"
)

func TestReadAfterRenewal(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		age, heartbeat, poll, want time.Duration
		released                   bool
	}{
		{age: 500 * ms, heartbeat: 2000 * ms, poll: 5000 * ms, want: 3500 * ms}, // renewals due at 1.5, 3.5, 5.5 s
		{age: 0, heartbeat: 2000 * ms, poll: 5000 * ms, want: 4000 * ms},
		{age: 1000 * ms, heartbeat: 2000 * ms, poll: 5000 * ms, want: 5000 * ms}, // one due at the poll itself
		{age: 30 * ms, heartbeat: 60 * ms, poll: 120 * ms, want: 90 * ms},
		{age: 2500 * ms, heartbeat: 2000 * ms, poll: 5000 * ms, want: 3500 * ms}, // a renewal late: phase of the last
		{age: 100 * ms, heartbeat: 1000 * ms, poll: 500 * ms, want: 500 * ms},    // next one at 900 ms: beyond poll
		{age: 700 * ms, heartbeat: 1000 * ms, poll: 500 * ms, want: 500 * ms},    // reads more often than renewals
		{age: 700 * ms, heartbeat: 1000 * ms, poll: 1000 * ms, want: 1000 * ms},  // as often
		{age: 500 * ms, heartbeat: 2000 * ms, poll: 5000 * ms, want: 5000 * ms, released: true},
		{age: 100 * ms, heartbeat: 0, poll: 500 * ms, want: 500 * ms},
		{age: 100 * ms, heartbeat: 60 * ms, poll: 0, want: 0},
	} {
		rec := store.Record{LeaderID: "x", Age: c.age}
		if c.released {
			rec.LeaderID = ""
		}
		got := ReadAfterRenewal(rec, true, c.heartbeat, c.poll)
		assert.Equal(t, c.want, got, "age %v, heartbeat %v, poll %v", c.age, c.heartbeat, c.poll)
	}
	// No row, or one read on one clock: the wait is left as it is.
	held := store.Record{LeaderID: "x", Age: 500 * ms}
	assert.Equal(t, 5000*ms, ReadAfterRenewal(held, false, 2000*ms, 5000*ms), "no row")
	held.OneClock = true
	assert.Equal(t, 5000*ms, ReadAfterRenewal(held, true, 2000*ms, 5000*ms), "one clock")
	// Every wait is within (0, poll] and, when shorter than poll, ends on a renewal.
	for age := time.Duration(0); age < 3*time.Second; age += 7 * ms {
		for _, hp := range [][2]time.Duration{{2 * time.Second, 5 * time.Second}, {time.Second, 400 * ms}, {60 * ms, 100 * ms}} {
			w := ReadAfterRenewal(store.Record{LeaderID: "x", Age: age}, true, hp[0], hp[1])
			require.Greater(t, w, time.Duration(0))
			require.LessOrEqual(t, w, hp[1])
			if w < hp[1] {
				require.Zero(t, (age+w)%hp[0], "age %v, heartbeat %v, poll %v: %v", age, hp[0], hp[1], w)
			}
		}
	}
}
