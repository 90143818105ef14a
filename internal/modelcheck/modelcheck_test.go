package modelcheck

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func candidate(id, inc string, lease, renew int) proc {
	return proc{id: id, inc: inc, lease: lease, renew: dur(renew)}
}

// withRenew is p with renew deadline r.
func withRenew(p proc, r time.Duration) proc {
	p.renew = r
	return p
}

// scenarios are the configurations checked by go test.
func scenarios() []scenario {
	a, b := candidate("a", "a0", 3, 2), candidate("b", "b10", 3, 2)
	// A margin L - R of half a step: a leader's trust may end between two
	// steps, and a reply that arrives a step after its renewal executed shows
	// whether the trust is measured from the send.
	a5, b5 := withRenew(a, 5*unit/2), withRenew(b, 5*unit/2)
	// The same margin with R long enough for a renewal to fail, its retry to
	// lose, and the read that settles it to answer a step late before the
	// deadline.
	a7, b7 := withRenew(candidate("a", "a0", 4, 3), 7*unit/2), withRenew(candidate("b", "b10", 4, 3), 7*unit/2)
	return []scenario{
		{name: "LostAndLateRepliesAndRequests", procs: []proc{a, b}, horizon: 7, faults: 2, oneClock: true, released: true, depth: 17},
		{name: "LeaderCutOffAfterLateReplies", procs: []proc{a, b}, horizon: 7, faults: 2, late: true, oneClock: true, leader: true, depth: 17},
		{name: "CrashesAndRestartsWithAndWithoutResume", procs: []proc{a, b}, horizon: 7, crashes: 1, oneClock: true, leader: true, depth: 18},
		{name: "MixedLeaseSettings", procs: []proc{candidate("a", "a0", 4, 3), candidate("b", "b10", 2, 1)},
			horizon: 8, faults: 1, oneClock: true, leader: true, depth: 22},
		{name: "HandoverToADuplicatedID", procs: []proc{a, candidate("b", "b10", 3, 2), candidate("b", "b20", 3, 2)},
			horizon: 5, handover: true, target: "b", oneClock: true, leader: true, depth: 21},
		{name: "NamedHandoverToADuplicatedID", procs: []proc{a, candidate("b", "b10", 3, 2), candidate("b", "b20", 3, 2)},
			horizon: 5, handover: true, named: true, target: "b", electsReleased: true, oneClock: true, leader: true, depth: 21},
		{name: "NamedHandoverToARestartedTarget", procs: []proc{a, b},
			horizon: 6, handover: true, named: true, crashes: 1, electsReleased: true, oneClock: true, leader: true, depth: 19},
		{name: "HandoverToADuplicatedIDClaimedOnWakeups", procs: []proc{a, candidate("b", "b10", 3, 2), candidate("b", "b20", 3, 2)},
			horizon: 5, handover: true, target: "b", electsReleased: true, oneClock: true, leader: true, depth: 19},
		{name: "ReleasedLeaseRacedByADuplicatedID", procs: []proc{a, candidate("b", "b10", 3, 2), candidate("b", "b20", 3, 2)},
			horizon: 5, resign: true, wake: true, electsReleased: true, oneClock: true, leader: true, depth: 19},
		{name: "OutsideWriteTickStepBackAndStepDownRequests", procs: []proc{a, b}, horizon: 7, outside: 1, stepBack: 1, requests: 1,
			handover: true, oneClock: true, leader: true, depth: 15},
		{name: "LateRepliesAndAShortMargin", procs: []proc{a5, b5}, horizon: 7, faults: 1, late: true, oneClock: true, leader: true, depth: 17},
		{name: "DrainsAndDrainTimeouts", procs: []proc{a, b}, horizon: 7, resign: true, handover: true, requests: 1, drain: true, oneClock: true, leader: true, depth: 15},
		{name: "PauseAndResume", procs: []proc{a, b}, horizon: 7, pauses: 2, handover: true, wake: true, oneClock: true, leader: true, depth: 15},
		{name: "ElectReleasedOnWakeupsWithoutAVersion", procs: []proc{a, b}, horizon: 7, faults: 1, resign: true, handover: true, electsReleased: true, oneClock: true, leader: true, depth: 15},
		{name: "LateSettleReadsAndAShortMargin", procs: []proc{a7, b7}, horizon: 8, faults: 1, late: true, oneClock: true, leader: true, depth: 22},
		{name: "ResignWakeupsAndDrift", procs: []proc{a, b}, horizon: 7, faults: 1, resign: true, wake: true, drift: 1, oneClock: true, leader: true, depth: 15},
	}
}

