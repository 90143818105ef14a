package casleadertest

import "time"

// Stall is a stretch of time (CLOCK_MONOTONIC, see [Mono]) in which the harness
// could not get a trivial statement answered by the database in time: the machine
// or the server was too busy to answer anyone, the candidates included. The design
// promises a leader back within the lease only while the database answers within
// the renew deadline, so the checker does not count stalled time against the
// liveness bound (see [Bounds.Liveness]). Safety is judged the same, stalls or not.
type Stall struct{ Start, End int64 }

// maxStallCredit caps the stalled time that one liveness bound or one harness wait
// may add: past it, a machine too busy to run the suite fails the run.
const maxStallCredit = 2 * time.Minute

// stalled returns how much of [from, to] the stalls cover. Stalls are in time
// order and do not overlap.
func stalled(stalls []Stall, from, to int64) time.Duration {
	var d int64
	for _, s := range stalls {
		if lo, hi := max(s.Start, from), min(s.End, to); hi > lo {
			d += hi - lo
		}
	}
	return time.Duration(d)
}

// extend returns the deadline of a wait of d from start that does not count
// stalled time: start + d + the stalls in between, at most maxStallCredit more.
func extend(stalls []Stall, start int64, d time.Duration) int64 {
	end := start + int64(d)
	for {
		credit := min(stalled(stalls, start, end), maxStallCredit)
		next := start + int64(d+credit)
		if next == end {
			return end
		}
		end = next
	}
}
