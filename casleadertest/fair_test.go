package casleadertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spreadHistory is four keys led two by a and two by b from 0 to 10 s; at 10 s c
// joins and b hands it key k3 at 11 s (fair over a, b, c: 2, 1, 1), and only at
// 15 s does a hand it k1, too late for a bound of 3 s if the share needs c to
// take one of a's keys.
func spreadHistory() History {
	return History{
		Keys: []string{"k1", "k2", "k3", "k4"},
		Beliefs: []Interval{
			{"a", 1, 0, 15 * s, "k1"}, {"c", 5, 15*s + 1, 20 * s, "k1"},
			{"a", 2, 0, 20 * s, "k2"},
			{"b", 3, 0, 11 * s, "k3"}, {"c", 6, 11*s + 1, 20 * s, "k3"},
			{"b", 4, 0, 20 * s, "k4"},
		},
		End: 20 * s,
	}
}

func TestCheckMeasuresTheTimeToAFairSpread(t *testing.T) {
	h := spreadHistory()
	h.Shares = []Share{
		{At: 0, Among: []string{"a", "b"}, Within: 3 * time.Second, Cause: "start"},
		{At: 10 * s, Among: []string{"a", "b", "c"}, Within: 3 * time.Second, Cause: "join c"},
	}
	r := Check(h, bounds)
	require.True(t, r.OK(), "%v", r.Violations)
	assert.Equal(t, []time.Duration{0, time.Second + 1}, r.Fair, "fair at once, then when c took k3 (4 keys over 3: 1 or 2 each)")
	assert.Contains(t, r.String(), "fair spread after each change of the candidates (2, 0 not judged)")
}

func TestCheckFindsASpreadThatIsNotFairInTime(t *testing.T) {
	h := spreadHistory()
	// Over a and c alone (b left at 10 s): fair only once c took k1 at 15 s, and b's
	// k4 is never led by one of them.
	h.Shares = []Share{{At: 10 * s, Among: []string{"a", "c"}, Within: 3 * time.Second, Cause: "leave b"}}
	r := Check(h, bounds)
	require.Equal(t, []string{"fairness"}, props(r.Violations))
	assert.Contains(t, r.Violations[0].Detail, "within one of 4/2 over [a c] within 3s of leave b")
	assert.Contains(t, r.Violations[0].Detail, "a=2 c=1, 0 keys without one leader, 1 led by others")
	assert.Contains(t, r.String(), "fairness=1")
}

func TestCheckCountsAKeyWithoutALeaderAsUnfair(t *testing.T) {
	h := History{
		Keys:    []string{"k1", "k2"},
		Beliefs: []Interval{{"a", 1, 0, 10 * s, "k1"}, {"b", 2, 0, 2 * s, "k2"}, {"b", 3, 8 * s, 10 * s, "k2"}},
		Shares:  []Share{{At: 1 * s, Among: []string{"a", "b"}, Within: 2 * time.Second, Cause: "pause b"}},
		End:     10 * s,
	}
	r := Check(h, bounds)
	assert.Equal(t, []time.Duration{0}, r.Fair, "fair at the share's start")
	h.Shares[0].At = 3 * s // k2 has no leader from 2 s to 8 s
	r = Check(h, bounds)
	require.Equal(t, []string{"fairness"}, props(r.Violations))
	assert.Contains(t, r.Violations[0].Detail, "a=1 b=0, 1 keys without one leader")
}

func TestCheckDoesNotJudgeAShareCutShort(t *testing.T) {
	h := spreadHistory()
	h.Shares = []Share{
		{At: 10 * s, Among: []string{"a", "c"}, Within: 3 * time.Second, Cause: "leave b"},
		{At: 12 * s, Among: []string{"a", "b", "c"}, Within: 3 * time.Second, Cause: "join b"},
	}
	r := Check(h, bounds)
	require.True(t, r.OK(), "%v", r.Violations)
	assert.Equal(t, 1, r.FairUnjudged, "the next share came before the bound")
	assert.Equal(t, []time.Duration{0}, r.Fair, "a=2 b=1 c=1 at once")
}

func TestCheckLengthensTheFairnessBoundByStalls(t *testing.T) {
	h := spreadHistory()
	h.Shares = []Share{{At: 10 * s, Among: []string{"a", "c"}, Within: 3 * time.Second, Cause: "leave b"}}
	h.Beliefs = append(h.Beliefs[:5], Interval{"b", 4, 0, 14 * s, "k4"}, Interval{"c", 7, 14*s + 1, 20 * s, "k4"})
	require.Equal(t, []string{"fairness"}, props(Check(h, bounds).Violations), "fair only once c took k4 at 14 s")
	h.Stalls = []Stall{{Start: 10 * s, End: 12 * s}}
	r := Check(h, bounds)
	require.True(t, r.OK(), "%v", r.Violations)
	assert.Equal(t, []time.Duration{4*time.Second + 1}, r.Fair)
}