// TestProtocol explores every scenario, each to its depth bound (steps from the
// start; CASLEADER_MODELCHECK_DEPTH sets another for all), and fails with the shortest trace that
// breaks an invariant.
func TestProtocol(t *testing.T) {
	depth := envInt(t, "CASLEADER_MODELCHECK_DEPTH", 0)
	if os.Getenv("CASLEADER_MODELCHECK_PROGRESS") != "" {
		progress = func(d, f, n int) { println("depth", d, "frontier", f, "seen", n) }
	}
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			if only := os.Getenv("CASLEADER_MODELCHECK_ONLY"); only != "" && only != sc.name {
				t.Skip("CASLEADER_MODELCHECK_ONLY")
			}
			if depth != 0 {
				sc.depth = depth
			}
			res := explore(&sc)
			t.Logf("%s: %d distinct states, depth %d, %v (bounded by depth or horizon: %v; frontier capped: %v)", sc.name, res.states, res.depth, res.elapsed, res.truncated, res.capped)
			if res.violation != "" {
				t.Fatalf("%s\n%s", res.violation, res.trace)
			}
		})
	}
}

// TestCheckerFindsTwoLeadersWhenElectionsTakeLiveLeases checks the checker: with
// a database whose election ignores the lease, it must find two candidates
// trusting at once, and print the trace.
func TestCheckerFindsTwoLeadersWhenElectionsTakeLiveLeases(t *testing.T) {
	sc := scenario{name: "ElectionsTakeLiveLeases", procs: []proc{candidate("a", "a0", 3, 2), candidate("b", "b10", 3, 2)},
		horizon: 4, oneClock: true, leader: true, takesLiveLeases: true}
	res := explore(&sc)
	t.Logf("%d distinct states, depth %d\n%s", res.states, res.depth, res.trace)
	if !strings.Contains(res.violation, "both trust their leadership") {
		t.Fatalf("violation %q, want two leaders", res.violation)
	}
	if !strings.Contains(res.trace, "database executes b[b10]'s elect") {
		t.Errorf("the trace does not show b's election:\n%s", res.trace)
	}
}

// TestCheckerFindsRevertedExecutorRules checks that each rule of the executor
// that the model follows matters: with the rule reverted, the checker must find
// the violation it prevents. CASLEADER_MODELCHECK_TRACES=dir writes each trace
// to dir (testdata/reverted holds them).
func TestCheckerFindsRevertedExecutorRules(t *testing.T) {
	for _, tc := range []struct {
		file     string
		revert   rule
		scenario string
		want     string
		live     bool // explore with the liveness check, to liveDepth
	}{
		{"release-before-drain.txt", revNoDrain, "DrainsAndDrainTimeouts", "was released while its leader's work still ran", false},
		{"release-after-drain-timeout.txt", revReleaseUndrained, "DrainsAndDrainTimeouts", "was released while its leader's work still ran", false},
		{"lead-beside-undrained-work.txt", revLeadBeside, "DrainsAndDrainTimeouts", "while the leader's work it started before still runs", false},
		{"paused-campaigns.txt", revPausedCampaigns, "PauseAndResume", "while paused", false},
		{"elect-released-any-row.txt", revElectReleasedAnyRow, "ElectReleasedOnWakeupsWithoutAVersion", "both trust their leadership", false},
		{"elections-lose.txt", revElectionsLose, "ResignWakeupsAndDrift", "no process leads within", true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			sc := find(t, tc.scenario)
			sc.revert, sc.name = tc.revert, sc.name+" (rule reverted: "+strings.TrimSuffix(tc.file, ".txt")+")"
			if tc.live {
				sc.live, sc.depth = true, liveDepth
			}
			res := explore(&sc)
			t.Logf("%d distinct states, depth %d\n%s", res.states, res.depth, res.trace)
			if !strings.Contains(res.violation, tc.want) {
				t.Fatalf("violation %q, want %q", res.violation, tc.want)
			}
			if dir := os.Getenv("CASLEADER_MODELCHECK_TRACES"); dir != "" {
				if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(res.trace), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// find returns the scenario named name.
func find(t *testing.T, name string) scenario {
	for _, sc := range scenarios() {
		if sc.name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %q", name)
	return scenario{}
}

// envInt returns the number in environment variable name, or def when it is not set.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: not a number", name, v)
	}
	return n
}
