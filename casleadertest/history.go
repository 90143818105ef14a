package casleadertest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// Fault kinds. A trial injects one or two at once.
const (
	KillLeader    = "kill-leader"    // SIGKILL of the leader
	StopLeader    = "stop-leader"    // SIGSTOP of the leader for longer than the lease and until another candidate leads, then SIGCONT
	CutLeader     = "cut-leader"     // the leader's link drops every byte (black hole); followers reach the database
	RefuseLeader  = "refuse-leader"  // the leader's link is closed and refuses connections
	CutAll        = "cut-all"        // every candidate's link drops every byte, then heals
	SlowLeader    = "slow-leader"    // latency beyond the renew deadline on the leader's link
	ResetLeader   = "reset-leader"   // connections reset when a reply comes back: the write committed, the reply is lost
	RollbackRow   = "rollback-row"   // the row is set back to an older version and tick_time (direct SQL)
	KillFollower  = "kill-follower"  // SIGKILL of a follower
	StopFollower  = "stop-follower"  // SIGSTOP of a follower, then SIGCONT
	CutFollower   = "cut-follower"   // a follower's link drops every byte
	SlowFollower  = "slow-follower"  // latency beyond the renew deadline on a follower's link
	ResetFollower = "reset-follower" // a follower's connections reset on replies
)

// Interval is one belief interval: candidate Cand believed it led election Key, in
// the term of Token, from Start to End (nanoseconds of CLOCK_MONOTONIC). The recorder
// reports the first and the last instant it saw IsLeader() true, so a recorded
// interval lies inside the real one: overlaps it shows are certain, never an artefact
// of sampling.
type Interval struct {
	Cand       string
	Token      int64
	Start, End int64
	Key        string
}

// Action is one action that took effect, on election Key, by candidate Cand in the
// term of Token. ID orders the actions: the database's order of the inserts (the
// fault suite reads them from its action table), or the order in which a
// [Recorder] saw them complete. Check is when its candidate decided to act (it
// checked IsLeader(), or called the action), Done when it saw it complete
// (CLOCK_MONOTONIC, see [Mono]; 0 when unknown): with both, ID order counts only
// for actions that did not run at the same time.
type Action struct {
	ID    int64
	Token int64
	Cand  string
	Check int64
	Key   string
	Done  int64 `json:",omitempty"`
}

// Fault is one injected fault: Kinds applied to Targets from Start until Heal
// (CLOCK_MONOTONIC). Leader is the candidate that led when it started ("" if none).
type Fault struct {
	Kinds   []string
	Targets []string
	Leader  string
	Start   int64
	Heal    int64
	Note    string // what the harness did, e.g. the row a rollback wrote back
}

// Has reports whether the fault includes kind.
func (f Fault) Has(kind string) bool { return slices.Contains(f.Kinds, kind) }

// Name is the fault's kinds joined by "+".
func (f Fault) Name() string { return strings.Join(f.Kinds, "+") }

// History is what a run observed: beliefs, actions and faults.
type History struct {
	// Keys are the elections of the run: one for candidates that run an Elector,
	// many for candidates that run a group. Empty means the keys the beliefs name.
	Keys    []string
	Beliefs []Interval
	Actions []Action
	Faults  []Fault
	// End is when the harness began to stop the candidates: beliefs end there.
	End int64
	// Rejected counts the fenced actions refused, by reason ("local": the elector
	// knew it did not lead; "database": the guard's row check; "error": the check
	// could not be made).
	Rejected map[string]int
	// ClockOffsets holds, per candidate started, how far its CLOCK_MONOTONIC and
	// CLOCK_BOOTTIME were ahead of the host's (0: not offset).
	ClockOffsets []time.Duration
	// Unled holds the waits for a leader to hit, before a trial and with no fault
	// active, that outlasted the liveness bound: the database did not answer the
	// candidates within the renew deadline for reasons the harness did not cause (a
	// stalled server, a starved machine). The design promises liveness only while
	// the database answers, so these are reported, not judged.
	Unled []time.Duration
	// Stalls are the stretches in which the harness's probe found the database
	// too slow to answer anyone in time ([Stall]), in time order.
	Stalls []Stall `json:",omitempty"`
	// Shares are the moments from which a balanced group's keys must be spread
	// fairly over its candidates ([Share]); none for other runs.
	Shares []Share `json:",omitempty"`
}

