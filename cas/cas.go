// Package cas is the election's role state machine: pure logic, no I/O, no goroutines,
// no clock of its own.
//
// A [Machine] is fed events: a row observed, a row created, an election won or lost,
// a renewal won, a write lost or with an ambiguous result and the row read to settle
// it, the trust deadline passed. Each event returns a [Decision] that tells the caller
// what to do next. The callers own the I/O and decide no protocol question of their
// own: the root package's Elector runs one machine, its Group one per key
// and batches the statements that their decisions ask for. Both publish leadership
// through a Trust (internal/term). Times are passed in by the caller and must carry Go's monotonic
// clock reading (time.Now()); the machine only compares them with each other.
//
// The trust-window math lives here: a leader trusts its leadership until the send
// time of its last successful write plus the renew deadline, never from the reply's
// arrival. A row read that shows the caller's own lease gives trust until the read's
// send time plus the renew deadline minus the lease's age by the database clock,
// which is never later than the write that set it plus the renew deadline.
//
// cas does no I/O: the role sequencing is decided here and the calls to the
// heartbeat and detector packages are made by the root package, so that every
// transition is a table test.
//
//	  observe ──────────────┐
//	    │ lease live        │ lease expired / released / row missing
//	    ▼                   ▼
//	Follower ◀──lost──── Candidate
//	    ▲                   │ won (the write returns the term)
//	    │ deadline passed,  ▼
//	    │ row not ours,   Leader ──renew won──▶ Leader (deadline = send + R)
//	    └─ resign ───────── │
//	                        └─ renew lost/ambiguous ─▶ settle by one read
package cas

import (
	"errors"
	"fmt"
	"time"

	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
)

// role is a candidate's role in one election.
type role uint8

// The roles.
const (
	follower  role = iota // watches the row
	candidate             // has sent an election write whose outcome is not known yet
	leader                // holds the lease and trusts it until Deadline
)

func (r role) String() string {
	switch r {
	case follower:
		return "follower"
	case candidate:
		return "candidate"
	case leader:
		return "leader"
	}
	return "unknown"
}

// Action is what the caller must do next.
type Action uint8

// The actions.
const (
	// Wait: observe the row again after Decision.Wait (or when woken).
	Wait Action = iota + 1
	// Create: insert the missing row with this candidate as first leader.
	Create
	// Campaign: send an election write from Decision.Version.
	Campaign
	// Lead: act as leader and renew from Decision.Version until the deadline.
	Lead
	// StepDown: stop acting as leader now; the lease is lost.
	StepDown
	// Release: stop acting, then release the lease from Decision.Version (a step-down
	// was requested through the row).
	Release
	// Handover: stop acting, then hand the lease from Decision.Version to Decision.To.
	Handover
	// Refuse: another process acts with this candidate's ID (Decision.Err names the
	// key, the ID and the term). Stop acting at once if leading, write nothing (the
	// lease is the other process's too: a release would end its term), and stop
	// taking part in the election with Decision.Err.
	Refuse
	// CampaignReleased: send an election write that wins only a released lease,
	// or one handed over to this candidate, whatever the row's version (the
	// store's ElectReleased). Asked for only by
	// [Machine.Woken], and only of a machine told that its store has that write
	// ([Machine.ElectsReleased]). Its reply is handled by [Machine.Elected].
	CampaignReleased
	// Confirm: renew the lease from Decision.Version before leading it (a term
	// resumed after a restart, see [Machine.Resume]). Its reply is handled by
	// [Machine.Confirmed].
	Confirm
)

func (a Action) String() string {
	return [...]string{"invalid", "wait", "create", "campaign", "lead", "step-down", "release", "handover", "refuse", "campaign-released", "confirm"}[min(int(a), 10)]
}

// Errors carried by [Decision.Err].
var (
	// ErrDuplicateID: the row names this candidate's ID in a term that it did not
	// win, and that lease is being renewed; or the term it leads is renewed by
	// somebody else. Another live process runs with the same ID (or the row was
	// edited). The machine never acts on such a term.
	ErrDuplicateID = errors.New("casleader: another process runs with this candidate's ID")
	// errOutsideWrite: the version of the term this candidate leads moved without a
	// write of its own: something that is not a candidate (a script, an operator)
	// wrote the row. The leader steps down and campaigns again.
	errOutsideWrite = errors.New("casleader: the election row was written by something other than its leader")
	// errNoNewTerm: the store reported an election or creation won without a term
	// above the version it was sent from. The machine does not lead on it; the next
	// read settles the write (an own lease is adopted with the row's term).
	errNoNewTerm = errors.New("casleader: the store reported a key won without a new term")
)

