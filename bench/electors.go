package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store"
)

// electorsTiming is the timing of the electors run and of the group it is
// compared with: heartbeat 1 s, lease 5 s, renew deadline 3 s, poll 5 s.
var electorsTiming = struct{ lease, deadline, heartbeat, poll time.Duration }{5 * time.Second, 3 * time.Second, time.Second, 5 * time.Second}

// electors: n single-key Electors in one process on one store (one pool of 8
// connections), each leading its own key, with the members table on; then one
// Group leading n other keys on the same store, measured for the same window up
// to a minute (its cost per second does not change with the window). Goroutines,
// heap per elector, statements per second of each, CPU and leases lost.
func electors(ctx context.Context, sys *casSystem, n int, dur time.Duration) result {
	r := result{Scenario: "electors", System: sys.Name(), Params: map[string]any{"electors": n, "seconds": dur.Seconds(), "pool": 8}, Values: map[string]float64{}}
	st, closeFn, err := sys.open(ctx, 8)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer closeFn()
	if err := runElectors(ctx, st, sys, n, dur, r.Values); err != nil {
		r.Error = err.Error()
		return r
	}
	if err := runGroupOf(ctx, st, sys, n, min(dur, time.Minute), r.Values); err != nil {
		r.Error = err.Error()
	}
	return r
}

// countLeading counts the true values of isLeader over n.
func countLeading(n int, isLeader func(i int) bool) int {
	k := 0
	for i := range n {
		if isLeader(i) {
			k++
		}
	}
	return k
}

func runElectors(ctx context.Context, st store.Driver, sys *casSystem, n int, dur time.Duration, out map[string]float64) error {
	var count counter
	prefix := randName("el")
	g0, heap0 := runtime.NumGoroutine(), heapNow()
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	// One store for all: electors share a store's statements when they share the store.
	rec := &recorder{Driver: st, marks: &markBox{}, count: &count, mysql: sys.opt.dialect == "mariadb", members: true, id: "many"}
	els := make([]*casleader.Elector, n)
	for i := range els {
		el, err := casleader.New(rec, casleader.Config{
			Key: fmt.Sprintf("%s-%05d", prefix, i), ID: "many", Logger: candidateLog,
			LeaseDuration: electorsTiming.lease, RenewDeadline: electorsTiming.deadline,
			HeartbeatInterval: electorsTiming.heartbeat, PollInterval: electorsTiming.poll,
		})
		if err != nil {
			return err
		}
		els[i] = el
		wg.Go(func() { _ = el.Run(rctx) })
	}
	out["goroutines_per_elector"] = float64(runtime.NumGoroutine()-g0) / float64(n)
	out["heap_bytes_per_elector"] = float64(int64(heapNow())-int64(heap0)) / float64(n)
	return measure(ctx, "", n, dur, func(i int) bool { return els[i].IsLeader() }, &count, out)
}

// runGroupOf leads n keys with one Group on st, as the electors did, and measures it.
func runGroupOf(ctx context.Context, st store.Driver, sys *casSystem, n int, dur time.Duration, out map[string]float64) error {
	var count counter
	rec := &recorder{Driver: st, marks: &markBox{}, count: &count, mysql: sys.opt.dialect == "mariadb", members: true, id: "group"}
	keys := make([]string, n)
	prefix := randName("gr")
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	g, err := casleader.NewGroup(rec, casleader.GroupConfig{
		ID: "group", Keys: keys, Logger: candidateLog,
		LeaseDuration: electorsTiming.lease, RenewDeadline: electorsTiming.deadline,
		HeartbeatInterval: electorsTiming.heartbeat, PollInterval: electorsTiming.poll,
	})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Go(func() { _ = g.Run(rctx) })
	return measure(ctx, "group_", n, dur, func(i int) bool { return g.IsLeader(keys[i]) }, &count, out)
}

// measure waits until all n lead (at most 3 minutes), then for dur counts the
// statements, the CPU and the fewest leading, into out under prefix.
func measure(ctx context.Context, prefix string, n int, dur time.Duration, isLeader func(int) bool, count *counter, out map[string]float64) error {
	t0 := time.Now()
	for countLeading(n, isLeader) < n {
		if time.Since(t0) > 3*time.Minute || ctx.Err() != nil {
			return fmt.Errorf("%sonly %d of %d led after %v", prefix, countLeading(n, isLeader), n, time.Since(t0).Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
	out[prefix+"acquire_all_ms"] = ms(time.Since(t0))
	time.Sleep(time.Second)
	before := count.snapshot()
	cpu0, start := cpuTime(), time.Now()
	minLeading := n
	for time.Since(start) < dur && ctx.Err() == nil {
		minLeading = min(minLeading, countLeading(n, isLeader))
		time.Sleep(100 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	out[prefix+"cpu_percent"] = 100 * (cpuTime() - cpu0).Seconds() / secs
	total := 0.0
	for kind, v := range diff(count.snapshot(), before) {
		if kind == "error" {
			out[prefix+"errors"] = float64(v)
			continue
		}
		total += float64(v)
		out[prefix+"per_s_"+kind] = float64(v) / secs
	}
	out[prefix+"per_s"] = total / secs
	out[prefix+"min_leading"] = float64(minLeading)
	out[prefix+"not_led_at_end"] = float64(n - countLeading(n, isLeader))
	return nil
}
