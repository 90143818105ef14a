package casleadertest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Share is a moment from which the keys of a balanced group (GroupConfig.Balance)
// must be spread fairly over Among, the candidates that are live, not paused and
// connected then: a candidate joined, left, died, was paused or cut off, or came
// back. The spread is fair when every key is led by a candidate of Among and each of
// them leads ⌊N/M⌋ or ⌈N/M⌉ of the N keys (M = len(Among)): within one key of N/M.
// It must be so within Within of At, not counting the time History.Stalls cover.
type Share struct {
	At     int64         // CLOCK_MONOTONIC (see [Mono])
	Among  []string      // the candidates that share the keys from At
	Within time.Duration // the bound the design gives this change (see [ProcessCluster.RunBalanced])
	Kind   string        // the event's kind, e.g. [Join] or [KillLeader], for the report
	Cause  string        // the event, e.g. "kill-leader c2.5"
}

// checkFairness judges each of h.Shares: the first instant, from its At and before
// the next share's, at which the beliefs show a fair spread over its Among. It
// records that time in r.Fair, and a "fairness" violation when the spread was not
// fair within the bound (extended by the stalls, as the liveness bound is). A
// share whose bound the next share or the end of the run cut short, and that was
// not fair by then, is not judged (counted in r.FairUnjudged).
func checkFairness(h History, keys []string, r *Report) {
	shares := slices.Clone(h.Shares)
	sort.SliceStable(shares, func(i, j int) bool { return shares[i].At < shares[j].At })
	for i, s := range shares {
		bound := time.Duration(extend(h.Stalls, s.At, s.Within) - s.At)
		until := s.At + int64(bound)
		cut := int64(-1) // when the next share or the end of the run came before the bound
		if i+1 < len(shares) && shares[i+1].At < until {
			cut = shares[i+1].At
		}
		if h.End != 0 && h.End < until && (cut < 0 || h.End < cut) {
			cut = h.End
		}
		to := until
		if cut >= 0 {
			to = cut
		}
		at, spread := firstFair(h.Beliefs, keys, s.Among, s.At, to)
		switch {
		case at >= 0:
			r.Fair = append(r.Fair, time.Duration(at-s.At))
			if r.FairByKind == nil {
				r.FairByKind = map[string][]time.Duration{}
			}
			r.FairByKind[s.Kind] = append(r.FairByKind[s.Kind], time.Duration(at-s.At))
		case cut >= 0:
			r.FairUnjudged++
		default:
			r.add(Violation{Property: "fairness", Detail: fmt.Sprintf(
				"the keys were not spread within one of %d/%d over %v within %v of %s (bound %v); at the end: %s",
				len(keys), len(s.Among), s.Among, bound.Round(time.Millisecond), s.Cause, s.Within, spread)})
		}
	}
}

// firstFair returns the first instant in [from, to] at which every key is led by
// one of among and each of among leads ⌊N/M⌋ or ⌈N/M⌉ keys, or -1 with the spread
// at to, described.
func firstFair(beliefs []Interval, keys, among []string, from, to int64) (int64, string) {
	type edge struct {
		at    int64
		key   string
		cand  string
		start bool
	}
	leaders := map[string]map[string]bool{} // key: candidates believing they lead it
	for _, k := range keys {
		leaders[k] = map[string]bool{}
	}
	var edges []edge
	for _, b := range beliefs {
		if leaders[b.Key] == nil || b.End < from || b.Start > to {
			continue
		}
		if b.Start <= from {
			leaders[b.Key][b.Cand] = true
		} else {
			edges = append(edges, edge{b.Start, b.Key, b.Cand, true})
		}
		if b.End < to {
			// Ended after its last sample: it no longer leads just after End.
			edges = append(edges, edge{b.End + 1, b.Key, b.Cand, false})
		}
	}
	sort.SliceStable(edges, func(i, j int) bool { return edges[i].at < edges[j].at })
	fair := func() (bool, string) { return fairSpread(leaders, among) }
	if ok, _ := fair(); ok {
		return from, ""
	}
	for i := 0; i < len(edges); {
		at := edges[i].at
		for ; i < len(edges) && edges[i].at == at; i++ {
			e := edges[i]
			if e.start {
				leaders[e.key][e.cand] = true
			} else {
				delete(leaders[e.key], e.cand)
			}
		}
		if ok, _ := fair(); ok {
			return at, ""
		}
	}
	_, spread := fair()
	return -1, spread
}

// fairSpread reports whether each key has one leader, of among, and each of among
// leads ⌊N/M⌋ or ⌈N/M⌉ keys; else it describes the spread.
func fairSpread(leaders map[string]map[string]bool, among []string) (bool, string) {
	n := map[string]int{}
	unled, others := 0, 0
	for _, cs := range leaders {
		if len(cs) != 1 {
			unled++ // none, or several
			continue
		}
		for c := range cs {
			if slices.Contains(among, c) {
				n[c]++
			} else {
				others++
			}
		}
	}
	if len(among) == 0 {
		return false, "no candidate to share the keys"
	}
	lo := len(leaders) / len(among)
	hi := (len(leaders) + len(among) - 1) / len(among)
	ok := unled == 0 && others == 0
	var parts []string
	for _, c := range among {
		ok = ok && n[c] >= lo && n[c] <= hi
		parts = append(parts, fmt.Sprintf("%s=%d", c, n[c]))
	}
	return ok, fmt.Sprintf("%s, %d keys without one leader, %d led by others", strings.Join(parts, " "), unled, others)
}