// Participation says how a candidate takes part in the election right now.
type Participation uint8

// The kinds of participation.
const (
	// Campaigning: takes a missing, released or expired lease.
	Campaigning Participation = iota
	// CoolingDown: after a resign; takes only a live lease handed to it by name.
	CoolingDown
	// Abstaining: paused; never takes a lease.
	Abstaining
	// Observing: an observer; never takes a lease, and a lease under its ID is
	// another process's business (an observer may share the ID of a candidate).
	Observing
)

// Decision is the machine's answer to an event.
type Decision struct {
	Action  Action
	Version int64         // the row version to write from (Campaign, Confirm, Lead, Release, Handover)
	Wait    time.Duration // how long to wait before the next observation (Wait)
	To      string        // the handover target (Handover)
	// Err, with Refuse, is the error to stop with (it matches [ErrDuplicateID]);
	// with StepDown, what ended the term, to report at Warn level (the row was
	// written by something other than its leader); with Wait, a fault to report at
	// Error level, from which the machine has recovered (the store reported a win
	// without a new term). nil otherwise.
	Err error
}

// Machine is one candidate's role state in one election. It is not safe for
// concurrent use: one goroutine owns it.
type Machine struct {
	id    string
	inc   string        // this process's incarnation (store.Candidate.Incarnation)
	lease time.Duration // this candidate's own lease duration
	renew time.Duration
	// termLease is the lease the row records for the term led (this candidate's
	// own for a term it won), by which the followers judge it: see window.
	termLease time.Duration
	// leaseReported is the lease of another leader last given to LeaseSighting's
	// caller.
	leaseReported time.Duration

	role     role
	version  int64     // last version seen or written
	term     int64     // fencing token while leading
	highest  int64     // highest term seen in a row or won
	leader   string    // leader as last observed ("" when released or unknown)
	deadline time.Time // trust deadline while leading (monotonic)
	cooldown time.Time // end of a cool-down (see CoolDown)

	// Adoption of a row that names this candidate (see Observed).
	resumed     int64 // a term passed to Resume
	confirming  int64 // the resumed term whose renewal (Confirm) awaits its reply
	unsettled   bool  // an election or creation of ours awaits the next read
	foreign     int64 // term of the last row read that names us in a term not ours
	foreignSeen int64 // the highest version at which that live foreign term was read
	// foreignReported is the foreign term last given to ForeignSighting's caller.
	foreignReported int64
	from            int64 // the version the pending election was sent from (0: creation)
	resigned        int64 // the last term this candidate resigned: never led again
	// ambiguous: a renewal of the current term failed with an unknown outcome
	// since the last renewal known to have committed, so a write of ours may
	// commit unseen. Cleared only by a renewal that won: a write sent before it
	// can no longer commit.
	ambiguous bool

	skew skew // clock skew between database servers, and the expiry judgement (skew.go)

	electsReleased bool // the store can elect a released row without its version (ElectsReleased)
	named          bool // a handover can name this process (Named)
}

// New returns a follower for candidate c (its ID, the incarnation of its process,
// and its lease duration) with renew deadline renew (renew < c.Lease; the caller
// validates).
func New(c store.Candidate, renew time.Duration) *Machine {
	return &Machine{id: c.ID, inc: c.Incarnation, lease: c.Lease, renew: renew, termLease: c.Lease, skew: newSkew(c.Lease)}
}

// window returns how long after a write (or a read's send time, less the age read)
// the leader of a term whose row records lease l trusts it: the renew deadline,
// shortened by as much as l falls short of this candidate's own lease, so that
// the margin L - R holds for the lease the followers judge by.
func (m *Machine) window(l time.Duration) time.Duration {
	if l <= 0 || l >= m.lease {
		return m.renew
	}
	return max(m.renew-(m.lease-l), 0)
}

