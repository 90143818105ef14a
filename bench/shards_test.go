package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestCoverage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name string
		ivs  []interval
		gap  time.Duration
		most int
	}{
		{"NothingLedIsOneGap", nil, time.Second, 0},
		{"HandoverLeavesTheGapBetween", []interval{{"a", at(-50), at(300)}, {"b", at(340), at(2000)}}, 40 * time.Millisecond, 1},
		{"TouchingIsNoOverlap", []interval{{"a", at(0), at(500)}, {"b", at(500), at(1000)}}, 0, 1},
		{"OverlapIsTwoLeaders", []interval{{"a", at(0), at(600)}, {"b", at(500), at(1000)}}, 0, 2},
		{"UnledEndCounts", []interval{{"a", at(0), at(100)}}, 900 * time.Millisecond, 1},
		{"OutsideTheWindowIsIgnored", []interval{{"a", at(-500), at(-100)}, {"b", at(1200), at(1300)}}, time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gap, most := coverage(tc.ivs, at(0), at(1000))
			if gap != tc.gap || most != tc.most {
				t.Errorf("coverage = gap %v, most %d; want %v, %d", gap, most, tc.gap, tc.most)
			}
		})
	}
}

func TestMinMoves(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		leads map[string]int
		live  []string
		want  int
	}{
		{"FirstStartTakesAll", 1000, nil, []string{"c1"}, 1000},
		{"JoinTakesItsShare", 1000, map[string]int{"c1": 500, "c2": 500}, []string{"c1", "c2", "c3"}, 333},
		{"DeadLeadersKeysMove", 60, map[string]int{"c1": 15, "c2": 15, "c3": 15, "c4": 15}, []string{"c1", "c3", "c4"}, 15},
		{"FairStaysPut", 1000, map[string]int{"c1": 334, "c3": 333, "c4": 333}, []string{"c1", "c3", "c4"}, 0},
		{"SurplusAboveTheCeilingMoves", 10, map[string]int{"a": 7, "b": 3}, []string{"a", "b"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := minMoves(tc.n, tc.leads, tc.live); got != tc.want {
				t.Errorf("minMoves = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestFair(t *testing.T) {
	tr := newShardTracker(5)
	lines := []struct{ id, line string }{
		{"a", "+ 0 1"}, {"a", "+ 1 1"}, {"a", "+ 2 1"}, {"b", "+ 3 1"},
	}
	for _, l := range lines {
		if err := tr.apply(l.id, l.line); err != nil {
			t.Fatal(err)
		}
	}
	if tr.fair([]string{"a", "b"}) {
		t.Fatal("fair with key 4 not led")
	}
	if err := tr.apply("b", "+ 4 1"); err != nil {
		t.Fatal(err)
	}
	if !tr.fair([]string{"a", "b"}) {
		t.Fatal("3 and 2 of 5 keys over two candidates is fair, but fair said no")
	}
	if tr.fair([]string{"a", "b", "c"}) {
		t.Fatal("fair with c leading nothing of 5 keys over three")
	}
	if err := tr.apply("b", "+ 0 2"); err != nil {
		t.Fatal(err)
	}
	if tr.fair([]string{"a", "b"}) {
		t.Fatal("fair with key 0 led by two candidates")
	}
	if err := tr.apply("b", "- 0 3"); err != nil {
		t.Fatal(err)
	}
	if err := tr.apply("a", ". 5 0"); err != nil {
		t.Fatal(err)
	}
	tr.closeAll("a") // killed: its intervals end at its last sweep's start
	if gap, most, taken := tr.window(time.Unix(0, 0), time.Unix(0, 10)); most != 2 || gap != 5 || taken != 6 {
		t.Errorf("window = gap %v, most %d, taken %d; want 5ns (keys 1, 2 after a's end), 2 (key 0 from 2 to 3), 6", gap, most, taken)
	}
}

func TestShardsTableReadsBackJSON(t *testing.T) {
	r := result{Scenario: "shards", System: "casleader-group/SQLite", Params: map[string]any{"event": "kill c2", "database": "SQLite", "lease_s": 5.0, "led": map[string]int{"c1": 500, "c3": 500}},
		Values: map[string]float64{"moved": 250, "min_moves": 250, "max_gap_ms": 5012, "fair_ms": 5020, "max_leaders": 1, "cpu_percent_c1": 4.5, "cpu_percent_c3": 4.25}}
	var b bytes.Buffer
	if err := writeJSONL(&b, []result{r}); err != nil {
		t.Fatal(err)
	}
	var back result
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, rs := range [][]result{{r}, {back}} {
		var md bytes.Buffer
		shardsTable(&md, rs)
		want := "| SQLite | kill c2 | c1 500, c3 500 | 250 (250) | 5012 | 5020 | 1 | c1 4.50, c3 4.25 |"
		if !strings.Contains(md.String(), want) {
			t.Errorf("table:\n%s\nwant a row starting %q", md.String(), want)
		}
	}
}

func TestShardEventsTogether(t *testing.T) {
	s := &shardsRun{}
	var names []string
	for _, ev := range s.events(shardsOptions{Lease: time.Second, Together: true, Steady: time.Minute}) {
		names = append(names, ev.name)
		if ev.name == "steady" && ev.hold != time.Minute {
			t.Errorf("steady holds %v, want -shards-steady (1m)", ev.hold)
		}
	}
	want := "start c1-c4,steady,kill c2,stop c3,restart c3"
	if got := strings.Join(names, ","); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	if n := len(s.events(shardsOptions{Lease: time.Second})); n != 7 {
		t.Errorf("%d events one by one, want 7", n)
	}
}

func TestServerRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := serverCounters{statements: 100, rows: 1000, cpu: map[int]time.Duration{1: time.Second, 2: 5 * time.Second}, at: t0, ok: true}
	b := serverCounters{statements: 300, rows: 5000, cpu: map[int]time.Duration{1: 2 * time.Second, 3: time.Second}, at: t0.Add(4 * time.Second), ok: true}
	st, rows, cpu, ok := rates(a, b)
	if !ok || st != 50 || rows != 1000 || cpu != 50 {
		t.Errorf("rates = %v, %v, %v, %v; want 50, 1000, 50 (pid 1: 1 s, pid 3 new: 1 s, pid 2 gone), true", st, rows, cpu, ok)
	}
	if _, _, _, ok := rates(serverCounters{}, b); ok {
		t.Error("rates from a failed reading said ok")
	}
	if _, _, _, ok := rates(a, (*serverStats)(nil).sample(t.Context())); ok {
		t.Error("rates without a server (SQLite) said ok")
	}
}