// Bounds are the timing parameters the checker judges liveness with.
type Bounds struct {
	Lease, Renew, Poll time.Duration
	// Slack is added to Lease + Poll for the liveness bound: scheduling, round trips,
	// the idle-transaction timeout that frees a frozen leader's row lock.
	Slack time.Duration
}

// Liveness returns the bound within which a leader must be back after a fault
// heals, in time that the harness's probe did not find stalled ([Stall]).
func (b Bounds) Liveness() time.Duration { return b.Lease + b.Poll + b.Slack }

// Violation is one broken property.
type Violation struct {
	Property string // "token-order", "stale-action", "belief-overlap", "liveness", "fairness", "untested"
	Key      string // the election it was found on
	Detail   string
	// Interleaving lists the beliefs, actions and faults of Key around the
	// violation, in time order: the interleaving that broke the property.
	Interleaving string `json:",omitempty"`
	// Excused names the fault kind under which DESIGN.md says only fencing (or
	// nothing) protects: StopLeader/StopFollower for a frozen process, RollbackRow for a
	// rolled-back row. Empty for a real violation.
	Excused string
}

// Report is the checker's verdict on a History.
type Report struct {
	Trials         int
	Keys           int // elections checked, each on its own
	FaultsByKind   map[string]int
	ActionsChecked int
	Rejected       map[string]int
	// Violations that no fault excuses: the run fails if there is any.
	Violations []Violation
	// Excused lists the violations under the faults where the design gives no
	// guarantee on beliefs (frozen process, rolled-back row), reported separately.
	Excused []Violation
	// MaxOverlap is the largest overlap of two candidates' belief intervals outside
	// excused faults; MaxOverlapExcused the largest under them, by fault kind.
	MaxOverlap        time.Duration
	MaxOverlapExcused map[string]time.Duration
	// Failovers are the times from a fault that ended a leader's belief to the next
	// belief of any candidate; Liveness the times from each heal to a leader. With
	// several keys, each is per fault the time until the last key concerned was led
	// again: every key the fault took from its leader for Failovers, every key for
	// Liveness. FailedOverKeys counts the keys behind Failovers.
	Failovers      []time.Duration
	Liveness       []time.Duration
	FailedOverKeys int
	// FailoversByKind splits Failovers by the trial's first fault kind.
	FailoversByKind map[string][]time.Duration
	// ClockOffsets is History.ClockOffsets.
	ClockOffsets []time.Duration
	// Unled is History.Unled.
	Unled []time.Duration
	// Stalled is the time History.Stalls cover; StallCredit the most that one
	// liveness bound was lengthened by them.
	Stalled, StallCredit time.Duration
	// Fair are the times from each of History.Shares to a fair spread;
	// FairUnjudged counts the shares cut short by the next one, or by the end of
	// the run, before they were fair.
	Fair         []time.Duration
	FairUnjudged int
	// FairByKind splits Fair by the kind of the share's event.
	FairByKind map[string][]time.Duration
}

// onKey names the violation's key for the report ("" if it has none).
func (v Violation) onKey() string {
	if v.Key == "" {
		return ""
	}
	return " on key " + v.Key
}