// Skew returns the clock skew between database servers observed by this
// candidate's reads within the last [timing.SkewWindow] at now: positive when the server it
// reads runs ahead of the one that wrote the row, negative when it runs behind, 0
// when none was seen. It is a lower bound, reported for operators; the expiry
// judgement does not depend on it (see skew.go).
func (m *Machine) Skew(now time.Time) time.Duration { return m.skew.measured(now) }

// Leading reports whether the candidate leads: it won or adopted a term and has
// not stepped down (its trust may have lapsed: see [Machine.Trusted]).
func (m *Machine) Leading() bool { return m.role == leader }

// Following reports whether the candidate neither leads nor awaits the outcome of
// an election write of its own.
func (m *Machine) Following() bool { return m.role == follower }

// Version returns the last row version seen or written.
func (m *Machine) Version() int64 { return m.version }

// Term returns the fencing token of the current term while leading, else 0.
func (m *Machine) Term() int64 {
	if m.role != leader {
		return 0
	}
	return m.term
}

// Leader returns the leader as last observed, "" when released or unknown.
func (m *Machine) Leader() string { return m.leader }

// Deadline returns the trust deadline while leading, else the zero time.
func (m *Machine) Deadline() time.Time {
	if m.role != leader {
		return time.Time{}
	}
	return m.deadline
}

// Trusted reports whether the candidate leads and may act at time now.
func (m *Machine) Trusted(now time.Time) bool {
	return m.role == leader && now.Before(m.deadline)
}

// Observed handles a row read sent at sent, by a candidate taking part as p.
//
// A live lease that names this candidate is adopted only in a term this process
// holds: one whose row records this process's incarnation (an election or creation
// of ours whose reply was lost and that this read settles, or a renewal that
// committed after the trust deadline); one passed to [Machine.Resume] is led once
// a renewal confirms it (Confirm). A lease
// handed over to this candidate's ID and not claimed yet ([store.Record.Handed]) is
// claimed with an election write (Campaign), which one process only can win: two
// processes that share an ID never both lead the handed term. Any other term naming
// this candidate (another process with the same ID, a row edited by hand, a
// restarted process's old lease) is handled like anybody's lease and reported by
// [Machine.Foreign].
//
// A foreign term that is read again at a higher version, still live and with no
// step-down request, is being renewed: another live process runs with this ID.
// Observed then returns Refuse with an error matching [ErrDuplicateID] (never to an
// observer, p == Observing, which may share a candidate's ID). A process restarted
// with a stable ID sees its earlier run's lease only once at one version: that
// lease is never renewed again, and expires.
func (m *Machine) Observed(rec store.Record, found bool, sent time.Time, p Participation) Decision {
	return m.ObservedReply(rec, found, sent, sent, p)
}

// ObservedReply is [Machine.Observed] for a read whose reply arrived at received
// (by the same monotonic clock as sent): the clock skew it shows ([Machine.Skew])
// is bounded by the whole read, so a read that reached the database late (the
// process starved, a pool without a free connection) is not taken for a server
// whose clock runs ahead. Observed takes the read for instantaneous (received =
// sent): executors, which know when the reply came, call ObservedReply.
func (m *Machine) ObservedReply(rec store.Record, found bool, sent, received time.Time, p Participation) Decision {
	if m.role == leader {
		return m.Settled(rec, found, sent)
	}
	m.role = follower
	foreign, foreignSeen := m.foreign, m.foreignSeen
	m.unsettled, m.foreign, m.foreignSeen = false, 0, 0
	if !found {
		m.leader = ""
		if p == Campaigning {
			m.role = candidate
			m.from = 0
			return Decision{Action: Create}
		}
		return Decision{Action: Wait, Wait: m.lease}
	}
	m.leader = rec.LeaderID
	m.version = rec.Version
	if !rec.Released() {
		m.skew.observe(rec, sent, received)
	}
	rolledBack := rec.Term < m.highest
	m.highest = max(m.highest, rec.Term)
	if rec.LeaderID == m.id && !rec.Released() {
		if d, ok := m.observedOwnID(rec, sent, p, rolledBack, foreign, foreignSeen); ok {
			return d
		}
	}
	left := m.remaining(rec, sent)
	if left == 0 {
		if p == Campaigning {
			m.role = candidate
			m.from = rec.Version
			return Decision{Action: Campaign, Version: rec.Version}
		}
		return Decision{Action: Wait, Wait: m.lease}
	}
	return Decision{Action: Wait, Wait: left}
}

