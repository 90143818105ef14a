package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/casleader/casleader"
)

// electors: n single-key Electors in one process over one pool of 8 connections,
// heartbeat 1 s, lease 5 s, renew deadline 3 s, poll 5 s, each leading its own key:
// goroutines, heap per elector, statements per second, CPU and renewal trouble.
func electors(ctx context.Context, sys *casSystem, n int, dur time.Duration) result {
	r := result{Scenario: "electors", System: sys.Name(), Params: map[string]any{"electors": n, "seconds": dur.Seconds(), "pool": 8}, Values: map[string]float64{}}
	st, closeFn, err := sys.open(ctx, 8)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer closeFn()
	var count counter
	prefix := randName("el")
	g0, heap0 := runtime.NumGoroutine(), heapNow()
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	els := make([]*casleader.Elector, n)
	for i := range els {
		rec := &recorder{Driver: st, marks: &markBox{}, count: &count, mysql: sys.opt.dialect == "mariadb"}
		el, err := casleader.New(rec, casleader.Config{
			Key: fmt.Sprintf("%s-%05d", prefix, i), ID: "many", Logger: candidateLog,
			LeaseDuration: 5 * time.Second, RenewDeadline: 3 * time.Second, HeartbeatInterval: time.Second, PollInterval: 5 * time.Second,
		})
		if err != nil {
			r.Error = err.Error()
			return r
		}
		els[i] = el
		wg.Go(func() { _ = el.Run(rctx) })
	}
	leading := func() int {
		k := 0
		for _, el := range els {
			if el.IsLeader() {
				k++
			}
		}
		return k
	}
	r.Values["goroutines_per_elector"] = float64(runtime.NumGoroutine()-g0) / float64(n)
	r.Values["heap_bytes_per_elector"] = float64(int64(heapNow())-int64(heap0)) / float64(n)
	t0 := time.Now()
	for leading() < n {
		if time.Since(t0) > 3*time.Minute || ctx.Err() != nil {
			r.Error = fmt.Sprintf("only %d of %d electors led after %v", leading(), n, time.Since(t0).Round(time.Second))
			return r
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.Values["acquire_all_ms"] = ms(time.Since(t0))
	time.Sleep(time.Second)
	before := count.snapshot()
	cpu0, start := cpuTime(), time.Now()
	minLeading := n
	for time.Since(start) < dur && ctx.Err() == nil {
		minLeading = min(minLeading, leading())
		time.Sleep(100 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	r.Values["cpu_percent"] = 100 * (cpuTime() - cpu0).Seconds() / secs
	total := 0.0
	for kind, v := range diff(count.snapshot(), before) {
		if kind == "error" {
			r.Values["errors"] = float64(v)
			continue
		}
		total += float64(v)
		r.Values["per_s_"+kind] = float64(v) / secs
	}
	r.Values["per_s"] = total / secs
	r.Values["min_leading"] = float64(minLeading)
	r.Values["not_led_at_end"] = float64(n - leading())
	return r
}
