package term

import (
	"sync/atomic"
	"time"
)

// Trust is the cell through which a leadership is read while the goroutine that
// owns a cas.Machine keeps it: the trust deadline and the term's fencing token, set
// together. Its readers take no lock and do no I/O; IsLeader compares the monotonic
// clock with the deadline on every call, so it turns false the instant the deadline
// passes, even in a process that resumes from a pause before any timer could fire.
// The zero value is a cell that does not lead. Only the owner calls Set and Clear.
type Trust struct {
	p atomic.Pointer[trusted] // nil when not leading
}

type trusted struct {
	deadline time.Time // carries the monotonic clock reading
	term     int64
}

// Set publishes a term and its trust deadline (a time.Now() reading or one derived
// from it). A deadline that has passed publishes a cell that does not lead.
func (t *Trust) Set(term int64, deadline time.Time) {
	t.p.Store(&trusted{deadline: deadline, term: term})
}

// Clear ends the published term: IsLeader turns false and Token 0.
func (t *Trust) Clear() { t.p.Store(nil) }

func (t *Trust) now() *trusted {
	// time.Until reads only the monotonic clock; time.Now would read the wall
	// clock too, which doubles the cost of IsLeader.
	if p := t.p.Load(); p != nil && time.Until(p.deadline) > 0 {
		return p
	}
	return nil
}

// IsLeader reports whether the published term is trusted now.
func (t *Trust) IsLeader() bool { return t.now() != nil }

// Token returns the fencing token of the published term while IsLeader, else 0.
func (t *Trust) Token() int64 {
	if p := t.now(); p != nil {
		return p.term
	}
	return 0
}

// Until returns the trust deadline of the published term and true while IsLeader,
// else the zero time and false. The time carries Go's monotonic clock reading.
func (t *Trust) Until() (time.Time, bool) {
	if p := t.now(); p != nil {
		return p.deadline, true
	}
	return time.Time{}, false
}