// observedOwnID handles a read of an unreleased row that names this candidate's
// ID (see Observed); ok is false when the row is to be handled like anybody's.
func (m *Machine) observedOwnID(rec store.Record, sent time.Time, p Participation, rolledBack bool, foreign, foreignSeen int64) (Decision, bool) {
	// A term of ours that we resigned is ours, but over: its release may still be
	// pending (a drain, a retry) or may have failed. Leading it again would start
	// the leader's work a second time in the same term; it is released or expires.
	ended := rec.Term == m.resigned
	if rec.Handed() && !ended && p < Abstaining {
		// Claimed with an election from the version read: it starts a new term.
		m.role = candidate
		m.from = rec.Version
		return Decision{Action: Campaign, Version: rec.Version}, true
	}
	owned := (m.inc != "" && rec.Incarnation == m.inc) || (m.resumed != 0 && rec.Term == m.resumed)
	if !owned && !ended {
		m.foreign = rec.Term
		if p != Observing && !rec.Expired(m.lease) {
			if rec.Term == foreign && rec.Version > foreignSeen && !rec.StepDown {
				return Decision{Action: Refuse, Err: fmt.Errorf("%w: the row of key %q names ID %q in term %d, which this process never won, and that lease is being renewed (version %d, then %d): another process runs with the same ID, or the row was edited; give every candidate a unique ID (Config.ID)",
					ErrDuplicateID, rec.Key, m.id, rec.Term, foreignSeen, rec.Version)}, true
			}
			m.foreignSeen = rec.Version
			if rec.Term == foreign {
				m.foreignSeen = max(foreignSeen, rec.Version)
			}
		}
	}
	// Our own live lease: adopted only while the read still leaves trust time,
	// and never from a row whose term is below one seen before: that row was
	// rolled back (a failover lost writes), and a term revived from it would
	// fence below a later term. A lease of ours with a step-down request pending
	// is not led again: its term is ending (our release may have failed). It is
	// released by the retry, or expires.
	l := rec.LeaseOr(m.lease)
	if owned && !ended && p < Abstaining && rec.Age < m.window(l) && !rolledBack && !rec.StepDown {
		m.termLease = l
		if m.inc == "" || rec.Incarnation != m.inc {
			// Resumed: a statement of the earlier run (its release, its
			// handover) may still be on its way to the database. A renewal
			// from the version read confirms that none has executed since,
			// and that none can: it fails from then on.
			m.role, m.from, m.confirming = candidate, rec.Version, rec.Term
			return Decision{Action: Confirm, Version: rec.Version}, true
		}
		m.lead(rec.Version, rec.Term, sent.Add(m.window(l)-rec.Age))
		return Decision{Action: Lead, Version: m.version}, true
	}
	return Decision{}, false
}

// ElectsReleased tells the machine whether its caller's store can elect a released
// row without naming its version (the store's ElectReleased), so that
// [Machine.Woken] may ask for that write (CampaignReleased) after a wake-up that
// carries no version.
func (m *Machine) ElectsReleased(ok bool) { m.electsReleased = ok }

// Named tells the machine whether a handover can name this candidate's process:
// its members rows, which leaders read, record its incarnation (they were written
// lately). [Machine.Woken] then answers a handover's wake-up with a read.
func (m *Machine) Named(ok bool) { m.named = ok }

