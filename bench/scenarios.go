package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// result is one measurement, written as one JSON line.
type result struct {
	Scenario string             `json:"scenario"`
	System   string             `json:"system"`
	Trial    int                `json:"trial"`
	Params   map[string]any     `json:"params,omitempty"`
	Values   map[string]float64 `json:"values"`
	Error    string             `json:"error,omitempty"`
}

// timeline is what one trial looked like, for the SVG.
type timeline struct {
	System   string
	Zoom     bool // a close-up of the events from ZoomFrom on
	ZoomFrom int
	Rows     []string
	Spans    map[string][][2]time.Time // candidate -> leading intervals
	Events   []event
}

type event struct {
	At    time.Time
	Label string
}

// sampler records who believes it leads, every 250 µs.
type sampler struct {
	mu    sync.Mutex
	cs    []candidate
	spans map[string][][2]time.Time
	open  map[string]time.Time
	stop  chan struct{}
	done  chan struct{}
}

func sample(cs []candidate) *sampler {
	s := &sampler{cs: cs, spans: map[string][][2]time.Time{}, open: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(250 * time.Microsecond)
		defer t.Stop()
		for {
			now := time.Now()
			s.mu.Lock()
			for _, c := range s.cs {
				_, was := s.open[c.ID()]
				is := c.IsLeader()
				switch {
				case is && !was:
					s.open[c.ID()] = now
				case !is && was:
					s.spans[c.ID()] = append(s.spans[c.ID()], [2]time.Time{s.open[c.ID()], now})
					delete(s.open, c.ID())
				}
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) finish() map[string][][2]time.Time {
	close(s.stop)
	<-s.done
	now := time.Now()
	for id, at := range s.open {
		s.spans[id] = append(s.spans[id], [2]time.Time{at, now})
	}
	return s.spans
}

// leaders returns the candidates that believe they lead.
func leaders(cs []candidate) []candidate {
	var out []candidate
	for _, c := range cs {
		if c.IsLeader() {
			out = append(out, c)
		}
	}
	return out
}

// waitOne waits until exactly one of cs leads.
func waitOne(cs []candidate, timeout time.Duration) (candidate, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ls := leaders(cs); len(ls) == 1 {
			return ls[0], nil
		}
		time.Sleep(200 * time.Microsecond)
	}
	return nil, fmt.Errorf("no single leader within %v (%d lead)", timeout, len(leaders(cs)))
}

func startN(ctx context.Context, sys system, key string, n int) ([]candidate, error) {
	var cs []candidate
	for i := range n {
		c, err := sys.Start(ctx, key, fmt.Sprintf("c%02d", i))
		if err != nil {
			stopAll(cs)
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func stopAll(cs []candidate) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(c.Stop)
	}
	wg.Wait()
}

func others(cs []candidate, not candidate) []candidate {
	var out []candidate
	for _, c := range cs {
		if c != not {
			out = append(out, c)
		}
	}
	return out
}

// handover: three candidates; the leader resigns; how long after the release is
// committed (its reply) does the next leader win (its write's reply)?
func handover(ctx context.Context, sys system, t timing, trial int) (result, *timeline) {
	r := result{Scenario: "handover", System: sys.Name(), Trial: trial, Values: map[string]float64{}}
	key := randName("handover")
	cs, err := startN(ctx, sys, key, 3)
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	defer stopAll(cs)
	l, err := waitOne(cs, 15*time.Second)
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	// Wake-ups take a few round trips to start (a listener's connection and
	// self-test): measure the handover, not their start.
	for _, c := range cs {
		if r, ok := c.(interface{ Ready() bool }); ok {
			for deadline := time.Now().Add(10 * time.Second); !r.Ready() && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
	}
	awaitSuccessor(sys, l, t)
	smp := sample(cs)
	time.Sleep(t.Lease / 2)
	resignAt := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	rest := others(cs, l)
	hs, handsOver := sys.(interface{ HandsOver() bool })
	handsOver = handsOver && hs.HandsOver()
	if h, ok := l.(interface {
		HandoverTo(context.Context, string) error
	}); ok && handsOver {
		err = h.HandoverTo(rctx, rest[0].ID())
	} else {
		err = l.Resign(rctx)
	}
	cancel()
	if err != nil {
		smp.finish()
		r.Error = err.Error()
		return r, nil
	}
	lm := l.Marks()
	released := lm.Released
	w, err := waitOne(rest, t.Lease+10*time.Second)
	time.Sleep(20 * time.Millisecond)
	spans := smp.finish()
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	wm := w.Marks()
	won := wm.Won
	if handsOver {
		// The target wins no write: it reads the row that names it and leads.
		if w.ID() != rest[0].ID() {
			r.Error = fmt.Sprintf("the lease was handed to %s, but %s leads", rest[0].ID(), w.ID())
			return r, nil
		}
		won = wm.Led
	}
	if won.Before(lm.ReleaseSent) && !wm.Led.Before(lm.ReleaseSent) {
		won = wm.Led // a term handed to its process: led from a read, with no write
	}
	if released.IsZero() {
		r.Error = "the release was not recorded"
		return r, nil
	}
	r.Values["after_release_ms"] = ms(won.Sub(released))
	r.Values["after_resign_call_ms"] = ms(won.Sub(resignAt))
	breakdown(r.Values, lm, wm)
	// Split the winning election's round trip at its execution: the row's tick_time
	// is the database clock when the statement ran, and the database runs on this
	// host, so its clock is the one time.Now reads (wall clock). Read before the
	// new leader's first renewal (a heartbeat away) moves it.
	if cas, ok := sys.(*casSystem); ok && cas.executed != nil && r.Values["elect_rtt_ms"] > 0 {
		xctx, cancel := context.WithTimeout(ctx, time.Second)
		at, err := cas.executed(xctx, key)
		cancel()
		var win call
		for _, c := range wm.Calls {
			if c.OK && !c.Done.After(won) && (c.Op == "elect" || c.Op == "elect released") {
				win = c
			}
		}
		if err == nil && !win.Sent.IsZero() && !at.Before(win.Sent.Round(0).Add(-time.Second)) && !at.After(win.Done.Round(0).Add(time.Second)) {
			r.Values["elect_executed_after_send_ms"] = ms(at.Sub(win.Sent.Round(0)))
			r.Values["elect_reply_after_executed_ms"] = ms(win.Done.Round(0).Sub(at))
		}
	}
	tl := &timeline{System: sys.Name(), Spans: spans,
		Events: []event{{resignAt, "resign called"}, {released, "release committed"}, {won, "next leader won"}}}
	for _, c := range cs {
		tl.Rows = append(tl.Rows, c.ID())
	}
	return r, tl
}

// awaitSuccessor waits, for a system whose leader resigns to a live follower,
// until the leader's members reads (one per half lease, of the keys it leads)
// have shown a follower: only then does its resign hand the lease on.
func awaitSuccessor(sys system, l candidate, t timing) {
	k, ok := l.(interface{ KnowsSuccessor() bool })
	if !ok || !strings.Contains(sys.Name(), "resign to") {
		return
	}
	for deadline := time.Now().Add(3 * t.Lease); !k.KnowsSuccessor() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// breakdown splits a casleader handover (the winner's marks w, the resigning
// leader's l) into where its time went, from the reply of the release:
//
//   - release_rtt_ms: the release write's own round trip (its commit), for scale;
//   - wake_ms: until the winner's notifier delivered its wake-up to the elector
//     (negative when the wake-up arrived before the leader had handled the
//     release's reply);
//   - reads_after_wake, elections_after_wake: the winner's statements from the
//     wake-up to its win (the round trips after the wake-up);
//   - read_ms: the time those reads took;
//   - follower_ms: the rest of the time between the wake-up and the winning
//     election's send: the winner's own scheduling and processing;
//   - elect_rtt_ms: the winning election's round trip, send to reply.
//
// A trial without a recorded wake-up (a follower that found the release by a
// read, a system without notifier) gets only release_rtt_ms and elect_rtt_ms.
func breakdown(v map[string]float64, l, w marks) {
	if !l.ReleaseSent.IsZero() {
		v["release_rtt_ms"] = ms(l.Released.Sub(l.ReleaseSent))
	}
	var win *call
	for i := range w.Calls {
		if c := &w.Calls[i]; c.OK && (c.Op == "elect" || c.Op == "elect released") && !c.Done.After(w.Won) {
			win = c
		}
	}
	// end: when the follower had what it needed to lead, the winning election's
	// send; for a lease handed to it, when it started leading.
	var end time.Time
	switch {
	case win != nil:
		end = win.Sent
		v["elect_rtt_ms"] = ms(win.Done.Sub(win.Sent))
		if win.Op == "elect released" {
			v["elect_released"] = 1
		}
	case !w.Led.IsZero() && !w.Led.Before(l.ReleaseSent) && w.Won.Before(l.ReleaseSent):
		end = w.Led // handed over
	default:
		return
	}
	// The wake-up: the last one delivered before end, and not before the release
	// was sent.
	var woke time.Time
	for _, t := range w.Wakes {
		if !t.Before(l.ReleaseSent) && !t.After(end) {
			woke = t
		}
	}
	if woke.IsZero() || l.ReleaseSent.IsZero() {
		return
	}
	v["wake_ms"] = ms(woke.Sub(l.Released))
	var reads, elections float64
	var busy time.Duration
	for _, c := range w.Calls {
		if c.Sent.Before(woke) || c.Sent.After(end) {
			continue
		}
		switch c.Op {
		case "observe":
			reads++
			v["read_ms"] += ms(c.Done.Sub(c.Sent))
			busy += c.Done.Sub(c.Sent)
		case "elect", "elect released":
			elections++
			if win == nil || c.Sent != win.Sent {
				busy += c.Done.Sub(c.Sent)
			}
		}
	}
	v["reads_after_wake"] = reads
	v["elections_after_wake"] = elections
	v["follower_ms"] = ms(end.Sub(woke) - busy)
}

// steady: n candidates for dur after the leader is established; requests per second
// by kind, and whether more than one ever believed it led.
func steady(ctx context.Context, sys system, t timing, n int, dur time.Duration) result {
	r := result{Scenario: "steady", System: sys.Name(), Params: map[string]any{"candidates": n, "seconds": dur.Seconds()}, Values: map[string]float64{}}
	cs, err := startN(ctx, sys, randName("steady"), n)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer stopAll(cs)
	if _, err := waitOne(cs, 30*time.Second); err != nil {
		r.Error = err.Error()
		return r
	}
	time.Sleep(t.Lease + t.Heartbeat) // every follower has read and gone to sleep
	before := sys.Statements()
	start := time.Now()
	maxLeaders := 0
	for time.Since(start) < dur {
		maxLeaders = max(maxLeaders, len(leaders(cs)))
		time.Sleep(5 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	d := diff(sys.Statements(), before)
	total := 0.0
	for k, v := range d {
		if k == "error" {
			r.Values["errors"] = float64(v)
			continue
		}
		r.Values["per_s_"+k] = float64(v) / secs
		total += float64(v)
	}
	r.Values["per_s"] = total / secs
	r.Values["max_leaders"] = float64(maxLeaders)
	return r
}

// herd: n candidates, each on its own connection, start together on a new key.
func herd(ctx context.Context, sys system, n int, trial int) result {
	r := result{Scenario: "herd", System: sys.Name(), Trial: trial, Params: map[string]any{"candidates": n}, Values: map[string]float64{}}
	key := randName("herd")
	before := sys.Statements()
	start := time.Now()
	cs := make([]candidate, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { cs[i], errs[i] = sys.Start(ctx, key, fmt.Sprintf("h%02d", i)) })
	}
	wg.Wait()
	var started []candidate
	for i, c := range cs {
		if errs[i] != nil {
			r.Error = errs[i].Error()
		} else {
			started = append(started, c)
		}
	}
	defer stopAll(started)
	if r.Error != "" {
		return r
	}
	first, err := waitOne(started, 30*time.Second)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Values["first_leader_ms"] = ms(first.Marks().Won.Sub(start))
	maxLeaders := 0
	for t0 := time.Now(); time.Since(t0) < time.Second; time.Sleep(time.Millisecond) {
		maxLeaders = max(maxLeaders, len(leaders(started)))
	}
	r.Values["max_leaders"] = float64(maxLeaders)
	d := diff(sys.Statements(), before)
	r.Values["store_errors"] = float64(d["error"])
	var runErrs int
	for _, c := range started {
		if cc, ok := c.(*casCandidate); ok && cc.err != nil {
			runErrs++
		}
	}
	r.Values["run_errors"] = float64(runErrs)
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
