package cas

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
)

// cluster simulates a leader renewing through one database server and a follower
// reading through another whose clock runs skew ahead (behind when negative). All
// times are true times since t0.
type cluster struct {
	heartbeat time.Duration
	death     time.Duration // the leader's last renewal is the last one at or before death
	skew      time.Duration
}

// read returns the row that the follower's server returns for a read executed at
// true time now.
func (c cluster) read(now time.Duration) store.Record {
	last := min(now, c.death) / c.heartbeat * c.heartbeat // true time of the last renewal
	age := now - last + c.skew                            // reading clock minus the tick
	rec := row(10+int64(last/c.heartbeat), "old", 10, max(age, 0))
	rec.Ahead = max(-age, 0)
	return rec
}

func (c cluster) lastRenewal() time.Duration { return c.death / c.heartbeat * c.heartbeat }

// follow runs a follower that starts reading at start and reads again after each
// decision's wait capped at poll, until it campaigns; it returns the true time of
// that read.
func follow(t *testing.T, m *Machine, c cluster, start, poll time.Duration) time.Duration {
	t.Helper()
	now := start
	for range 10000 {
		d := m.Observed(c.read(now), true, t0.Add(now), Campaigning)
		if d.Action == Campaign {
			return now
		}
		require.Equal(t, Wait, d.Action)
		require.Positive(t, d.Wait)
		now += min(d.Wait, poll)
	}
	t.Fatal("the follower never campaigned")
	return 0
}

// TestSkewedServerNeverTakesOverEarly is the rule of skew.go: whatever the offset
// between the leader's server clock and the follower's, a follower campaigns only
// once the lease has run L since the leader's last renewal in true time; and it
// does so within about a poll interval after that (plus the offset when its
// server runs behind, whose own elections wait for its clock).
func TestSkewedServerNeverTakesOverEarly(t *testing.T) {
	const heartbeat = 150 * time.Millisecond
	for _, skew := range []time.Duration{-2 * time.Second, -300 * time.Millisecond, 0, 5 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second, 30 * time.Second} {
		for _, poll := range []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, 2 * lease} {
			for _, start := range []time.Duration{0, 7 * time.Second, 9950 * time.Millisecond, 10500 * time.Millisecond} {
				t.Run(fmt.Sprintf("skew%v/poll%v/start%v", skew, poll, start), func(t *testing.T) {
					c := cluster{heartbeat: heartbeat, death: 10 * time.Second, skew: skew}
					took := follow(t, New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew), c, start, poll)
					last := c.lastRenewal()
					assert.GreaterOrEqual(t, took-last, lease, "took over %v after the last renewal", took-last)
					bound := lease + max(-skew, 0) + poll + heartbeat
					if start > last {
						bound += lease // it never saw the term live: a whole lease from its first read
					}
					assert.LessOrEqual(t, took-last, bound, "took over %v after the last renewal", took-last)
				})
			}
		}
	}
}

// TestJoinerOnAServerAheadNeverTakesAliveLease: the case that gave two leaders. A
// candidate starts on a server whose clock runs 2 s ahead of the live leader's
// (L = 1 s): every read shows the lease expired by that server's clock, and the
// election statement there would win; the follower never campaigns while the
// leader renews, and reports the skew.
func TestJoinerOnAServerAheadNeverTakesAliveLease(t *testing.T) {
	c := cluster{heartbeat: 150 * time.Millisecond, death: time.Hour, skew: 2 * time.Second}
	m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	for now := 5 * time.Second; now < 5*time.Second+timing.SkewWindow; now += 100 * time.Millisecond {
		rec := c.read(now)
		require.True(t, rec.Expired(lease), "the server's own judgement: expired")
		d := m.Observed(rec, true, t0.Add(now), Campaigning)
		require.Equal(t, Wait, d.Action, "at %v", now)
	}
	got := m.Skew(t0.Add(5*time.Second + timing.SkewWindow))
	assert.InDelta(t, c.skew, got, float64(100*time.Millisecond), "measured %v", got)
	assert.LessOrEqual(t, got, c.skew, "the measurement is a lower bound")
}