// Woken handles a wake-up that announces the lease as released at row version
// version (0: a wake-up that carries no version, such as a reconnected listener;
// negative: a lease handed over to a named candidate, or perhaps handed over, as a
// MySQL named lock granted says; see below), for a candidate taking part as p. A
// follower that campaigns, has no election of its own to settle, and has not seen
// the row at that version or later campaigns from it at once, without reading the
// row first (Campaign): the election statement itself requires the row to be at that
// version and its lease released or expired by the database clock, so a wake-up that
// is stale, forged or overtaken by another write costs a lost compare-and-set, never
// safety (docs/SAFETY.md).
//
// A wake-up with no version leads the same follower, when its store can
// ([Machine.ElectsReleased]), to an election that wins only a released lease or
// one handed over to this candidate (CampaignReleased): the statement itself
// requires the row to be so, so a wake-up that announced something else (a
// handover to another, a leader's connection lost, a spurious one) costs a write
// that changes nothing, followed by the read it would have made anyway. The new
// term must be above the last version this candidate saw.
//
// A handover wakes its target, or every follower when the target is not known
// (version -1, notify.HandedOver; a MySQL named lock, which cannot tell a release
// from a handover, wakes every follower so). A candidate whose process a handover can name
// ([Machine.Named]) reads at once: a handover that names the target's incarnation
// hands the term to that process, which leads it from that read without a write
// (see Observed), and one that names only its ID is claimed from the read with an
// election. Any other is sent, as by a wake-up with no version, into the election
// that claims a lease handed to its ID in one round trip (CampaignReleased).
// Either claim is a new term that only one process with that ID can win. A
// follower told that the lease went to another candidate (version -2,
// notify.HandedToAnother) reads after [timing.HandoverReadDelay] instead: it
// learns the new leader as soon, to within a few milliseconds, and its read does
// not compete with the target's for the database's and the host's processors.
//
// Anything else asks for a read (Wait with no wait): a leader, a candidate cooling
// down, paused or observing, an unsettled election of ours (the read may show it
// won), a version already seen, a wake-up with no version when the store has no such
// election, and election writes that keep failing or losing (failures: more than one
// in a row), whose next write waits for its backoff and a read.
func (m *Machine) Woken(version int64, p Participation, failures int) Decision {
	if version == handedToAnother && m.role == follower {
		return Decision{Action: Wait, Wait: timing.HandoverReadDelay}
	}
	if m.role != follower || p != Campaigning || m.unsettled || failures > 1 || version < handedOver {
		return Decision{Action: Wait}
	}
	if m.electsReleased && (version == 0 || version == handedOver && !m.named) {
		m.role = candidate
		m.from = m.version
		return Decision{Action: CampaignReleased, Version: m.version}
	}
	if version <= m.version {
		return Decision{Action: Wait}
	}
	m.role = candidate
	m.version, m.from = version, version
	return Decision{Action: Campaign, Version: version}
}

// The negative versions of wake-ups (package internal/notify's HandedOver and
// HandedToAnother; cas does not depend on it, a test checks they agree).
const (
	handedOver      int64 = -1
	handedToAnother int64 = -2
)

// remaining returns how long the lease of rec, read at sent, may still be live, 0
// when it is released or has certainly expired, judged by the lease the row
// records (this candidate's own when it records none). On a single-primary
// database (rec.OneClock) the age read is exact and the lease has run for that
// age; elsewhere for its age minus the freshest age read of its term (skew.go).
// Either way the lease is live until at least L after the send time of the last
// read before a renewal that this follower saw (skew.go): a clock step back of the
// database, or a tick_time edited by hand, never makes it take over early.
func (m *Machine) remaining(rec store.Record, sent time.Time) time.Duration {
	if rec.Released() {
		return 0
	}
	l := rec.LeaseOr(m.lease)
	elapsed := rec.Age
	if !rec.OneClock {
		elapsed = m.skew.elapsed(rec, sent)
	}
	left := l - elapsed
	if after, ok := m.skew.renewedAfter(rec); ok {
		left = max(left, after.Add(l).Sub(sent))
	}
	return max(left, 0)
}

// LeaseSighting returns the lease duration that rec, the row just observed, records
// for a live lease of another candidate when it differs from this candidate's own
// and was not returned for an earlier row; else 0. Executors log it once (see
// [timing.LeaseMessage]): the lease is judged by the row's value, and the leader's trust
// by its own setting, so mixed settings are safe, but rarely meant.
func (m *Machine) LeaseSighting(rec store.Record) time.Duration {
	if rec.Lease <= 0 || rec.Lease == m.lease || rec.Lease == m.leaseReported || rec.Released() || rec.LeaderID == m.id {
		return 0
	}
	m.leaseReported = rec.Lease
	return rec.Lease
}

