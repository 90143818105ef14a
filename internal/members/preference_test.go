package members

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casleader/casleader/store"
)

// lease is the lease of the elections of these tests.
const lease = 1000 * time.Millisecond

var t0 = time.Now()

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// live is a member of priority prio whose row was written age ago.
func live(id string, prio int64, age time.Duration) store.Member {
	return store.Member{Key: "k", ID: id, Role: RoleFollower, Priority: prio, Age: age}
}

func TestPreference(t *testing.T) {
	t.Parallel()
	paused := live("hi", 5, 0)
	paused.Paused = true
	observer := live("hi", 5, 0)
	observer.Role = RoleObserver
	type read struct {
		ms   int // send time, ms after t0
		term int64
		seen []store.Member
		want string
	}
	per := int(Period(lease) / time.Millisecond) // a lease
	fresh := int(Fresh(lease) / time.Millisecond)
	steady := func(term int64, want string, ms ...store.Member) []read {
		// Reads every period (a lease) from t0: the second may decide.
		return []read{{0, term, ms, ""}, {per, term, ms, want}}
	}
	cases := map[string][]read{
		"HandsOverAfterTheTargetWasSeenLiveForALease": steady(7, "hi", live("me", 1, 0), live("hi", 5, 10*time.Millisecond)),
		"NotBeforeALease": {
			{0, 7, []store.Member{live("hi", 5, 0)}, ""},
			{per - 1, 7, []store.Member{live("hi", 5, 0)}, ""},
			{per, 7, []store.Member{live("hi", 5, 0)}, "hi"},
		},
		"EqualPriorityNeverTriggers": steady(7, "", live("peer", 1, 0)),
		"LowerPriorityNeverTriggers": steady(7, "", live("low", 0, 0)),
		"PausedIsNoTarget":           steady(7, "", paused),
		"ObserverIsNoTarget":         steady(7, "", observer),
		"OwnRowIsNoTarget":           steady(7, "", live("me", 9, 0)),
		"StaleRowIsNoTarget":         steady(7, "", live("hi", 5, Fresh(lease))),
		"HighestPriorityWins":        steady(7, "top", live("hi", 5, 0), live("top", 6, 0)),
		"TieGoesToTheLowestID":       steady(7, "a", live("b", 5, 0), live("a", 5, 0)),
		"NotWhileNotLeading":         steady(0, "", live("hi", 5, 0)),
		"TargetGoneAtTheLastReadMeansNone": {
			{0, 7, []store.Member{live("hi", 5, 0)}, ""},
			{per / 2, 7, []store.Member{live("hi", 5, 0)}, ""},
			{per, 7, nil, ""},
		},
		"ABreakStartsTheLeaseAgain": {
			{0, 7, []store.Member{live("hi", 5, 0)}, ""},
			{per, 7, []store.Member{paused}, ""},
			{2 * per, 7, []store.Member{live("hi", 5, 0)}, ""},
			{3 * per, 7, []store.Member{live("hi", 5, 0)}, "hi"},
		},
		"ANewTermStartsTheLeaseAgain": {
			{0, 7, []store.Member{live("hi", 5, 0)}, ""},
			{per, 8, []store.Member{live("hi", 5, 0)}, ""},
			{2 * per, 8, []store.Member{live("hi", 5, 0)}, "hi"},
		},
		"ReadsTwoPeriodsApartStillVouch": {
			{0, 7, []store.Member{live("hi", 5, 0)}, ""},
			{2 * per, 7, []store.Member{live("hi", 5, 0)}, "hi"},
		},
		"ReadsMoreThanTwoPeriodsApartVouchForNothing": {
			{0, 7, []store.Member{live("hi", 5, 0)}, ""},
			{2*per + 1, 7, []store.Member{live("hi", 5, 0)}, ""},
			{3*per + 1, 7, []store.Member{live("hi", 5, 0)}, "hi"},
		},
		"DecidedOnceThenALeaseAgain": {
			{0, 7, []store.Member{live("hi", 5, 0)}, ""},
			{per, 7, []store.Member{live("hi", 5, 0)}, "hi"},
			{per + per/2, 7, []store.Member{live("hi", 5, 0)}, ""},
			{2 * per, 7, []store.Member{live("hi", 5, 0)}, "hi"},
		},
		"TheTargetsWritesMustSpanALease": {
			// Its last write was at 0: it stopped writing (died) then.
			{0, 7, []store.Member{live("hi", 5, 0)}, ""},
			{per, 7, []store.Member{live("hi", 5, lease)}, ""},
			{fresh - 1, 7, []store.Member{live("hi", 5, Fresh(lease)-time.Millisecond)}, ""},
		},
		"ARowJustFreshCounts": {
			{0, 7, []store.Member{live("hi", 5, 0)}, ""},
			{fresh - 1, 7, []store.Member{live("hi", 5, Fresh(lease)-time.Millisecond)}, ""},
			{per + fresh - 1, 7, []store.Member{live("hi", 5, Fresh(lease)-time.Millisecond)}, "hi"},
		},
		"AQualifiedLowerTargetIsNotHeldBackByAnUnqualifiedHigherOne": {
			{0, 7, []store.Member{live("mid", 3, 0)}, ""},
			{per / 2, 7, []store.Member{live("mid", 3, 0), live("top", 6, 0)}, ""},
			{per, 7, []store.Member{live("mid", 3, 0), live("top", 6, 0)}, "mid"},
		},
	}
	for name, reads := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := NewPreference("me", 1, lease)
			for i, r := range reads {
				assert.Equal(t, r.want, p.Seen(r.seen, at(r.ms), r.term), "read %d at %d ms", i, r.ms)
			}
		})
	}
}

