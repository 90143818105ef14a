package casleader

import (
	"time"

	"github.com/casleader/casleader/store"
)

// Call is one store call made for an election, as [Hooks.Call] reports it. A
// batched statement of a Group is reported once per key it carried, each
// with the statement's times and error and that key's outcome.
type Call struct {
	Key string // the election key
	ID  string // the candidate's ID
	// Keys is how many keys the statement carried: 1 for an Elector's calls, up to
	// BatchSize for a group's batched statements.
	Keys int
	// Op names the call, as the SQL stores name it in their errors: "observe",
	// "insert", "elect", "elect released" (an election that wins only a released
	// row), "renew", "release" or "handover".
	Op       string
	Sent     time.Time     // when it was made (with a monotonic reading)
	Duration time.Duration // how long it took
	Err      error         // the store's error, if any
	// Swapped reports that a write won its compare-and-set for Key (for insert:
	// the row was created). Always false for observe.
	Swapped bool
	// Term is the term that a won insert, election or handover started.
	Term int64
	// Record and Found are the result of an observe.
	Record store.Record
	Found  bool
	// Cancelled reports that the caller cancelled the call's context itself (to
	// resign, pause or exit): not a failure of the database. A call that reached
	// its deadline is a timeout, not a cancellation.
	Cancelled bool
}

// Event is what [Hooks] other than Call are told: which election of which
// candidate, and the facts of the event.
type Event struct {
	Key string // the election key
	ID  string // the candidate's ID
	// Token is the term: Started, Renewed and Stopped.
	Token int64
	// Until is the new trust deadline (Renewed): the send time of the write or
	// read that showed the lease live + RenewDeadline, by the monotonic clock.
	// IsLeader turns false then unless Renewed is called again.
	Until time.Time
	// Leader is the leader observed (Leader), "" when the lease was released.
	Leader string
	// Skew is the clock skew between database servers that the reads of Key show
	// now (Skew), as [Elector.ClockSkew].
	Skew time.Duration
	// LeaseDuration and RenewDeadline are the candidate's, in every event.
	LeaseDuration, RenewDeadline time.Duration
}

// Hooks observe a candidate from the inside, so that metrics, health checks and
// the user's own instrumentation need no decorator around the store and no
// particular order of set-up. The same value serves an [Elector] ([Config.Hooks])
// and a Group (its Config.Hooks), which reports every event per key: one
// Hooks value serves any number of electors, groups and keys. Packages metrics and
// healthz provide theirs. Any field may be nil.
//
// The rule, for every field: the hooks of one candidate are called synchronously,
// one at a time, in the order of the events, per key, on the goroutine that runs
// its election (Run's), which is the goroutine that renews the leases. They must
// not block: the candidate waits for them, and a slow hook delays renewals (of
// every key of a group). Hooks shared by several candidates are called
// concurrently by them. A hook must not call the candidate's methods that wait
// for its Run goroutine (Resign, ResignFor, HandoverTo, Stop); the methods that
// do no I/O (IsLeader, Token, Leader, ...) are fine. Work that may block belongs on
// [Elector.Listen]'s stream or on a goroutine of the hook's own. A panic in a hook
// is not recovered: it crashes the process.
type Hooks struct {
	// Call is called after every store call made for the election (not for the
	// guards, nor the members view).
	Call func(c Call)

	// Started is called when a term starts, with its fencing token: IsLeader has
	// turned true, and the leader's work (OnStartedLeading) is about to start.
	// Renewed follows at once with the term's first trust deadline.
	Started func(ev Event)

	// Renewed is called whenever the candidate extends its trust in the term
	// ev.Token, to ev.Until: at the term's start and after every renewal (or read
	// of its own row) that showed the lease live.
	Renewed func(ev Event)

	// Stopped is called when the term ev.Token has ended: the candidate stopped
	// acting, waited for the term's OnStartedLeading to return (at most
	// DrainTimeout) and released or handed over the lease if it was to. It is
	// called for every term Started saw. Between Started and Stopped the process
	// may act as leader of ev.Key: the lead phase.
	Stopped func(ev Event)

	// Leader is called when the observed leader of ev.Key changes, with its ID in
	// ev.Leader ("" when the lease was released).
	Leader func(ev Event)

	// Skew is called when the clock skew between database servers that the reads
	// of ev.Key show changes, with the new value in ev.Skew.
	Skew func(ev Event)
}