// Created handles the reply to a Create sent at sent: the row was inserted in term
// term (also its version), or inserted is false.
func (m *Machine) Created(term int64, inserted bool, sent time.Time) Decision {
	return m.won(term, inserted, sent)
}

// Elected handles the reply to a Campaign sent at sent: the election won term term
// (also the row's new version), or won is false.
func (m *Machine) Elected(term int64, won bool, sent time.Time) Decision {
	return m.won(term, won, sent)
}

// A write reported won is led only in a term above the version it was sent from
// (a missing row: above 0), since the term is also the row's new version: a store
// that reports no such term is not trusted with a lease. The write is then settled
// by the next read like one whose reply was lost, and the Wait decision carries an
// error (the store reported a win without a new term) for the caller to report.
func (m *Machine) won(term int64, won bool, sent time.Time) Decision {
	if !won {
		m.role = follower
		return Decision{Action: Wait}
	}
	if term <= m.from {
		from := m.from
		m.Unsettled()
		return Decision{Action: Wait, Err: fmt.Errorf("%w: term %d is not above version %d that the write was sent from; not leading until the row is read: the Store must report the new term (store.Won.Term)",
			errNoNewTerm, term, from)}
	}
	m.highest = max(m.highest, term)
	m.lead(term, term, sent.Add(m.renew))
	m.termLease = m.lease
	return Decision{Action: Lead, Version: m.version}
}

// Confirmed handles the reply to a Confirm sent at sent: the renewal won (the row
// moved to the next version), or won is false. A resumed term is led only from a
// renewal that won, trusted from its send time.
func (m *Machine) Confirmed(won bool, sent time.Time) Decision {
	term := m.confirming
	m.confirming = 0
	if !won || term == 0 {
		m.role = follower
		return Decision{Action: Wait}
	}
	m.lead(m.from+1, term, sent.Add(m.window(m.termLease)))
	return Decision{Action: Lead, Version: m.version}
}

// Unsettled handles a Create, Campaign or Confirm whose outcome is unknown (timeout, reset):
// the next observation settles it (an own lease in a term above the version the
// write was sent from is adopted by Observed).
func (m *Machine) Unsettled() Decision {
	m.role = follower
	m.unsettled = true
	m.confirming = 0
	return Decision{Action: Wait}
}

// Resume lets Observed take up a live lease of this candidate in term: a term that
// an earlier run of this candidate, which has ended, won (a restart with a stable
// ID). The lease is led once a renewal from the version read has won (Confirm),
// so that a release or handover the earlier run sent before it ended can no
// longer execute. Passing the term of a process that may still run makes two
// leaders.
func (m *Machine) Resume(term int64) { m.resumed = term }

// Foreign returns the term of the row last observed when it names this candidate
// in a term that this candidate does not own (see Observed), else 0. Such a lease is
// never adopted; if it is renewed, another process runs with the same ID.
func (m *Machine) Foreign() int64 { return m.foreign }

// ForeignSighting returns the foreign term (see Foreign) that rec, the row just
// observed, shows for the first time while its lease is live, so that the executor
// reports each such term once; else 0.
func (m *Machine) ForeignSighting(rec store.Record) int64 {
	term := m.foreign
	if term == m.foreignReported {
		return 0
	}
	m.foreignReported = term
	if term == 0 || rec.Expired(m.lease) {
		return 0
	}
	return term
}

// Renewed handles a successful renewal: the row is now at version, and the write was
// sent at sent. It returns the new trust deadline.
func (m *Machine) Renewed(version int64, sent time.Time) time.Time {
	if m.role != leader {
		return time.Time{}
	}
	m.version = version
	m.ambiguous = false
	if d := sent.Add(m.window(m.termLease)); d.After(m.deadline) {
		m.deadline = d
	}
	return m.deadline
}

// RenewalFailed handles a renewal that lost its compare-and-set (ambiguous false),
// or whose result is unknown (ambiguous true: a timeout, a reset; the write may
// have committed): the old deadline is kept, and the caller settles the write with
// one read ([Machine.Settled]). It does nothing when not leading.
func (m *Machine) RenewalFailed(ambiguous bool) {
	if m.role == leader {
		m.ambiguous = m.ambiguous || ambiguous
	}
}