// TestPreferenceNeverCycles plays two candidates of equal top priority and a low
// one handing the lease among themselves by the rule, each new leader deciding
// with its own Preference: the lease reaches a top candidate once and stays.
func TestPreferenceNeverCycles(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		prio := map[string]int64{"low": 0, "a": 5, "b": 5}
		prefs := map[string]*Preference{}
		for id, p := range prio {
			prefs[id] = NewPreference(id, p, lease)
		}
		leader, term, handovers := "low", int64(1), 0
		for range 20 { // twenty leases, a read every period
			time.Sleep(Period(lease))
			var ms []store.Member
			for id, p := range prio {
				ms = append(ms, live(id, p, 0))
			}
			if to := prefs[leader].Seen(ms, time.Now(), term); to != "" {
				leader, term = to, term+1
				handovers++
			}
		}
		assert.Equal(t, "a", leader)
		assert.Equal(t, 1, handovers)
	})
}

// TestPreferenceInABalancedGroup: the candidates of a balanced group write every
// half lease (BalancedPeriod), and the rule follows: a row counts as live for
// three quarters of a lease, and reads more than a lease apart vouch for nothing.
func TestPreferenceInABalancedGroup(t *testing.T) {
	t.Parallel()
	half := int(BalancedPeriod(lease) / time.Millisecond)
	for name, reads := range map[string][]struct {
		ms   int
		age  time.Duration
		want string
	}{
		"HandsOverAfterALease":          {{0, 0, ""}, {half, 0, ""}, {2 * half, 0, "hi"}},
		"ARowThreeQuartersOldIsStale":   {{0, 0, ""}, {half, 0, ""}, {2 * half, 3 * lease / 4, ""}},
		"ReadsALeaseApartStillVouch":    {{0, 0, ""}, {2 * half, 0, "hi"}},
		"ReadsFurtherApartVouchNothing": {{0, 0, ""}, {2*half + 1, 0, ""}, {4*half + 1, 0, "hi"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := NewPreference("me", 1, lease)
			p.period = BalancedPeriod(lease)
			for i, r := range reads {
				assert.Equal(t, r.want, p.Seen([]store.Member{live("hi", 5, r.age)}, at(r.ms), 7), "read %d at %d ms", i, r.ms)
			}
		})
	}
}

// TestSuccessor: a graceful end of a term names the best live candidate of one
// read: highest priority, then lowest ID; never the leader itself (a resign
// with a cool-down is not handed back to it), a paused candidate, an observer, or
// a row older than Fresh; "" when none is left.
func TestSuccessor(t *testing.T) {
	const lease = 4 * time.Second
	m := func(id string, prio int64, f func(*store.Member)) store.Member {
		x := store.Member{Key: "k", ID: id, Role: RoleFollower, Priority: prio}
		if f != nil {
			f(&x)
		}
		return x
	}
	paused := func(x *store.Member) { x.Paused = true }
	observer := func(x *store.Member) { x.Role = RoleObserver }
	stale := func(x *store.Member) { x.Age = Fresh(lease) }
	leader := func(x *store.Member) { x.Role = RoleLeader } // a crashed leader's last row
	for _, c := range []struct {
		name string
		ms   []store.Member
		want string
	}{
		{"NoMembers", nil, ""},
		{"OnlyItself", []store.Member{m("me", 9, nil)}, ""},
		{"LowestIDAmongEquals", []store.Member{m("me", 0, nil), m("c", 1, nil), m("b", 1, nil)}, "b"},
		{"HighestPriorityFirst", []store.Member{m("b", 1, nil), m("z", 3, nil), m("c", 2, nil)}, "z"},
		{"NeverPausedObserverOrStale", []store.Member{m("a", 9, paused), m("b", 9, observer), m("c", 9, stale), m("d", 0, nil)}, "d"},
		{"NoneLive", []store.Member{m("a", 9, paused), m("b", 9, observer), m("c", 9, stale)}, ""},
		{"NeverARowThatStillSaysItLeads", []store.Member{m("a", 9, leader), m("d", 0, nil)}, "d"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Successor(c.ms, "me", Fresh(lease)))
		})
	}
}
