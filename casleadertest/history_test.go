package casleadertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const s = int64(time.Second)

var bounds = Bounds{Lease: time.Second, Renew: 600 * time.Millisecond, Poll: 200 * time.Millisecond, Slack: time.Second}

func props(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Property)
	}
	return out
}

func TestCheckAcceptsAHealthyHistory(t *testing.T) {
	h := History{
		Beliefs: []Interval{{"a", 1, 0, 10 * s, ""}, {"b", 12, 11 * s, 20 * s, ""}},
		Actions: []Action{{1, 1, "a", 1 * s, "", 0}, {2, 1, "a", 2 * s, "", 0}, {3, 12, "b", 12 * s, "", 0}, {4, 12, "b", 13 * s, "", 0}},
		Faults:  []Fault{{Kinds: []string{KillLeader}, Targets: []string{"a"}, Leader: "a", Start: 10 * s, Heal: 10 * s}},
		End:     20 * s,
	}
	r := Check(h, bounds)
	require.True(t, r.OK(), "%v", r.Violations)
	assert.Equal(t, 1, r.Trials)
	assert.Equal(t, 4, r.ActionsChecked)
	assert.Equal(t, []time.Duration{time.Second}, r.Failovers)
	assert.Equal(t, []time.Duration{time.Second}, r.Liveness)
	assert.Zero(t, r.MaxOverlap)
}

func TestCheckFindsTokensGoingBackwards(t *testing.T) {
	h := History{Actions: []Action{{1, 5, "a", 1 * s, "", 0}, {2, 7, "b", 2 * s, "", 0}, {3, 5, "a", 3 * s, "", 0}}}
	r := Check(h, bounds)
	require.Equal(t, []string{"token-order"}, props(r.Violations))
	assert.Contains(t, r.Violations[0].Detail, "token 5 after action 2")
}

func TestCheckFindsOneTokenUsedByTwoCandidates(t *testing.T) {
	h := History{Actions: []Action{{1, 5, "a", 1 * s, "", 0}, {2, 5, "b", 2 * s, "", 0}}}
	r := Check(h, bounds)
	require.Equal(t, []string{"token-order"}, props(r.Violations))
	assert.Contains(t, r.Violations[0].Detail, "used by a")
}

func TestCheckExcusesNoTokenRegressionEvenAfterARollback(t *testing.T) {
	h := History{
		Beliefs: []Interval{{"a", 9, 0, 2 * s, ""}, {"b", 4, 2*s + 1, 4 * s, ""}},
		Actions: []Action{{1, 9, "a", 1 * s, "", 0}, {2, 4, "b", 3 * s, "", 0}},
		Faults:  []Fault{{Kinds: []string{RollbackRow}, Start: 2 * s, Heal: 2 * s}},
	}
	r := Check(h, bounds)
	assert.False(t, r.OK())
	require.Equal(t, []string{"token-order"}, props(r.Violations))
	assert.Equal(t, []string{"stale-action"}, props(r.Excused), "an old term acting after a rollback is excused, its token order is not")
}

func TestCheckFindsAnActionThatBeganAfterANewerTermBegan(t *testing.T) {
	// a decided at 1 s, before b's term began at 2 s: no violation whenever it
	// completed. a began another action at 3 s with its old token: a violation.
	h := History{
		Beliefs: []Interval{{"a", 5, 0, 1500 * time.Millisecond.Nanoseconds(), ""}, {"b", 6, 2 * s, 9 * s, ""}},
		Actions: []Action{{1, 5, "a", 1 * s, "", 4 * s}, {2, 6, "b", 2*s + 1, "", 2*s + 2}, {3, 5, "a", 3 * s, "", 3*s + 1}},
	}
	r := Check(h, bounds)
	require.Equal(t, []string{"token-order", "stale-action"}, props(r.Violations))
	assert.Contains(t, r.Violations[1].Detail, "action 3 of a with token 5 began 1s after b began to lead with token 6")
	assert.Contains(t, r.Violations[1].Interleaving, "b begins to lead, token 6")
	assert.Contains(t, r.Violations[1].Interleaving, "a begins action 3, token 5")
	assert.Contains(t, r.String(), "a begins action 3, token 5", "the report prints the interleaving")
}