// Settled handles the read that settles a lost or ambiguous write, sent at sent.
// If the row still names this candidate with its term, the row's version is adopted
// (the write committed, or somebody bumped the version without taking the lease, as a
// step-down request does) and the deadline may move to sent + R - age. Otherwise
// leadership is lost (StepDown), and:
//   - a live term above the one it leads, won under this candidate's ID by another
//     process (another incarnation), is refused (Refuse, with an error matching
//     [ErrDuplicateID]; the lease is not released: it is the other process's);
//   - this candidate's term at a version above the one it holds, with no step-down
//     request, while no renewal of its own can have committed unseen (every renewal
//     failed since the last one that won lost its compare-and-set), was written by
//     something that is not a candidate (no other process leads a term it did not
//     start): StepDown carries an error that says so, to report, and
//     the candidate campaigns again.
func (m *Machine) Settled(rec store.Record, found bool, sent time.Time) Decision {
	if m.role != leader {
		return m.Observed(rec, found, sent, Abstaining)
	}
	if found && rec.LeaderID == m.id && !rec.StepDown && !rec.Released() {
		term, version := m.term, m.version
		switch {
		case rec.Term > term && !rec.Expired(m.lease) && rec.Incarnation != "" && rec.Incarnation != m.inc:
			m.stepDownTo(rec)
			return Decision{Action: Refuse, Err: fmt.Errorf("%w: the row of key %q names ID %q in term %d, which another process (incarnation %s) won while this one leads term %d; give every candidate a unique ID (Config.ID)",
				ErrDuplicateID, rec.Key, m.id, rec.Term, rec.Incarnation, term)}
		case rec.Term == term && rec.Version > version && !m.ambiguous:
			m.stepDownTo(rec)
			m.resigned = term // never led again: it expires, and an election follows
			return Decision{Action: StepDown, Err: fmt.Errorf("%w: the row of key %q moved from version %d to %d in term %d without a write of this leader: stepping down and campaigning again; find what writes the election table",
				errOutsideWrite, rec.Key, version, rec.Version, term)}
		}
	}
	if !found || rec.LeaderID != m.id || rec.Term != m.term {
		m.stepDown()
		if found {
			m.stepDownTo(rec)
			m.leader = rec.LeaderID
		}
		return Decision{Action: StepDown}
	}
	m.version = rec.Version
	if d := sent.Add(m.window(m.termLease) - rec.Age); d.After(m.deadline) {
		m.deadline = d
	}
	if rec.StepDown {
		if rec.HandoverTo != "" && rec.HandoverTo != m.id {
			return Decision{Action: Handover, Version: m.version, To: rec.HandoverTo}
		}
		if rec.HandoverTo == "" {
			return Decision{Action: Release, Version: m.version}
		}
	}
	return Decision{Action: Lead, Version: m.version}
}

// stepDownTo stops leading and takes in the version and term of rec, the row that
// shows why.
func (m *Machine) stepDownTo(rec store.Record) {
	m.stepDown()
	m.version = rec.Version
	m.highest = max(m.highest, rec.Term)
}

// DeadlinePassed handles the trust deadline passing (or checks whether it has, at now).
func (m *Machine) DeadlinePassed(now time.Time) Decision {
	if m.role == leader && !now.Before(m.deadline) {
		m.stepDown()
		return Decision{Action: StepDown}
	}
	if m.role == leader {
		return Decision{Action: Lead, Version: m.version}
	}
	return Decision{Action: Wait}
}

// Resign stops leading at once (before the release write is sent) and returns the
// version to release from, or ok == false when not leading. The resigned term is
// never led again, even while the row still shows it.
func (m *Machine) Resign() (version int64, ok bool) {
	if m.role != leader {
		return 0, false
	}
	m.resigned = m.term
	m.stepDown()
	return m.version, true
}

// Released records the outcome of a release or handover write sent after Resign: on
// success the row moved to version (version+1 for a release, the new term for a
// handover).
func (m *Machine) Released(version int64, ok bool, to string) {
	if ok {
		m.version = version
		m.leader = to
		if to != "" {
			m.highest = max(m.highest, version)
		}
	}
}

