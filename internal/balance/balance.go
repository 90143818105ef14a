// Package balance decides which live candidate of a balanced group should lead each
// key: every live candidate leads its fair share of the keys, a key keeps its leader
// unless that leader leads more than its share or is gone (sticky assignment, as
// Kafka's cooperative-sticky assignor), and the keys that must move are spread
// evenly over the candidates below their share.
//
// The decision is a pure function of what every candidate can see (the keys, the
// leader of each key, the live candidates and their weights), so candidates that
// see the same thing decide the same thing without talking to each other. It only
// decides who should lead; the moves themselves are the election's safe handovers
// and elections, so a wrong or stale decision costs a move, never a second leader.
package balance

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Candidate is one live candidate of the group.
type Candidate struct {
	ID string
	// Weight is the candidate's share relative to the others': a candidate of
	// weight 2 leads twice the keys of one of weight 1. 0 or less leads none.
	Weight int
}

// member is a candidate with its quota and the keys it leads and keeps.
type member struct {
	Candidate
	quota int // keys it should lead: floor or ceiling of its exact share
	leads int // keys it leads now
	kept  int // keys it keeps
	rem   int // n·Weight mod W: its exact share is quota + rem/W before the +1
}

// Assign returns the candidate that should lead each key ("" when no candidate
// has weight), given the current leader of each key (missing or "" when the key
// has none, or its leader is not among cands). Each candidate of positive weight w
// gets ⌊N·w/W⌋ or ⌈N·w/W⌉ keys, where W is the sum of the weights: within one key
// of its share. A leader keeps its keys up to its quota; the +1 quotas go first
// to the candidates that already lead more than their floor, so no key moves to
// fix what is already fair. The rest (keys of a leader above its quota, keys
// without a live leader) go, in a fixed pseudo-random order, each to the
// candidate furthest below its quota.
func Assign(keys []string, leaders map[string]string, cands []Candidate) map[string]string {
	keys = ranked(keys)
	ms, byID := members(cands)
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		if m := byID[leaders[k]]; m != nil {
			m.leads++
		}
	}
	setQuotas(len(keys), ms)
	var pool []string
	for _, k := range keys {
		if m := byID[leaders[k]]; m != nil && m.kept < m.quota {
			out[k] = m.ID
			m.kept++
			continue
		}
		pool = append(pool, k)
	}
	fill(out, pool, ms)
	return out
}

// members returns the candidates of positive weight, once each, sorted by ID.
func members(cands []Candidate) ([]*member, map[string]*member) {
	byID := make(map[string]*member, len(cands))
	var ms []*member
	for _, c := range cands {
		if c.Weight > 0 && byID[c.ID] == nil {
			m := &member{Candidate: c}
			byID[c.ID] = m
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.ID, b.ID) })
	return ms, byID
}

// setQuotas gives each member the floor of its exact share of n keys, then one
// more to as many as the floors leave keys, among those whose share is not a whole
// number: first those that lead more than their floor now (so that they keep a
// key rather than move it), then by the largest fractional part, then by ID.
func setQuotas(n int, ms []*member) {
	total := 0
	for _, m := range ms {
		total += m.Weight
	}
	if total == 0 {
		return
	}
	left := n
	var order []*member
	for _, m := range ms {
		m.quota, m.rem = n*m.Weight/total, n*m.Weight%total
		left -= m.quota
		if m.rem > 0 {
			order = append(order, m)
		}
	}
	slices.SortStableFunc(order, func(a, b *member) int {
		return cmp.Or(
			-cmp.Compare(boolInt(a.leads > a.quota), boolInt(b.leads > b.quota)),
			-cmp.Compare(a.rem, b.rem),
			cmp.Compare(a.ID, b.ID))
	})
	for _, m := range order[:left] {
		m.quota++
	}
}

// fill gives each key of pool to the member furthest below its quota (ties: the
// smaller ID), or "" when there is no member.
func fill(out map[string]string, pool []string, ms []*member) {
	for _, k := range pool {
		var best *member
		for _, m := range ms {
			if m.kept < m.quota && (best == nil || m.quota-m.kept > best.quota-best.kept) {
				best = m
			}
		}
		if best == nil {
			out[k] = ""
			continue
		}
		out[k] = best.ID
		best.kept++
	}
}

// ranked returns keys once each, ordered by a hash of the key, so that the keys a
// candidate keeps or gives away are spread over the key space rather than taken
// from one end of it.
func ranked(keys []string) []string {
	type rk struct {
		rank uint64
		key  string
	}
	rs := make([]rk, len(keys))
	for i, k := range keys {
		h := fnv.New64a()
		h.Write([]byte(k))
		rs[i] = rk{h.Sum64(), k}
	}
	slices.SortFunc(rs, func(a, b rk) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.key, b.key)) })
	out := make([]string, 0, len(rs))
	for i, r := range rs {
		if i == 0 || r.key != rs[i-1].key {
			out = append(out, r.key)
		}
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Shed returns the keys that candidate me should hand over, each with the
// candidate to hand it to: the keys me leads beyond its quota (the same quotas
// and the same kept keys as Assign; all of them when me is not among cands), each
// to the candidate furthest below its quota by the leaders given. Unlike Assign,
// the keys other candidates must give away do not use up anyone's room: each
// leader sheds only its own keys, and a newcomer below its quota by all of them is
// the target of all of them, even when their views of one another differ a little.
func Shed(keys []string, leaders map[string]string, cands []Candidate, me string) map[string]string {
	keys = ranked(keys)
	ms, byID := members(cands)
	for _, k := range keys {
		if m := byID[leaders[k]]; m != nil {
			m.leads++
		}
	}
	setQuotas(len(keys), ms)
	quota := 0
	if m := byID[me]; m != nil {
		quota = m.quota
	}
	out := map[string]string{}
	var surplus []string
	for _, k := range keys {
		if leaders[k] == me {
			if quota > 0 {
				quota--
			} else {
				surplus = append(surplus, k)
			}
		}
	}
	for _, m := range ms {
		m.kept = min(m.leads, m.quota)
	}
	for _, k := range surplus {
		out[k] = ""
	}
	fill(out, surplus, ms)
	return out
}
