package timing

import (
	"time"

	"github.com/casleader/casleader/store"
)

// The rules below time a follower's reads and decide which clock findings are
// worth a warning; the elector and the group apply them alike.

// SkewWindow is how long a measurement of clock skew between database servers
// counts (see package cas, "Clock skew between database servers"): the smallest age
// of a term, and the reported skew, are taken over the last SkewWindow to
// SkewWindow/2, and at least over two leases.
const SkewWindow = time.Minute

// HandoverReadDelay is how long after a handover's wake-up a follower that is not
// its target reads the row (see cas.Machine.Woken): long enough for the target's read
// on the same host to go first (well under a millisecond on an idle database), short
// enough that the new leader is known at once to whoever watches it.
const HandoverReadDelay = 5 * time.Millisecond

// SkewNotable reports whether a measured skew (cas.Machine.Skew) deserves an operator's
// attention with lease duration lease and renew deadline renew: a quarter of the
// margin L - R or more. Elections stay safe at any skew (see package cas), but a skew of
// that size means the database servers' clocks are not kept in step: candidates
// that start wait a whole lease before taking an expired one, and anything that
// judges a lease by one server's clock (the guard) sees it end early or late.
func SkewNotable(skew, lease, renew time.Duration) bool {
	return max(skew, -skew) >= (lease-renew)/4
}

// SkewMessage is the warning logged for a notable skew, with the attributes skew
// (the measurement) and margin (L - R).
const SkewMessage = "casleader: the clocks of the database servers disagree (the server this candidate reads runs ahead of the one the leader writes through when skew is positive, behind when negative); elections stay safe, but synchronize the servers' clocks (NTP)"

// LeaseMessage is the warning logged for a cas.Machine.LeaseSighting, with the
// attributes lease_row (the leader's) and lease (this candidate's).
const LeaseMessage = "casleader: the leader of this key runs with another lease duration than this candidate; the lease is judged by the leader's, as the row records it (check that every candidate runs with the same timing)"

// ReadAfterRenewal returns how long a follower that read a lease at age age waits
// before its next read, at most wait (the wait it would make otherwise: the poll
// interval, or the time until the lease can expire): timed for that read to reach
// the database just after one of the leader's renewals, if the leader renews every
// heartbeat (the read's age then falls within a heartbeat of the last renewal, the
// next renewals follow at multiples of heartbeat). The judgement of expiry waits
// beyond the lease by the freshest age a follower read of the term (see package cas), and
// a crash failover with it: reads timed by the poll interval or by the lease alone
// land at a phase of the heartbeat that drifts slowly, or not at all when they are
// a multiple of it apart, so the freshest age could stay close to a heartbeat for a
// whole term. A lease that is not renewed any more is read again when it can
// expire, one read later than without the timing, and no later.
//
// It returns wait unchanged when the read (rec, found) shows no lease that is
// renewed (no row, or a released one), when rec was read on a single-primary
// database (rec.OneClock: the age read is exact, and expiry is judged by it, so a
// fresh view of the term gains nothing), when wait is a heartbeat or less (the reads are
// then at least as frequent as the renewals), when no renewal is expected within
// wait, or when heartbeat is not set. Callers use it for some reads only (half of
// them, at random): with clock skew between servers (age is then off by the skew)
// or a leader on another heartbeat, timed reads could all land just before the
// renewals, and the others keep the phase moving.
func ReadAfterRenewal(rec store.Record, found bool, heartbeat, wait time.Duration) time.Duration {
	age := rec.Age
	if !found || rec.Released() || rec.OneClock || heartbeat <= 0 || wait <= heartbeat || age < 0 {
		return wait
	}
	if w := wait - (wait+age)%heartbeat; w > 0 {
		return w
	}
	return wait
}
