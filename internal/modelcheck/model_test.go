package modelcheck

import (
	"time"

	"github.com/casleader/casleader/cas"
)

// unit is one step of every clock: the database's, and each candidate's
// monotonic clock.
const unit = time.Second

// epoch is time 0 of every clock the machines are given.
var epoch = time.Unix(1_000_000, 0).UTC()

func at(t int) time.Time { return epoch.Add(dur(t)) }

// row is the election row: every column the protocol uses.
type row struct {
	exists           bool
	version, term    int64
	leader, handover string
	inc              string // the incarnation of the process that holds the term
	stepdown         bool
	tick             int // tick_time, database time
	lease            int // units; 0: none recorded
}

// op is a statement.
type op uint8

const (
	opNone op = iota
	opRead
	opInsert
	opElect
	opRenew
	opRelease
	opHandover
	opElectReleased
)

func (o op) String() string {
	return [...]string{"-", "read", "insert", "elect", "renew", "release", "handover", "elect-released"}[o]
}

// call is a statement sent by a process: pending at the database, or executed
// with its result (a reply not delivered yet).
type call struct {
	op    op
	sent  int   // the sender's local time at the send
	from  int64 // the version written from
	to    string
	toInc string // a handover's target incarnation ("": the ID only)
	done  bool   // executed at the database
	ok    bool   // the write won (a read: the row was found)
	term  int64
	res   row // a read's row
	resAt int // database time of a read's execution
}

// phase is where the executor (the engine's Run loop) is.
type phase uint8

const (
	phFollow  phase = iota // reads, campaigns
	phLead                 // renews
	phSettle               // reads to settle a renewal that lost or failed
	phRelease              // writes the release or handover, retrying after a read
	phDead                 // crashed
	phStopped              // stopped with ErrDuplicateID
	phDrain                // waits for the leader's work to return (at most DrainTimeout)
)

func (p phase) String() string {
	return [...]string{"follow", "lead", "settle", "release", "dead", "stopped", "drain"}[p]
}

// proc is one candidate process and its executor.
type proc struct {
	slot, gen uint8
	id, inc   string
	lease     int // units
	renew     time.Duration
	m         cas.Machine
	ph        phase
	cur       call    // the statement the executor waits for
	orphans   [2]call // statements given up on, still pending at the database
	drift     int     // local clock = database time + drift
	nextRead  int     // local time of the next read (the detector's wait)
	lastRenew int     // local time of the last renewal sent
	ambiguous bool    // a renewal failed since the last one that won (the renewer's flag)
	resumed   int64   // term passed to Resume
	resigned  int64   // the last term this process resigned (Resign or Yield)
	lapsed    bool    // its trust lapsed since the executor started leading the current term
	work      int64   // the term whose leader's work (OnStartedLeading) still runs; 0: none
	// relPending: a release or handover is written after the drain
	relPending bool
	paused     bool // Pause was called, and Resume not since
	// electsReleased: its store has ElectReleased (Machine.ElectsReleased)
	electsReleased bool
	// named: a handover can name its process (Machine.Named)
	named bool
	// the release loop
	relToken, relVersion int64
	relTo                string
	relInc               string // the target's incarnation the handover names ("": none)
	relAttempt           uint8
	relRead              bool // the next statement of the loop is a read
}

func (p *proc) key() uint8 { return p.slot<<4 | p.gen }

// state is one state of the system.
type state struct {
	now   int // database time (real time)
	row   row
	procs [3]proc
	n     int
	// budgets used
	faults, crashes, outside, stepBack, requests, drifts uint8
	relVer                                               int64 // the last version a release left (wake-ups carry it)
	// invariant bookkeeping
	lastTok  int64
	lastProc uint8
	wonBy    [maxTerm]uint8 // term -> process key + 1
	overflow bool
	// takesLiveLeases, revert: see scenario
	takesLiveLeases bool
	revert          rule
	drain           bool // see scenario
	// releasedRunning is a term released or handed over while its work still
	// ran, besideRunning a term led beside the work of an earlier term of the
	// same process; 0: none
	releasedRunning, besideRunning int64
	// pausedActs is the slot + 1 of a paused process that campaigned or
	// adopted a lease; 0: none
	pausedActs uint8
	pauses     uint8 // budget used
}

