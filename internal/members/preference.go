package members

import (
	"cmp"
	"time"

	"github.com/casleader/casleader/store"
)

// Preference decides, for one candidate in one election, when the leader hands
// its lease to a candidate of higher priority (a preferred leader). It is pure
// logic like cas.Machine: the executor reads the members of the key (the members
// table, written by every candidate each period: a lease, see [Period]) while it
// leads, once a period, feeds each
// read to [Preference.Seen], and carries out the handover it returns through the
// safe path (stop acting, drain, then one compare-and-set that writes the
// target's ID in a new term; see cas.Machine.Yield and the cas.Handover action).
//
// The rule. A leader of priority p hands over to candidate c when, at a read of
// the members sent while it leads one term:
//   - c is live: its row was written less than [Fresh] (a lease and a quarter;
//     three quarters of a lease in a balanced group) ago by the database clock, it
//     is not paused, not an observer, and its ID is not the leader's own;
//   - c's priority is strictly above p (equal priorities never trigger);
//   - c has been live for at least one lease: every read of that term since the
//     first that showed c live showed it live, with no two reads more than two
//     periods apart, and c's writes seen by those reads span a full lease (from the
//     write the first read showed to the one the deciding read shows);
//   - among the candidates that qualify, c has the highest priority (ties go to
//     the lowest ID, so every reader picks the same one).
//
// The tracking starts again with every term: a leader that has just won (or
// received) its lease hands it on at the earliest a lease later. A decision
// also starts it again, so that a handover that did not happen is decided again
// at the earliest a lease later. No handover happens without a target seen live
// by the read that decides it, and a candidate that wrote its row for less than
// a lease (one that died or was paused soon after it started) never qualifies.
// Each handover moves the lease to a strictly higher priority, so handovers
// never cycle: the leader's priority drops only when its lease is lost (it dies,
// is cut off, paused, resigns), and each such drop allows at most one handover
// per priority level above the new leader. A target that dies less than [Fresh]
// before the handover, or pauses meanwhile, does not take the lease; it expires
// one lease after the handover and another candidate wins it, as after a
// leader's death. The rule decides only who is asked to lead; whoever leads, the
// lease and its compare-and-set keep one leader at a time.
//
// Write times are estimated as the read's send time minus the row's age by the
// database clock; only differences between them are used, under the clock-rate
// assumption that the election makes anyway.
//
// A Preference is not safe for concurrent use: one goroutine owns it.
type Preference struct {
	id       string
	priority int64
	lease    time.Duration
	period   time.Duration // of the candidates' writes and of the reads

	term  int64                // the term the tracking belongs to; 0 when not leading
	last  time.Time            // send time of the last read of that term
	since map[string]time.Time // each candidate's first write seen live, without a break
}

// Fresh is how recently, by the database clock, a candidate must have written
// its members row to count as live, for a lease of lease: a lease and a quarter.
// A live candidate writes its row every period ([Period], a lease), so its row is
// at most a period plus one write's latency old; a write slower than a quarter
// lease only delays a handover (the candidate counts as live again from its next
// write). In a balanced group, whose period is half a lease ([BalancedPeriod]),
// the same rule gives three quarters of a lease.
func Fresh(lease time.Duration) time.Duration { return fresh(Period(lease), lease) }

// fresh is the rule of [Fresh] for writes every period.
func fresh(period, lease time.Duration) time.Duration { return period + lease/4 }

// NewPreference returns the preference of candidate id of priority priority in an
// election of lease duration lease, whose candidates write every [Period].
func NewPreference(id string, priority int64, lease time.Duration) *Preference {
	return &Preference{id: id, priority: priority, lease: lease, period: Period(lease), since: map[string]time.Time{}}
}

// Seen handles a read of the election's members sent at sent, while this
// candidate leads term (0: it does not lead). It returns the ID to hand the
// lease over to now, or "" for none (see [Preference] for the rule). A read of
// another term than the last one starts the tracking again.
func (p *Preference) Seen(ms []store.Member, sent time.Time, term int64) string {
	if term == 0 {
		p.Reset()
		return ""
	}
	if term != p.term || (!p.last.IsZero() && sent.Sub(p.last) > 2*p.period) || sent.Before(p.last) {
		// Another term, or reads too far apart to vouch for the time between them.
		p.Reset()
		p.term = term
	}
	p.last = sent
	live := make(map[string]store.Member, len(ms))
	for _, m := range ms {
		if Live(m, p.id, fresh(p.period, p.lease)) {
			live[m.ID] = m
		}
	}
	for id := range p.since {
		if _, ok := live[id]; !ok {
			delete(p.since, id)
		}
	}
	var best *store.Member
	for id, m := range live {
		written := sent.Add(-m.Age)
		first, ok := p.since[id]
		if !ok {
			p.since[id] = written
			continue
		}
		if m.Priority <= p.priority || written.Sub(first) < p.lease {
			continue
		}
		if best == nil || better(m, *best) {
			best = &m
		}
	}
	if best == nil {
		return ""
	}
	// Decided once: should the handover not happen, it is decided again at the
	// earliest a lease later.
	for id, m := range live {
		p.since[id] = sent.Add(-m.Age)
	}
	return best.ID
}

// Live reports whether m, a member read from the members table, is a live
// candidate other than self: its row was written less than within ago by the
// database clock ([Fresh] for the candidates' period), and it neither pauses nor
// observes. Only a live candidate is ever named as a handover's target.
func Live(m store.Member, self string, within time.Duration) bool {
	return m.ID != self && !m.Paused && m.Role != RoleObserver && m.Age < within
}

// better reports whether a is a better target than b: a higher priority, then
// the lower ID, so that every reader picks the same one.
func better(a, b store.Member) bool {
	return a.Priority > b.Priority || (a.Priority == b.Priority && cmp.Less(a.ID, b.ID))
}

// Successor returns the candidate that a leader of one key, self, hands its lease
// to when its term ends gracefully (a resign, a stop, the end of Run) instead of
// releasing it: the best (highest priority, then lowest ID) of the members ms of
// that key that are [Live] within within, read in one read; "" when none is, and the lease is
// released. Unlike [Preference], it asks no lease of liveness: the term ends
// anyway, and a target that died since the read costs one lease of availability,
// as a release to nobody would cost the wait for the next election. A member
// whose row still says it leads the key is never named: self leads it, so that
// row was written before this term (by a leader that crashed, as after a
// failover, or that has not written since it lost the key), and vouches for no
// live follower.
func Successor(ms []store.Member, self string, within time.Duration) string {
	var best *store.Member
	for i, m := range ms {
		if m.Role != RoleLeader && Live(m, self, within) && (best == nil || better(m, *best)) {
			best = &ms[i]
		}
	}
	if best == nil {
		return ""
	}
	return best.ID
}

// Reset forgets what was seen: the next read starts the tracking again.
func (p *Preference) Reset() {
	p.term, p.last = 0, time.Time{}
	clear(p.since)
}
