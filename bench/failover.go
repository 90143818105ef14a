package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// failover: a leader and n-1 followers of one key; the leader is killed (it keeps
// its lease) at a uniformly random moment; how long after its lease expired does a
// follower win?
//
// Nothing is in step with the renewals: the followers start at uniformly random
// moments of the first lease after the leader won (so their reads fall at random
// phases of the heartbeat), and the kill comes a uniformly random time in [0, L)
// after the last follower started (so at a random phase of the renewals and of
// the followers' reads).
//
// The expiry is the dead leader's last committed write, by the database clock
// (its tick_time, read once the leader is dead), plus the lease; the win is the
// reply time of the winning write (after_expiry_ms) and, by the database clock,
// the winning write's execution (executed_after_expiry_ms). Systems that cannot
// read the row (etcd, upsert) take the expiry from the send time of the last
// renewal that succeeded. A win executed before the expiry is an error.
func failover(ctx context.Context, sys system, t timing, n, trial int, draw bool) (result, *timeline) {
	r := result{Scenario: "failover", System: sys.Name(), Trial: trial, Params: map[string]any{"candidates": n}, Values: map[string]float64{}}
	key := randName("failover")
	cs, err := startN(ctx, sys, key, 1)
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	defer func() { stopAll(cs) }()
	l, err := waitOne(cs, 15*time.Second)
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	fs, err := startAtRandom(ctx, sys, key, n-1, t.Lease)
	cs = append(cs, fs...)
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	var smp *sampler
	if draw {
		smp = sample(cs)
	}
	sleep(ctx, rand.N(t.Lease))
	if !l.IsLeader() {
		r.Error = "the leader had lost its lease before the kill (not a takeover: is the machine overloaded?)"
		return r, nil
	}
	crashAt := time.Now()
	l.Crash()
	last, byDB, err := lastWrite(ctx, sys, key, l)
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	expiry := last.Add(t.Lease)
	w, err := waitOne(others(cs, l), t.Lease+10*time.Second)
	var wonAt time.Time
	if byDB && err == nil {
		wonAt, _ = executed(ctx, sys, key)
	}
	var spans map[string][][2]time.Time
	if smp != nil {
		time.Sleep(50 * time.Millisecond)
		spans = smp.finish()
	}
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	wm := w.Marks()
	won := wm.Won
	failoverValues(&r, crashAt, last, expiry, won, wonAt, byDB, t.Heartbeat)
	winnerCalls(r.Values, wm, expiry)
	if !draw {
		return r, nil
	}
	return r, drawn(sys, cs, spans, []event{{crashAt, "leader crashed"}, {expiry, "its lease expired"}, {won, "next leader won"}})
}

// drawn returns the timeline of the candidates cs of sys: their spans as leader
// and the events evs.
func drawn(sys system, cs []candidate, spans map[string][][2]time.Time, evs []event) *timeline {
	tl := &timeline{System: sys.Name(), Spans: spans, Events: evs}
	for _, c := range cs {
		tl.Rows = append(tl.Rows, c.ID())
	}
	return tl
}

// failoverValues records one trial's times: the crash at crashAt, the dead
// leader's last write at last (expiring at expiry), the winning write's reply at
// won and, when known, its execution by the database clock at wonAt.
func failoverValues(r *result, crashAt, last, expiry, won, wonAt time.Time, byDB bool, heartbeat time.Duration) {
	r.Values["after_expiry_ms"] = ms(won.Sub(expiry))
	r.Values["after_crash_ms"] = ms(won.Sub(crashAt))
	r.Values["kill_after_last_write_ms"] = ms(crashAt.Sub(last))
	if byDB {
		r.Values["expiry_by_database_clock"] = 1
	}
	// The winner's row, read right after its win: its election, unless the read
	// came after its first renewal (a heartbeat later) or found the dead term.
	if !wonAt.IsZero() && wonAt.After(last) && wonAt.Before(won.Add(heartbeat/2)) {
		r.Values["executed_after_expiry_ms"] = ms(wonAt.Sub(expiry))
		if wonAt.Before(expiry) {
			r.Error = fmt.Sprintf("won %v before the lease expired (database clock)", expiry.Sub(wonAt))
		}
	}
	if won.Before(expiry) {
		r.Error = fmt.Sprintf("won %v before the lease expired", expiry.Sub(won))
	}
}

