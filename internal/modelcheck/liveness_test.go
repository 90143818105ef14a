package modelcheck

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The liveness check: from a reachable state, a fault-free continuation (no
// lost statements, crashes, environment writes, user requests, slow clocks or
// late replies; every statement executes and answers at once, every leader's
// work returns when its term ends, and time advances when nothing else can
// happen) reaches a state in which a process trusts its leadership. It is
// checked from every state the search reaches in which some candidate runs,
// takes part (not paused) and was not stopped.

// liveSteps bounds the continuation: enough for any lease (of 4 units at
// most), a cool-down of one lease after it, the polls and the writes.
const liveSteps = 200

// fair returns sc with every budget spent as in s, and no user moves: the
// moves of a fault-free continuation.
func fair(sc *scenario, s *state) scenario {
	return scenario{
		procs: sc.procs, horizon: s.now + liveSteps, drain: sc.drain,
		faults: s.faults, crashes: s.crashes, outside: s.outside, stepBack: s.stepBack,
		requests: s.requests, pauses: s.pauses, oneClock: sc.oneClock,
	}
}

// eligible reports whether a candidate of s runs, takes part and was not stopped.
func (s *state) eligible() bool {
	for i := 0; i < s.n; i++ {
		p := &s.procs[i]
		if p.ph != phDead && p.ph != phStopped && !p.paused {
			return true
		}
	}
	return false
}

// trusts reports whether a process of s trusts its leadership.
func (s *state) trusts() bool {
	for i := 0; i < s.n; i++ {
		p := &s.procs[i]
		if p.ph != phDead && p.m.Trusted(at(s.local(p))) {
			return true
		}
	}
	return false
}

// liveOrder is the order in which the continuation takes the moves it may.
var liveOrder = []kind{evDeliver, evExec, evSend, evExpire, evWorkDone, evTick}

// continuation follows the fault-free continuation of s for at most
// liveSteps steps, and returns its steps and whether a process trusts at its end.
func (s state) continuation(sc *scenario) ([]event, bool) {
	f := fair(sc, &s)
	var path []event
	for len(path) < liveSteps {
		if s.trusts() {
			return path, true
		}
		e, ok := s.nextFair(&f)
		if !ok {
			return path, false
		}
		s.apply(&f, e)
		path = append(path, e)
	}
	return path, s.trusts()
}

// nextFair returns the move the continuation takes in s.
func (s *state) nextFair(f *scenario) (event, bool) {
	evs := s.enabled(f)
	for _, k := range liveOrder {
		for _, e := range evs {
			if e.k == k && (k != evExec || e.arg < 0) {
				return e, true
			}
		}
	}
	return event{}, false
}

// liveTrace prints the trace to node n and the continuation after it.
func liveTrace(sc *scenario, nodes []node, n int32, cont []event, msg string) string {
	var b strings.Builder
	b.WriteString(replay(sc, nodes, n))
	s := initial(sc)
	for _, e := range pathTo(nodes, n) {
		s.apply(sc, e)
	}
	f := fair(sc, &s)
	fmt.Fprintf(&b, "fault-free continuation (%d steps):\n", len(cont))
	for i, e := range cont {
		fmt.Fprintf(&b, "%3d. %s\n", i+1, s.describe(e))
		s.apply(&f, e)
		if i < 12 || i == len(cont)-1 {
			s.show(&b) // the state after the first steps, and at the end
		}
	}
	fmt.Fprintf(&b, "VIOLATION: %s\n", msg)
	return b.String()
}

// liveDepth is the depth to which TestLiveness explores each scenario.
const liveDepth = 12

// TestLiveness checks that from every state each scenario reaches within
// liveDepth steps (CASLEADER_MODELCHECK_LIVE_DEPTH sets another), in which a
// candidate runs and takes part, a fault-free continuation reaches a leader.
func TestLiveness(t *testing.T) {
	depth := envInt(t, "CASLEADER_MODELCHECK_LIVE_DEPTH", liveDepth)
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			if only := os.Getenv("CASLEADER_MODELCHECK_ONLY"); only != "" && only != sc.name {
				t.Skip("CASLEADER_MODELCHECK_ONLY")
			}
			sc.live, sc.depth = true, depth
			res := explore(&sc)
			t.Logf("%s: %d distinct states, depth %d, %v, each with its continuation", sc.name, res.states, res.depth, res.elapsed)
			if res.violation != "" {
				t.Fatalf("%s\n%s", res.violation, res.trace)
			}
		})
	}
}