// OK reports whether the history has no unexcused violation.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Check verifies a history, on each key by itself:
//
//  1. Actions never go backwards in token: in ID order, each token is at least the
//     largest before it (when both stamps of the actions are known: of the actions
//     that began after it completed), and one token is never used by two
//     candidates ("token-order").
//  2. No action begins after another candidate began to believe it leads in a
//     newer term ("stale-action"): an action of an old term, once a newer term
//     is known to have begun, is one that a fence should have refused.
//  3. Belief intervals of different candidates never overlap ("belief-overlap").
//  4. After every fault heals, some candidate believes it leads within b.Liveness()
//     ("liveness"), not counting the time History.Stalls cover (up to two minutes
//     per fault): the database did not answer anyone in time then.
//  5. After each of History.Shares (a balanced group's candidates changed), every
//     key is led by one of the share's candidates and each leads within one key of
//     N/M, within the share's bound, not counting stalls either ("fairness").
//
// Keys are independent elections: a token below another key's, or two candidates
// leading two different keys at once, is no violation.
//
// Property 1 has no excuse, not even a rolled-back row: terms follow the database
// clock, so an election after a rollback still issues a term above every earlier
// one. Overlaps (property 2) right after a RollbackRow fault, and overlaps that involve
// a candidate frozen by a Stop fault, are reported apart as excused.
func Check(h History, b Bounds) Report {
	r := Report{
		Trials:            len(h.Faults),
		FaultsByKind:      map[string]int{},
		ActionsChecked:    len(h.Actions),
		Rejected:          h.Rejected,
		MaxOverlapExcused: map[string]time.Duration{},
		FailoversByKind:   map[string][]time.Duration{},
		ClockOffsets:      h.ClockOffsets,
	}
	for _, f := range h.Faults {
		for _, k := range f.Kinds {
			r.FaultsByKind[k]++
		}
	}
	keys := slices.Clone(h.Keys)
	beliefs := map[string][]Interval{}
	for _, x := range h.Beliefs {
		beliefs[x.Key] = append(beliefs[x.Key], x)
		if len(h.Keys) == 0 && !slices.Contains(keys, x.Key) {
			keys = append(keys, x.Key)
		}
	}
	actions := map[string][]Action{}
	for _, a := range h.Actions {
		actions[a.Key] = append(actions[a.Key], a)
	}
	for key := range actions {
		if !slices.Contains(keys, key) {
			keys = append(keys, key) // a key with actions and no belief: check its tokens too
		}
	}
	sort.Strings(keys)
	r.Keys = len(keys)
	for _, key := range keys {
		checkTokens(key, actions[key], beliefs[key], h.Faults, &r)
		checkStale(key, actions[key], beliefs[key], h.Faults, &r)
		checkOverlaps(key, beliefs[key], h.Faults, &r)
	}
	checkLiveness(h, keys, beliefs, b, &r)
	checkFairness(h, keys, &r)
	r.Unled = slices.Clone(h.Unled)
	return r
}

func (r *Report) add(v Violation) {
	if v.Excused != "" {
		r.Excused = append(r.Excused, v)
	} else {
		r.Violations = append(r.Violations, v)
	}
}

// rollbackBetween reports whether a RollbackRow fault started in [from, to].
func rollbackBetween(faults []Fault, from, to int64) bool {
	for _, f := range faults {
		if f.Has(RollbackRow) && f.Start >= from && f.Start <= to {
			return true
		}
	}
	return false
}

// checkTokens checks the token order of one key's actions.
func checkTokens(key string, actions []Action, beliefs []Interval, faults []Fault, r *Report) {
	acts := slices.Clone(actions)
	sort.SliceStable(acts, func(i, j int) bool { return acts[i].ID < acts[j].ID })
	var top Action // the action with the largest token so far (its first occurrence)
	for i, a := range acts {
		if i == 0 || a.Token > top.Token {
			top = a
			continue
		}
		var detail string
		switch {
		case a.Token < top.Token && top.Done != 0 && a.Check != 0 && a.Check < top.Done:
			continue // they ran at the same time: their order is not known
		case a.Token < top.Token:
			detail = fmt.Sprintf("action %d of %s with token %d after action %d of %s with token %d", a.ID, a.Cand, a.Token, top.ID, top.Cand, top.Token)
		case a.Cand != top.Cand:
			detail = fmt.Sprintf("token %d used by %s (action %d) and by %s (action %d)", a.Token, top.Cand, top.ID, a.Cand, a.ID)
		default:
			continue
		}
		r.add(Violation{Property: "token-order", Key: key, Detail: detail,
			Interleaving: interleave(beliefs, []Action{top, a}, faults, top.Check, max(a.Done, a.Check))})
	}
}

// checkStale checks that no action of one key began after another candidate began
// to believe it leads the key in a newer term. Rolled-back rows excuse it.
func checkStale(key string, actions []Action, beliefs []Interval, faults []Fault, r *Report) {
	for _, a := range actions {
		if a.Check == 0 {
			continue
		}
		for _, b := range beliefs {
			if b.Cand == a.Cand || b.Token <= a.Token || b.Start >= a.Check {
				continue
			}
			v := Violation{Property: "stale-action", Key: key, Detail: fmt.Sprintf(
				"action %d of %s with token %d began %v after %s began to lead with token %d",
				a.ID, a.Cand, a.Token, time.Duration(a.Check-b.Start).Round(time.Microsecond), b.Cand, b.Token)}
			if rollbackBetween(faults, b.Start-int64(10*time.Second), a.Check) {
				v.Excused = RollbackRow
			}
			v.Interleaving = interleave(beliefs, []Action{a}, faults, b.Start, max(a.Done, a.Check))
			r.add(v)
			break
		}
	}
}