// winnerCalls splits a casleader winner's takeover (its marks w) at its last
// read before the winning election and at that election, against the expiry:
// read_sent_after_expiry_ms, read_rtt_ms, elect_sent_after_expiry_ms and
// elect_rtt_ms. A read sent before the expiry is the read that found the lease
// expiring (the election then waited for it); one sent after is the follower's
// wake-up at the expiry it computed.
func winnerCalls(v map[string]float64, w marks, expiry time.Time) {
	var win, read *call
	for i := range w.Calls {
		if c := &w.Calls[i]; c.OK && (c.Op == "elect" || c.Op == "elect released") && !c.Done.After(w.Won) {
			win = c
		}
	}
	if win == nil {
		return
	}
	for i := range w.Calls {
		if c := &w.Calls[i]; c.Op == "observe" && c.Sent.Before(win.Sent) {
			read = c
		}
	}
	v["elect_sent_after_expiry_ms"] = ms(win.Sent.Sub(expiry))
	v["elect_rtt_ms"] = ms(win.Done.Sub(win.Sent))
	if read != nil {
		v["read_sent_after_expiry_ms"] = ms(read.Sent.Sub(expiry))
		v["read_rtt_ms"] = ms(read.Done.Sub(read.Sent))
	}
}

// lastWrite returns when the dead leader l's last write was executed, by the
// database clock (true), or, for a system whose row cannot be read, the send time
// of its last renewal that succeeded (false). It fails when the row is not l's
// any more: l had lost its lease by the kill, and a follower had taken over.
func lastWrite(ctx context.Context, sys system, key string, l candidate) (time.Time, bool, error) {
	cs, ok := sys.(*casSystem)
	if !ok || cs.executed == nil {
		return l.Marks().LastRenew, false, nil
	}
	at, err := executed(ctx, sys, key)
	if err != nil {
		return at, true, fmt.Errorf("read the dead leader's row: %w", err)
	}
	// Read after the tick: if the row is still l's now, the tick was l's write.
	octx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rec, _, err := cs.shared.Observe(octx, key)
	switch {
	case err != nil:
		return at, true, fmt.Errorf("read the dead leader's row: %w", err)
	case rec.LeaderID != l.ID() || rec.Released():
		return at, true, fmt.Errorf("the leader had lost its lease by the kill (the row names %q: not a takeover from the dead leader; is the machine overloaded?)", rec.LeaderID)
	}
	return at, true, nil
}

// executed returns the tick_time of key's row, by the database clock (the host's:
// the databases run on this machine).
func executed(ctx context.Context, sys system, key string) (time.Time, error) {
	cs, ok := sys.(*casSystem)
	if !ok || cs.executed == nil {
		return time.Time{}, fmt.Errorf("%s: the row's tick_time cannot be read", sys.Name())
	}
	xctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return cs.executed(xctx, key)
}

// startAtRandom starts k followers c01, c02… of key, each at a uniformly random
// moment of the next span; it returns those it started.
func startAtRandom(ctx context.Context, sys system, key string, k int, span time.Duration) ([]candidate, error) {
	var cs []candidate
	start := time.Now()
	for i, at := range randomMoments(k, span) {
		sleep(ctx, time.Until(start.Add(at)))
		c, err := sys.Start(ctx, key, fmt.Sprintf("c%02d", i+1))
		if err != nil {
			return cs, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// randomMoments returns k uniformly random durations in [0, span), in order.
func randomMoments(k int, span time.Duration) []time.Duration {
	ds := make([]time.Duration, k)
	for i := range ds {
		ds[i] = rand.N(span)
	}
	slices.Sort(ds)
	return ds
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// trialsInParallel runs trials 0..n-1 of f, trial 0 alone first (it may draw a
// timeline), then up to par at a time, hands each result to record as it comes
// (one at a time), and returns trial 0's timeline.
func trialsInParallel(ctx context.Context, n, par int, f func(trial int) (result, *timeline), record func(result)) *timeline {
	if n == 0 || ctx.Err() != nil {
		return nil
	}
	r, tl := f(0)
	record(r)
	var mu sync.Mutex
	sem := make(chan struct{}, max(par, 1))
	var wg sync.WaitGroup
	for i := 1; i < n && ctx.Err() == nil; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, _ := f(i)
			mu.Lock()
			defer mu.Unlock()
			record(r)
		})
	}
	wg.Wait()
	return tl
}
