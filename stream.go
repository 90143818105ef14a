package casleader

import (
	"context"
	"time"
)

// Status is an elector's leadership status, as [Elector.Listen] reports it (and
// Group.Listen for each key of a group).
type Status struct {
	// Seq numbers the changes of the status: 0 before the first, then 1, 2, ...
	// in the order they happened. A listener that receives Seq 7 after Seq 4 missed
	// changes 5 and 6 (see [Elector.Listen]).
	Seq uint64
	// Leading reports that the elector leads: from the start of a term (whose
	// status names this candidate as Leader at once) until it steps down (lost lease, resign, handover, pause, exit). IsLeader turns false
	// at the trust deadline by the clock, which can be a little before the stream
	// says so: act on the leadership context or IsLeader, not on this field.
	Leading bool
	// Token is the fencing token of the term while Leading, else 0.
	Token int64
	// Leader is the ID of the leader as last observed, "" when none is known.
	Leader string
	// Time is when the change happened (with a monotonic reading); zero for Seq 0.
	Time time.Time
}

// stampStatus numbers a change of the status and stamps its time, for the
// leadership stream (internal/stream).
func stampStatus(s *Status, seq uint64, at time.Time) { s.Seq, s.Time = seq, at }

// Listen returns the elector's leadership stream: a channel that holds the
// current status at once, then each change (a term starts, the elector steps
// down, the observed leader changes), in order, until ctx ends; then it is closed.
// Like etcd's Observe and River's Listen, it is for code that follows leadership
// from a goroutine of its own: a dashboard, a log, a process that starts and stops
// work with the role.
//
// The stream never delays the elector: it keeps the latest status only. The
// channel has room for one status; when a change comes before the listener has
// taken the previous one, the previous one is replaced by the new one. So a
// listener always ends up with the current status, and the statuses it receives
// are in order, but a slow listener skips intermediate ones: [Status.Seq] says how
// many. A listener that needs every event, as it happens, uses [Hooks] (which
// must not block).
//
// Listen may be called at any time, before or during Run, any number of times.
func (e *Elector) Listen(ctx context.Context) <-chan Status {
	return e.sh.stream.Listen(ctx)
}