// interleave renders the beliefs, actions and faults that touch [from, to], in
// time order, with times relative to from. At most 40 lines.
func interleave(beliefs []Interval, actions []Action, faults []Fault, from, to int64) string {
	type event struct {
		at   int64
		line string
	}
	var evs []event
	in := func(at int64) bool { return at >= from && at <= to }
	tokens := map[int64]bool{} // the beliefs of the actions' terms are shown too
	for _, a := range actions {
		tokens[a.Token] = true
	}
	for _, b := range beliefs {
		if b.End >= from && b.Start <= to || tokens[b.Token] && b.Start <= to {
			evs = append(evs, event{b.Start, fmt.Sprintf("%s begins to lead, token %d", b.Cand, b.Token)},
				event{b.End, fmt.Sprintf("%s stops leading, token %d", b.Cand, b.Token)})
		}
	}
	for _, a := range actions {
		if in(a.Check) || in(a.Done) {
			if a.Check != 0 {
				evs = append(evs, event{a.Check, fmt.Sprintf("%s begins action %d, token %d", a.Cand, a.ID, a.Token)})
			}
			if a.Done != 0 {
				evs = append(evs, event{a.Done, fmt.Sprintf("%s completed action %d, token %d", a.Cand, a.ID, a.Token)})
			}
		}
	}
	for _, f := range faults {
		if f.Heal >= from && f.Start <= to {
			evs = append(evs, event{f.Start, fmt.Sprintf("fault %s on %v begins", f.Name(), f.Targets)},
				event{f.Heal, fmt.Sprintf("fault %s healed", f.Name())})
		}
	}
	slices.SortStableFunc(evs, func(x, y event) int { return cmp.Compare(x.at, y.at) })
	var b strings.Builder
	for i, e := range evs {
		if i == 40 {
			fmt.Fprintf(&b, "  ... %d more\n", len(evs)-40)
			break
		}
		fmt.Fprintf(&b, "  at %v: %s\n", time.Duration(e.at-from).Round(time.Microsecond), e.line)
	}
	return b.String()
}

// checkOverlaps checks that the beliefs of one key's candidates never overlap.
func checkOverlaps(key string, beliefs []Interval, faults []Fault, r *Report) {
	bs := slices.Clone(beliefs)
	sort.Slice(bs, func(i, j int) bool { return bs[i].Start < bs[j].Start })
	for i, x := range bs {
		for _, y := range bs[i+1:] {
			if y.Start >= x.End {
				break // sorted by start: no later interval overlaps x
			}
			if y.Cand == x.Cand {
				continue
			}
			ov := time.Duration(min(x.End, y.End) - y.Start)
			if ov <= 0 {
				continue
			}
			v := Violation{Property: "belief-overlap", Key: key, Detail: fmt.Sprintf(
				"%s (token %d) and %s (token %d) both believed they led for %v", x.Cand, x.Token, y.Cand, y.Token, ov)}
			v.Excused = overlapExcuse(faults, x, y)
			v.Interleaving = interleave(bs, nil, faults, y.Start, min(x.End, y.End))
			if v.Excused == "" {
				r.MaxOverlap = max(r.MaxOverlap, ov)
			} else {
				r.MaxOverlapExcused[v.Excused] = max(r.MaxOverlapExcused[v.Excused], ov)
			}
			r.add(v)
		}
	}
}

// overlapExcuse names the fault that excuses an overlap of x and y: the row was
// rolled back shortly before the overlap, or one of them was frozen shortly before or
// during it.
func overlapExcuse(faults []Fault, x, y Interval) string {
	from, to := max(x.Start, y.Start), min(x.End, y.End) // the overlap
	const before = int64(10 * time.Second)
	if rollbackBetween(faults, from-before, to) {
		return RollbackRow
	}
	for _, f := range faults {
		if f.Start > to || f.Heal < from-before {
			continue
		}
		if (f.Has(StopLeader) || f.Has(StopFollower)) && (slices.Contains(f.Targets, x.Cand) || slices.Contains(f.Targets, y.Cand)) {
			return StopLeader
		}
	}
	return ""
}

// leaderAt returns the first instant at or after t when some belief is active, or
// -1 if none starts after t.
func leaderAt(bs []Interval, t int64) int64 {
	first := int64(-1)
	for _, b := range bs {
		if b.Start <= t && b.End > t {
			return t
		}
		if b.Start >= t && (first < 0 || b.Start < first) {
			first = b.Start
		}
	}
	return first
}