func TestCheckOrdersOnlyActionsThatDidNotRunAtTheSameTime(t *testing.T) {
	// Action 2 began before action 1 completed: seen complete after it, it may
	// have committed first. Action 3 began after action 1 completed.
	h := History{Actions: []Action{{1, 6, "b", 1 * s, "", 3 * s}, {2, 5, "a", 2 * s, "", 4 * s}, {3, 5, "a", 5 * s, "", 6 * s}}}
	r := Check(h, bounds)
	require.Equal(t, []string{"token-order"}, props(r.Violations))
	assert.Contains(t, r.Violations[0].Detail, "action 3 of a with token 5 after action 1 of b with token 6")
}

func TestCheckFindsOverlappingBeliefs(t *testing.T) {
	h := History{Beliefs: []Interval{{"a", 1, 0, 10 * s, ""}, {"b", 2, 9 * s, 20 * s, ""}, {"a", 3, 21 * s, 22 * s, ""}}}
	r := Check(h, bounds)
	require.Equal(t, []string{"belief-overlap"}, props(r.Violations))
	assert.Equal(t, time.Second, r.MaxOverlap)
}

func TestCheckIgnoresBeliefsOfOneCandidate(t *testing.T) {
	h := History{Beliefs: []Interval{{"a", 1, 0, 10 * s, ""}, {"a", 2, 5 * s, 20 * s, ""}}}
	assert.True(t, Check(h, bounds).OK())
}

func TestCheckExcusesOverlapsOfAFrozenCandidate(t *testing.T) {
	h := History{
		Beliefs: []Interval{{"a", 1, 0, 10 * s, ""}, {"b", 2, 9 * s, 20 * s, ""}},
		Faults:  []Fault{{Kinds: []string{StopLeader}, Targets: []string{"a"}, Leader: "a", Start: 5 * s, Heal: 9 * s}},
	}
	r := Check(h, bounds)
	assert.Empty(t, props(r.Violations))
	require.Equal(t, []string{"belief-overlap"}, props(r.Excused))
	assert.Equal(t, time.Second, r.MaxOverlapExcused[StopLeader])
	assert.Zero(t, r.MaxOverlap)
}

func TestCheckFindsALeaderThatCameBackTooLate(t *testing.T) {
	h := History{
		Beliefs: []Interval{{"a", 1, 0, 10 * s, ""}, {"b", 2, 15 * s, 20 * s, ""}},
		Faults:  []Fault{{Kinds: []string{CutLeader}, Targets: []string{"a"}, Leader: "a", Start: 10 * s, Heal: 11 * s}},
		End:     20 * s,
	}
	r := Check(h, bounds)
	require.Equal(t, []string{"liveness"}, props(r.Violations))
	assert.Equal(t, []time.Duration{4 * time.Second}, r.Liveness)
	assert.Equal(t, []time.Duration{5 * time.Second}, r.Failovers)
}

func TestCheckFindsNoLeaderAtAll(t *testing.T) {
	h := History{
		Beliefs: []Interval{{"a", 1, 0, 10 * s, ""}},
		Faults:  []Fault{{Kinds: []string{CutAll}, Leader: "a", Start: 10 * s, Heal: 11 * s}},
		End:     30 * s,
	}
	assert.Equal(t, []string{"liveness"}, props(Check(h, bounds).Violations))
	// A run that ended before the bound passed cannot be judged.
	h.End = 12 * s
	assert.True(t, Check(h, bounds).OK())
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	assert.Equal(t, time.Duration(3), Percentile(ds, 50))
	assert.Equal(t, time.Duration(5), Percentile(ds, 99))
	assert.Equal(t, time.Duration(5), Percentile(ds, 100))
	assert.Equal(t, time.Duration(1), Percentile(ds, 0))
	assert.Zero(t, Percentile(nil, 50))
}