// TestSkewIsMeasuredInBothDirections: a server behind the leader's sees its ticks
// in the future; one ahead sees renewals aged more than the time between its reads.
// One server, or a leader that does not renew between two reads, shows none. A
// measurement is forgotten after the window.
func TestSkewIsMeasuredInBothDirections(t *testing.T) {
	tests := []struct {
		name      string
		skew      time.Duration
		heartbeat time.Duration
		want      time.Duration
		tolerance time.Duration
	}{
		{"ServerBehindSeesFutureTicks", -700 * time.Millisecond, 150 * time.Millisecond, -700 * time.Millisecond, 0},
		{"ServerAheadSeesOldRenewals", 700 * time.Millisecond, 150 * time.Millisecond, 700 * time.Millisecond, 100 * time.Millisecond},
		{"OneServerShowsNone", 0, 150 * time.Millisecond, 0, 0},
		{"UnrenewedLeaseShowsNone", 700 * time.Millisecond, time.Hour, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster{heartbeat: tt.heartbeat, death: time.Hour, skew: tt.skew}
			m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
			now := time.Second
			for ; now < 5*time.Second; now += 100 * time.Millisecond {
				m.Observed(c.read(now), true, t0.Add(now), Abstaining)
			}
			got := m.Skew(t0.Add(now))
			assert.InDelta(t, tt.want, got, float64(tt.tolerance), "measured %v", got)
			if tt.want > 0 {
				assert.LessOrEqual(t, got, tt.want, "a lower bound")
			}
			assert.Zero(t, m.Skew(t0.Add(now+2*timing.SkewWindow)), "forgotten after the window")
		})
	}
}

// TestFreshestReadIsForgottenAfterTheWindow: the smallest age read of a term is
// taken over the window, so that a skew that grows is followed; the follower of a
// lease that stopped being renewed still takes over, a lease after the last
// renewal or a little later.
func TestFreshestReadIsForgottenAfterTheWindow(t *testing.T) {
	long := 2 * timing.SkewWindow
	c := cluster{heartbeat: 150 * time.Millisecond, death: long, skew: 300 * time.Millisecond}
	m := New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: lease}, renew)
	took := follow(t, m, c, 0, 300*time.Millisecond)
	assert.GreaterOrEqual(t, took-c.lastRenewal(), lease)
	assert.LessOrEqual(t, took-c.lastRenewal(), lease+300*time.Millisecond+c.heartbeat)

	// The window is at least two leases: a follower that reads rarely still sees
	// the term's live reads when the lease runs out.
	big := 40 * time.Second
	m = New(store.Candidate{ID: "me", Incarnation: "inc-" + "me", Lease: big}, big/2)
	c = cluster{heartbeat: time.Second, death: 5 * time.Minute, skew: time.Second}
	took = follow(t, m, c, 0, 30*time.Second)
	assert.GreaterOrEqual(t, took-c.lastRenewal(), big)
	assert.LessOrEqual(t, took-c.lastRenewal(), big+30*time.Second+c.heartbeat)
}

// TestSkewIsBoundedByTheReply: the leader renews right after a follower's read;
// the follower's next read, sent 10 ms later, reaches the database 300 ms after
// its send (the process starved). Taken as instantaneous (Observed), the row's
// 300 ms age beyond the 10 ms between the sends reads as a server 290 ms ahead;
// bounded by the reply (ObservedReply), it is no skew. A row read by the clock
// that wrote it (OneClock) shows none either way.
func TestSkewIsBoundedByTheReply(t *testing.T) {
	const ms = time.Millisecond
	sent0, sent1 := t0.Add(time.Second), t0.Add(time.Second+10*ms)
	first := store.Record{Key: "k", LeaderID: "a", Term: 1, Version: 1, Age: 5 * ms}
	second := first
	second.Version, second.Age = 2, 300*ms
	for _, tc := range []struct {
		name     string
		oneClock bool
		reply    bool
		want     time.Duration
	}{
		{"InstantaneousReadTakesTheDelayForSkew", false, false, 290 * ms},
		{"ReplyBoundsTheAge", false, true, 0},
		{"OneClockShowsNone", true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(store.Candidate{ID: "me", Incarnation: "inc-me", Lease: lease}, renew)
			a, b := first, second
			a.OneClock, b.OneClock = tc.oneClock, tc.oneClock
			m.ObservedReply(a, true, sent0, sent0.Add(ms), Abstaining)
			if tc.reply {
				m.ObservedReply(b, true, sent1, sent1.Add(310*ms), Abstaining)
			} else {
				m.Observed(b, true, sent1, Abstaining)
			}
			assert.Equal(t, tc.want, m.Skew(sent1.Add(310*ms)))
		})
	}
}