// checkLiveness checks that every key is led again within b.Liveness() of each heal,
// and measures the failovers: per fault, the time until the last key concerned was
// led again.
func checkLiveness(h History, keys []string, beliefs map[string][]Interval, b Bounds, r *Report) {
	faults := slices.Clone(h.Faults)
	sort.Slice(faults, func(i, j int) bool { return faults[i].Start < faults[j].Start })
	for _, s := range h.Stalls {
		r.Stalled += time.Duration(s.End - s.Start)
	}
	for i, f := range faults {
		back, failover := time.Duration(-1), time.Duration(-1)
		bound := time.Duration(extend(h.Stalls, f.Heal, b.Liveness()) - f.Heal)
		r.StallCredit = max(r.StallCredit, bound-b.Liveness())
		for _, key := range keys {
			bs := beliefs[key]
			at := leaderAt(bs, f.Heal)
			if at < 0 && h.End != 0 && f.Heal+int64(bound) > h.End {
				continue // the run ended before the bound: nothing to judge
			}
			if at < 0 {
				r.add(Violation{Property: "liveness", Key: key, Detail: fmt.Sprintf("no leader after %s healed", f.Name())})
				continue
			}
			d := time.Duration(at - f.Heal)
			back = max(back, d)
			if d > bound {
				r.add(Violation{Property: "liveness", Key: key, Detail: fmt.Sprintf("a leader came back %v after %s healed, bound %v", d.Round(time.Millisecond), f.Name(), bound)})
			}
			// Failover: the fault ended the leader's belief (at the latest R after it
			// healed: later losses have other causes); time to the next belief. A
			// frozen or killed leader's recorded belief ends a moment before the
			// fault's stamp.
			if f.Leader == "" {
				continue
			}
			const tolerance = int64(50 * time.Millisecond)
			until := f.Heal + int64(b.Renew) + tolerance
			if i+1 < len(faults) {
				// A later loss belongs to the next fault, and so does one just before
				// it: a leader frozen or killed by the next fault was last seen
				// believing a moment before that fault's stamp.
				until = min(until, faults[i+1].Start-tolerance)
			}
			ended := int64(-1)
			for _, x := range bs {
				if x.Cand == f.Leader && x.Start <= f.Start && x.End >= f.Start-tolerance && x.End <= until {
					ended = x.End
				}
			}
			if ended < 0 {
				continue // the leader kept its lease through the fault
			}
			if next := leaderAt(bs, ended); next >= 0 {
				failover = max(failover, time.Duration(next-f.Start))
				r.FailedOverKeys++
			}
		}
		if back >= 0 {
			r.Liveness = append(r.Liveness, back)
		}
		if failover >= 0 {
			r.Failovers = append(r.Failovers, failover)
			if len(f.Kinds) > 0 {
				r.FailoversByKind[f.Kinds[0]] = append(r.FailoversByKind[f.Kinds[0]], failover)
			}
		}
	}
}