func TestCheckCountsALossJustBeforeTheNextFaultForTheNextFault(t *testing.T) {
	// Replies to the leader are reset for 300 ms; it keeps its lease; 500 ms after
	// the heal (within R of it) it is frozen, and its last recorded belief is 2 ms
	// before that stamp.
	freeze := 2*s + 800*int64(time.Millisecond)
	h := History{
		Beliefs: []Interval{{"a", 1, 0, freeze - 2*int64(time.Millisecond), ""}, {"b", 2, freeze + s, 10 * s, ""}},
		Faults: []Fault{
			{Kinds: []string{ResetLeader}, Targets: []string{"a"}, Leader: "a", Start: 2 * s, Heal: 2*s + 300*int64(time.Millisecond)},
			{Kinds: []string{StopLeader}, Targets: []string{"a"}, Leader: "a", Start: freeze, Heal: freeze + 2*s},
		},
		End: 10 * s,
	}
	r := Check(h, bounds)
	assert.Empty(t, r.FailoversByKind[ResetLeader], "the reset did not cost the lease")
	assert.Equal(t, []time.Duration{time.Second}, r.FailoversByKind[StopLeader])
}

func TestCheckJudgesEachKeyOnItsOwn(t *testing.T) {
	// Two groups share keys x and y: a leads x while b leads y, and tokens of y are
	// below tokens of x. Neither is a violation; a on y overlapping b on y is one.
	h := History{
		Keys: []string{"x", "y"},
		Beliefs: []Interval{
			{"a", 90, 0, 10 * s, "x"}, {"b", 7, 0, 10 * s, "y"},
			{"a", 8, 9 * s, 12 * s, "y"},
		},
		Actions: []Action{{1, 90, "a", 1 * s, "x", 0}, {2, 7, "b", 2 * s, "y", 0}, {3, 91, "b", 3 * s, "x", 0}, {4, 6, "a", 4 * s, "y", 0}},
	}
	r := Check(h, bounds)
	assert.Equal(t, 2, r.Keys)
	require.Equal(t, []string{"token-order", "stale-action", "belief-overlap"}, props(r.Violations))
	assert.Equal(t, "y", r.Violations[0].Key)
	assert.Contains(t, r.Violations[0].Detail, "token 6 after action 2")
	assert.Equal(t, "y", r.Violations[1].Key)
	assert.Equal(t, "y", r.Violations[2].Key)
	assert.Equal(t, time.Second, r.MaxOverlap)
	assert.Contains(t, r.String(), "VIOLATION belief-overlap on key y")
}

func TestCheckFindsOneKeyLeftWithoutALeader(t *testing.T) {
	// a is killed at 10 s leading x and y; b takes x over, nobody takes y.
	h := History{
		Keys:    []string{"x", "y", "z"},
		Beliefs: []Interval{{"a", 1, 0, 10 * s, "x"}, {"a", 2, 0, 10 * s, "y"}, {"b", 3, 11 * s, 30 * s, "x"}, {"c", 4, 0, 30 * s, "z"}},
		Faults:  []Fault{{Kinds: []string{KillLeader}, Targets: []string{"a"}, Leader: "a", Start: 10 * s, Heal: 10 * s}},
		End:     30 * s,
	}
	r := Check(h, bounds)
	require.Equal(t, []string{"liveness"}, props(r.Violations))
	assert.Equal(t, "y", r.Violations[0].Key)
	// x failed over in 1 s; y never did and has no failover to measure.
	assert.Equal(t, []time.Duration{time.Second}, r.Failovers)
	assert.Equal(t, 1, r.FailedOverKeys)
}

