package balance

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func keysN(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("tenant-%d", i)
	}
	return ks
}

func cands(ids ...string) []Candidate {
	cs := make([]Candidate, len(ids))
	for i, id := range ids {
		cs[i] = Candidate{ID: id, Weight: 1}
	}
	return cs
}

func counts(a map[string]string) map[string]int {
	c := map[string]int{}
	for _, id := range a {
		c[id]++
	}
	return c
}

func moves(before, after map[string]string) int {
	n := 0
	for k, id := range after {
		if before[k] != id {
			n++
		}
	}
	return n
}

// TestSpreadAndRebalance is the shards issue's scenario: three candidates over 300
// keys end with 100 each; a fourth joining ends with 75 each having moved only the
// keys it needs; a leaver's keys are spread evenly over the others.
func TestSpreadAndRebalance(t *testing.T) {
	keys := keysN(300)
	a := Assign(keys, nil, cands("a", "b", "c"))
	assert.Equal(t, map[string]int{"a": 100, "b": 100, "c": 100}, counts(a))

	b := Assign(keys, a, cands("a", "b", "c", "d"))
	assert.Equal(t, map[string]int{"a": 75, "b": 75, "c": 75, "d": 75}, counts(b))
	assert.Equal(t, 75, moves(a, b), "only the newcomer's share moves")
	for k, id := range b {
		if a[k] != id {
			assert.Equal(t, "d", id, "a key moves only to the newcomer")
		}
	}

	c := Assign(keys, b, cands("b", "c", "d")) // a left or died
	assert.Equal(t, map[string]int{"b": 100, "c": 100, "d": 100}, counts(c))
	assert.Equal(t, 75, moves(b, c), "only the leaver's keys move")
	got := map[string]int{}
	for k, id := range c {
		if b[k] == "a" {
			got[id]++
		}
	}
	assert.Equal(t, map[string]int{"b": 25, "c": 25, "d": 25}, got, "the leaver's keys are spread evenly")
}

func TestWeights(t *testing.T) {
	a := Assign(keysN(400), nil, []Candidate{{"big", 2}, {"s1", 1}, {"s2", 1}, {"off", 0}})
	assert.Equal(t, map[string]int{"big": 200, "s1": 100, "s2": 100}, counts(a))
}

func TestNoCandidateLeadsNothing(t *testing.T) {
	a := Assign(keysN(3), map[string]string{"tenant-1": "gone"}, nil)
	assert.Equal(t, map[string]string{"tenant-0": "", "tenant-1": "", "tenant-2": ""}, a)
}

// TestProperties checks, over random groups: each candidate within one key of its
// exact share; no more moves than the keys without a live leader plus each
// leader's keys above its quota; a second pass moves nothing; the same decision
// whatever the order of the inputs.
func TestProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		n, m := r.IntN(200), 1+r.IntN(9)
		keys := keysN(n)
		var cs []Candidate
		total := 0
		for j := range m {
			c := Candidate{ID: fmt.Sprintf("c%d", j), Weight: r.IntN(4)}
			total += c.Weight
			cs = append(cs, c)
		}
		leaders := map[string]string{}
		for _, k := range keys {
			if r.IntN(5) > 0 {
				leaders[k] = fmt.Sprintf("c%d", r.IntN(m+2)) // some leaders are gone
			}
		}
		got := Assign(keys, leaders, cs)
		require.Len(t, got, n, "case %d", i)
		checkFair(t, i, n, total, cs, got)
		if total > 0 {
			assert.Equal(t, mustMove(n, total, keys, leaders, cs), moves(leaders, got), "case %d: the fewest moves", i)
		}
		assert.Zero(t, moves(got, Assign(keys, got, cs)), "case %d: a fair spread is left alone", i)
		r.Shuffle(len(keys), func(a, b int) { keys[a], keys[b] = keys[b], keys[a] })
		r.Shuffle(len(cs), func(a, b int) { cs[a], cs[b] = cs[b], cs[a] })
		assert.Equal(t, got, Assign(keys, leaders, cs), "case %d: the order of the inputs matters", i)
	}
}

func checkFair(t *testing.T, i, n, total int, cs []Candidate, got map[string]string) {
	t.Helper()
	c := counts(got)
	for _, cand := range cs {
		if total == 0 {
			break
		}
		share := float64(n) * float64(cand.Weight) / float64(total)
		assert.Less(t, math.Abs(float64(c[cand.ID])-share), 1.0, "case %d: %s leads %d keys, share %.2f", i, cand.ID, c[cand.ID], share)
	}
	if total == 0 {
		assert.Equal(t, n, c[""], "case %d: without weight nobody leads", i)
	}
}

// mustMove is the fewest moves a fair spread needs: keys without a live leader of
// positive weight, plus each leader's keys above the floor of its share, less one
// for each leader above its floor that can have the ceiling (one per key the
// floors leave, among candidates whose share is not whole).
func mustMove(n, total int, keys []string, leaders map[string]string, cs []Candidate) int {
	w := map[string]int{}
	for _, c := range cs {
		w[c.ID] = c.Weight
	}
	led := map[string]int{}
	out := 0
	for _, k := range keys {
		if id := leaders[k]; w[id] > 0 {
			led[id]++
		} else {
			out++
		}
	}
	left, over := n, 0
	for id, wt := range w {
		if wt <= 0 {
			continue
		}
		floor := n * wt / total
		left -= floor
		out += max(0, led[id]-floor)
		if led[id] > floor && n*wt%total > 0 {
			over++
		}
	}
	return out - min(left, over)
}

// TestShedSendsEachLeadersSurplusToTheNewcomer: when a fourth candidate joins
// three that lead 100 keys each, each of the three sheds 25 keys, all to the
// newcomer, even when one of them sees another with a few keys less than it has.
func TestShedSendsEachLeadersSurplusToTheNewcomer(t *testing.T) {
	keys := keysN(300)
	before := Assign(keys, nil, cands("a", "b", "c"))
	all := cands("a", "b", "c", "d")
	got := map[string]int{}
	for _, me := range []string{"a", "b", "c"} {
		view := maps.Clone(before)
		n := 0
		for k, id := range view {
			if id != me && n < 10 {
				view[k] = "" // keys of the others it has not read since they moved
				n++
			}
		}
		shed := Shed(keys, view, all, me)
		assert.Len(t, shed, 25, "%s sheds its surplus", me)
		for k, to := range shed {
			assert.Equal(t, me, before[k], "%s sheds only its own keys", me)
			got[to]++
		}
	}
	assert.Equal(t, map[string]int{"d": 75}, got)
	assert.Empty(t, Shed(keys, before, all, "d"), "a candidate below its quota sheds nothing")
}

// TestShedOnExitSpreadsEveryKey: a candidate that leaves sheds all its keys,
// spread evenly over the others.
func TestShedOnExitSpreadsEveryKey(t *testing.T) {
	keys := keysN(300)
	before := Assign(keys, nil, cands("a", "b", "c", "d"))
	shed := Shed(keys, before, cands("a", "b", "c"), "d")
	assert.Len(t, shed, 75)
	got := map[string]int{}
	for _, to := range shed {
		got[to]++
	}
	assert.Equal(t, map[string]int{"a": 25, "b": 25, "c": 25}, got)
}