// rule is a set of the executor's rules reverted on purpose (the checker's
// tests: each must be caught).
type rule uint8

const (
	// revNoDrain: the release or handover is written at once, without waiting
	// for the leader's work to return.
	revNoDrain rule = 1 << iota
	// revReleaseUndrained: a release or handover is written after the drain
	// timed out, while the work still runs.
	revReleaseUndrained
	// revLeadBeside: a candidate whose earlier work still runs takes part in
	// elections.
	revLeadBeside
	// revPausedCampaigns: a paused candidate takes part as if it were not.
	revPausedCampaigns
	// revElectReleasedAnyRow: the model's ElectReleased statement wins a row
	// that is not released (the store's condition reverted).
	revElectReleasedAnyRow
	// revElectionsLose: the model's elections and inserts never win (the
	// liveness check's self-test).
	revElectionsLose
)

const maxTerm = 48

// scenario is one configuration of candidates and budgets.
type scenario struct {
	name     string
	procs    []proc // slot, id, inc, lease, renew filled in
	horizon  int    // last database time explored
	faults   uint8  // lost requests and replies
	crashes  uint8  // crashes (each may restart, with and without Resume)
	outside  uint8  // outside version bumps
	stepBack uint8  // tick_time steps back by one unit
	requests uint8  // step-down requests (to "" or to a candidate)
	drift    int    // how far each local clock may fall behind the database's (a slow clock; at most L - R)
	handover bool   // leaders may hand over to a named candidate
	resign   bool   // leaders may resign
	wake     bool   // released-version wake-ups
	oneClock bool   // reads report OneClock (a single-primary database)
	late     bool   // a reply may arrive one step after its statement executed
	depth    int    // BFS depth bound (0: none)
	// released starts with the row released at version 1 (else missing)
	released bool
	// leader starts with the first candidate leading (it read the released row
	// and won an election)
	leader bool
	// takesLiveLeases breaks the model's database on purpose (the checker's
	// self-test): reads report every lease as expired, and an election wins
	// from the version read whatever the lease
	takesLiveLeases bool
	// target names the candidate a handover goes to (default: the other ID)
	target string
	// named lets a handover name its target's incarnation too (the leader's
	// members reads showed it): the current one, or, after the target restarted,
	// a stale one
	named bool
	// drain models the leader's work: it returns (or not) any time after its
	// term ended, and the executor waits for it, or for DrainTimeout, before it
	// releases; else the work returns at once.
	drain bool
	// electsReleased: the stores have ElectReleased, and wake-ups that carry
	// no version (a MySQL named lock granted, a listener reconnected) come at
	// any time, stale or spurious ones included
	electsReleased bool
	// pauses is how many times a candidate may be paused (each resumes any time)
	pauses uint8
	// live checks liveness from every state reached (see liveness_test.go)
	live bool
	// revert reverts rules of the executor on purpose (see rule)
	revert rule
}

// heartbeat is the time between two renewals' sends, poll the longest time
// between two reads of a follower (units).
const (
	heartbeat = 1
	poll      = 2
	// lag is the longest round trip of a statement before its reply arrives or
	// it fails; an abandoned statement executes within orphanLag of its send,
	// or never.
	lag       = 2
	orphanLag = 3
)

func (s *state) local(p *proc) int { return s.now + p.drift }

func initial(sc *scenario) state {
	var s state
	s.n = len(sc.procs)
	s.takesLiveLeases, s.revert, s.drain = sc.takesLiveLeases, sc.revert, sc.drain
	if sc.released {
		s.row = row{exists: true, version: 1}
	}
	for i, p := range sc.procs {
		p.slot = uint8(i)
		p.id, p.inc = intern(p.id), intern(p.inc)
		p.lastRenew = -100
		p.electsReleased = sc.electsReleased
		p.named = sc.named
		p.m = newMachine(&p)
		s.procs[i] = p
	}
	if sc.leader {
		s.row = row{exists: true, version: 1}
		for _, k := range []kind{evSend, evExec, evExec, evDeliver} {
			s.apply(sc, event{k: k, arg: -1})
		}
	}
	return s
}