func TestCheckMeasuresAGroupFailoverUntilTheLastKey(t *testing.T) {
	// a leads x and y and is killed at 10 s; b takes x 1 s later, c takes y 2 s later;
	// z, led by c throughout, was led all along.
	h := History{
		Keys: []string{"x", "y", "z"},
		Beliefs: []Interval{
			{"a", 1, 0, 10 * s, "x"}, {"a", 2, 0, 10 * s, "y"}, {"c", 3, 0, 30 * s, "z"},
			{"b", 4, 11 * s, 30 * s, "x"}, {"c", 5, 12 * s, 30 * s, "y"},
		},
		Faults: []Fault{{Kinds: []string{KillLeader}, Targets: []string{"a"}, Leader: "a", Start: 10 * s, Heal: 10 * s}},
		End:    30 * s,
	}
	r := Check(h, bounds)
	require.True(t, r.OK(), "%v", r.Violations)
	assert.Equal(t, []time.Duration{2 * time.Second}, r.Failovers)
	assert.Equal(t, []time.Duration{2 * time.Second}, r.FailoversByKind[KillLeader])
	assert.Equal(t, []time.Duration{2 * time.Second}, r.Liveness)
	assert.Equal(t, 2, r.FailedOverKeys)
}

func TestCheckReportsStretchesWithoutALeaderOutsideFaultsWithoutJudgingThem(t *testing.T) {
	h := History{
		Beliefs: []Interval{{"a", 1, 0, 10 * s, ""}, {"b", 12, 11 * s, 20 * s, ""}},
		Faults:  []Fault{{Kinds: []string{KillLeader}, Targets: []string{"a"}, Leader: "a", Start: 10 * s, Heal: 10 * s}},
		End:     20 * s,
		Unled:   []time.Duration{5 * time.Second, 7 * time.Second},
	}
	r := Check(h, bounds)
	require.True(t, r.OK(), "%v", r.Violations)
	assert.Equal(t, h.Unled, r.Unled)
	assert.Contains(t, r.String(), "beyond the liveness bound (a database that did not answer; not judged) (2): max=7s")
}

func TestCheckDoesNotCountStalledTimeAgainstTheLivenessBound(t *testing.T) {
	// The bound is 2.2 s; b leads 4 s after the heal at 11 s.
	h := History{
		Beliefs: []Interval{{"a", 1, 0, 10 * s, ""}, {"b", 2, 15 * s, 20 * s, ""}},
		Faults:  []Fault{{Kinds: []string{CutLeader}, Targets: []string{"a"}, Leader: "a", Start: 10 * s, Heal: 11 * s}},
		End:     20 * s,
	}
	for _, tc := range []struct {
		name   string
		stalls []Stall
		ok     bool
		credit time.Duration
	}{
		{"two seconds stalled after the heal", []Stall{{11*s + s/2, 13*s + s/2}}, true, 2 * time.Second},
		{"one second stalled after the heal", []Stall{{11*s + s/2, 12*s + s/2}}, false, time.Second},
		{"stalled before the heal", []Stall{{5 * s, 11 * s}}, false, 0},
		{"stalled after the bound", []Stall{{14 * s, 20 * s}}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.Stalls = tc.stalls
			r := Check(h, bounds)
			assert.Equal(t, tc.ok, r.OK(), "%v", r.Violations)
			assert.Equal(t, tc.credit, r.StallCredit)
			assert.Equal(t, time.Duration(tc.stalls[0].End-tc.stalls[0].Start), r.Stalled)
			assert.Contains(t, r.String(), "database stalled for the harness's probe")
		})
	}
}

func TestExtendCapsTheStallCredit(t *testing.T) {
	stalls := []Stall{{0, 10 * int64(maxStallCredit)}}
	assert.Equal(t, int64(time.Second+maxStallCredit), extend(stalls, 0, time.Second))
	assert.Equal(t, int64(time.Second), extend(nil, 0, time.Second))
}
