package chaos

import (
	"time"

	"github.com/casleader/casleader/casleadertest"
)

// The history and its checker are package casleadertest's: the suite that proves
// the library proves the kit that users test their own code with. These aliases
// keep the suite's names.
type (
	Interval  = casleadertest.Interval
	Action    = casleadertest.Action
	Fault     = casleadertest.Fault
	History   = casleadertest.History
	Bounds    = casleadertest.Bounds
	Violation = casleadertest.Violation
	Report    = casleadertest.Report
)

// Fault kinds (see package casleadertest).
const (
	KillLeader    = casleadertest.KillLeader
	StopLeader    = casleadertest.StopLeader
	CutLeader     = casleadertest.CutLeader
	RefuseLeader  = casleadertest.RefuseLeader
	CutAll        = casleadertest.CutAll
	SlowLeader    = casleadertest.SlowLeader
	ResetLeader   = casleadertest.ResetLeader
	RollbackRow   = casleadertest.RollbackRow
	KillFollower  = casleadertest.KillFollower
	StopFollower  = casleadertest.StopFollower
	CutFollower   = casleadertest.CutFollower
	SlowFollower  = casleadertest.SlowFollower
	ResetFollower = casleadertest.ResetFollower
)

// Check is [casleadertest.Check].
func Check(h History, b Bounds) Report { return casleadertest.Check(h, b) }

// Percentile is [casleadertest.Percentile].
func Percentile(ds []time.Duration, p float64) time.Duration {
	return casleadertest.Percentile(ds, p)
}