func (m *Machine) lead(version, term int64, deadline time.Time) {
	m.role = leader
	m.ambiguous = false
	m.version = version
	m.term = term
	m.leader = m.id
	m.deadline = deadline
}

func (m *Machine) stepDown() {
	m.role = follower
	m.term = 0
	m.deadline = time.Time{}
	if m.leader == m.id {
		m.leader = ""
	}
}

// RenewReply handles the reply to a renewal that won, moving the row to version; the
// renewal was sent at sent and its reply is handled at now. This is the late-reply
// rule: a reply handled at or after the trust deadline never revives the term, since
// IsLeader has said false already; the term ends (StepDown) although the row is
// still ours, and the lease is left to expire. Otherwise the deadline moves to
// sent + R (never back) and the leader goes on from version.
func (m *Machine) RenewReply(version int64, sent, now time.Time) Decision {
	if m.role != leader {
		return Decision{Action: Wait}
	}
	if !now.Before(m.deadline) {
		m.version = version
		m.ambiguous = false
		m.stepDown()
		return Decision{Action: StepDown}
	}
	m.Renewed(version, sent)
	return Decision{Action: Lead, Version: m.version}
}

// SettledAt is [Machine.Settled] for a read handled at now, with the late-reply
// rule: a leader whose trust deadline has passed by now ends its term (StepDown)
// whatever the row shows.
func (m *Machine) SettledAt(rec store.Record, found bool, sent, now time.Time) Decision {
	if m.role == leader && !now.Before(m.deadline) {
		m.stepDown()
		if found {
			m.version = rec.Version
			m.highest = max(m.highest, rec.Term)
		}
		return Decision{Action: StepDown}
	}
	return m.Settled(rec, found, sent)
}

// Tick handles the passage of time at now for a candidate taking part as p: a
// leader whose trust deadline has passed steps down (StepDown); a leader that no
// longer campaigns (paused, observer) gives its lease up (Release from the version
// held, after [Machine.Resign]); any other leader goes on (Lead), anybody else waits.
func (m *Machine) Tick(now time.Time, p Participation) Decision {
	d := m.DeadlinePassed(now)
	if d.Action == Lead && p >= Abstaining {
		return Decision{Action: Release, Version: m.version}
	}
	return d
}

// CoolDown keeps the candidate out of elections until until: meanwhile it takes
// only a live lease handed to it by name. A later cool-down never shortens an
// earlier one.
func (m *Machine) CoolDown(until time.Time) {
	if until.After(m.cooldown) {
		m.cooldown = until
	}
}

// Participation returns how the candidate takes part at now: Observing for an
// observer, Abstaining when paused, CoolingDown before the end of a cool-down,
// else Campaigning.
func (m *Machine) Participation(now time.Time, paused, observer bool) Participation {
	switch {
	case observer:
		return Observing
	case paused:
		return Abstaining
	case now.Before(m.cooldown):
		return CoolingDown
	}
	return Campaigning
}

// Yield ends a term whose end was requested through the row (the Release or
// Handover decision of [Machine.Settled]) at now: it stops leading like
// [Machine.Resign], and cools down for one lease so that another candidate (the
// handover target, or anybody after a release) wins the key. It returns the version
// to write from, or ok == false when not leading.
func (m *Machine) Yield(now time.Time) (version int64, ok bool) {
	version, ok = m.Resign()
	if ok {
		m.CoolDown(now.Add(m.lease))
	}
	return version, ok
}

// RetryFrom decides whether a release or handover of term token sent from version,
// which lost its compare-and-set or failed, is sent again, after the row was read
// (rec, found). Only while the row still names this candidate in that term at
// another version (a renewal of ours that committed unseen, or a step-down request,
// moved it) and the candidate does not lead: then from the row's version. Anything
// else means the row has moved on, and the release is over.
func (m *Machine) RetryFrom(token, version int64, rec store.Record, found bool) (from int64, retry bool) {
	if m.role == leader || !found || rec.LeaderID != m.id || rec.Term != token || rec.Version == version {
		return 0, false
	}
	return rec.Version, true
}

func (p Participation) String() string {
	return [...]string{"campaigning", "cooling-down", "abstaining", "observing", "unknown"}[min(int(p), 4)]
}