// Percentile returns the p-th percentile (0..100) of ds, nearest rank; 0 if empty.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// String renders the report as the soak summary.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trials: %d\n", r.Trials)
	if r.Keys > 1 {
		fmt.Fprintf(&b, "keys: %d, each checked on its own; failover and leader after heal are per fault, until the last key concerned was led again\n", r.Keys)
	}
	kinds := make([]string, 0, len(r.FaultsByKind))
	for k := range r.FaultsByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	b.WriteString("faults:")
	for _, k := range kinds {
		fmt.Fprintf(&b, " %s=%d", k, r.FaultsByKind[k])
	}
	b.WriteString("\n")
	var shifted []time.Duration
	for _, o := range r.ClockOffsets {
		if o > 0 {
			shifted = append(shifted, o)
		}
	}
	if len(r.ClockOffsets) == 0 {
		// candidates in one process (casleadertest.Cluster): one clock
	} else if len(shifted) > 0 {
		fmt.Fprintf(&b, "clock offsets: %d of %d candidates ran with CLOCK_MONOTONIC and CLOCK_BOOTTIME %v to %v ahead of the host's\n",
			len(shifted), len(r.ClockOffsets), slices.Min(shifted), slices.Max(shifted))
	} else {
		fmt.Fprintf(&b, "clock offsets: none of %d candidates\n", len(r.ClockOffsets))
	}
	fmt.Fprintf(&b, "actions checked: %d (rejected: local=%d database=%d error=%d)\n",
		r.ActionsChecked, r.Rejected["local"], r.Rejected["database"], r.Rejected["error"])
	count := func(vs []Violation, prop string) int {
		n := 0
		for _, v := range vs {
			if v.Property == prop {
				n++
			}
		}
		return n
	}
	fmt.Fprintf(&b, "violations: token-order=%d stale-action=%d belief-overlap=%d liveness=%d",
		count(r.Violations, "token-order"), count(r.Violations, "stale-action"), count(r.Violations, "belief-overlap"), count(r.Violations, "liveness"))
	if len(r.Fair) > 0 || r.FairUnjudged > 0 || count(r.Violations, "fairness") > 0 {
		fmt.Fprintf(&b, " fairness=%d", count(r.Violations, "fairness"))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "max belief overlap: %v\n", r.MaxOverlap)
	if len(r.Excused) > 0 || len(r.ClockOffsets) > 0 {
		fmt.Fprintf(&b, "excused belief overlaps (frozen process / rolled-back row; fencing still held): %d, max overlap stop=%v rollback=%v\n",
			count(r.Excused, "belief-overlap"), r.MaxOverlapExcused[StopLeader], r.MaxOverlapExcused[RollbackRow])
	}
	if r.Keys > 1 {
		fmt.Fprintf(&b, "keys failed over: %d\n", r.FailedOverKeys)
	}
	fmt.Fprintf(&b, "failover (fault to new leader, %d): p50=%v p99=%v max=%v\n", len(r.Failovers),
		Percentile(r.Failovers, 50).Round(time.Millisecond), Percentile(r.Failovers, 99).Round(time.Millisecond), Percentile(r.Failovers, 100).Round(time.Millisecond))
	kinds = kinds[:0]
	for k := range r.FailoversByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		ds := r.FailoversByKind[k]
		fmt.Fprintf(&b, "  %s (%d): p50=%v max=%v\n", k, len(ds), Percentile(ds, 50).Round(time.Millisecond), Percentile(ds, 100).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "leader after heal (%d): p50=%v p99=%v max=%v\n", len(r.Liveness),
		Percentile(r.Liveness, 50).Round(time.Millisecond), Percentile(r.Liveness, 99).Round(time.Millisecond), Percentile(r.Liveness, 100).Round(time.Millisecond))
	if len(r.Fair) > 0 || r.FairUnjudged > 0 {
		fmt.Fprintf(&b, "fair spread after each change of the candidates (%d, %d not judged): p50=%v p99=%v max=%v\n", len(r.Fair), r.FairUnjudged,
			Percentile(r.Fair, 50).Round(time.Millisecond), Percentile(r.Fair, 99).Round(time.Millisecond), Percentile(r.Fair, 100).Round(time.Millisecond))
		kinds := slices.Sorted(maps.Keys(r.FairByKind))
		for _, k := range kinds {
			ds := r.FairByKind[k]
			fmt.Fprintf(&b, "  %s (%d): p50=%v max=%v\n", k, len(ds), Percentile(ds, 50).Round(time.Millisecond), Percentile(ds, 100).Round(time.Millisecond))
		}
	}
	if r.Stalled > 0 {
		fmt.Fprintf(&b, "database stalled for the harness's probe: %v in all; most added to one liveness bound: %v\n",
			r.Stalled.Round(time.Millisecond), r.StallCredit.Round(time.Millisecond))
	}
	if len(r.Unled) > 0 {
		fmt.Fprintf(&b, "no leader with no fault active, beyond the liveness bound (a database that did not answer; not judged) (%d): max=%v\n",
			len(r.Unled), Percentile(r.Unled, 100).Round(time.Millisecond))
	}
	shown := map[string]bool{} // the interleaving of the first violation of each property
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION %s%s: %s\n", v.Property, v.onKey(), v.Detail)
		if !shown[v.Property] && v.Interleaving != "" {
			shown[v.Property] = true
			b.WriteString(v.Interleaving)
		}
	}
	for i, v := range r.Excused {
		if i == 10 {
			fmt.Fprintf(&b, "... %d more excused\n", len(r.Excused)-10)
			break
		}
		fmt.Fprintf(&b, "excused (%s) %s%s: %s\n", v.Excused, v.Property, v.onKey(), v.Detail)
	}
	return b.String()
}
