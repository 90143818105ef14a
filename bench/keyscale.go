package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store"
)

// groupStore counts the statements of a group's batched calls and records RenewMany
// latencies. A MySQL write is an UPDATE and a read-back, except a renewal or release
// whose count of changed rows settles every key (all won or none): the store then
// skips the read-back, and so does the count here. As before store.Driver, the
// groups measured here run without the store's wake-ups and members table: it
// hides them (Subscribe, Observed, Leading and the members calls do nothing).
type groupStore struct {
	store.Driver
	mysql bool
	count counter
	mu    sync.Mutex
	lat   []time.Duration
	trace *takeoverTrace // nil unless the saturation run splits takeovers
}

func (g *groupStore) Subscribe(string, string, func(int64)) func() { return func() {} }
func (g *groupStore) Observed(string, store.Record)                {}
func (g *groupStore) Leading(string, int64, bool)                  {}
func (g *groupStore) PutMembers(context.Context, []store.Member) error {
	return nil
}
func (g *groupStore) DeleteMembers(context.Context, string, []string) error { return nil }
func (g *groupStore) PruneMembers(context.Context, time.Duration) (int64, error) {
	return 0, nil
}
func (g *groupStore) MembersOf(context.Context, []string, time.Duration) ([]store.Member, error) {
	return nil, nil
}

func (g *groupStore) write(kind string) {
	n := int64(1)
	if g.mysql {
		n = 2
	}
	g.count.add(kind, n)
}

// settled counts a MySQL renewal or release: one statement when the UPDATE's count
// settled it (no error, every key or none won), else two.
func (g *groupStore) settled(kind string, n, won int, err error) {
	if g.mysql && err == nil && (won == n || won == 0) {
		g.count.add(kind, 1)
		return
	}
	g.write(kind)
}

func (g *groupStore) ObserveMany(ctx context.Context, keys []string) (map[string]store.Record, error) {
	g.count.add("observe_many", 1)
	return g.tracedObserve(ctx, keys)
}

func (g *groupStore) InsertMany(ctx context.Context, cand store.Candidate, keys []string) ([]store.Won, error) {
	g.write("insert_many")
	return g.Driver.InsertMany(ctx, cand, keys)
}

func (g *groupStore) ElectMany(ctx context.Context, cand store.Candidate, from []store.KeyVersion) ([]store.Won, error) {
	g.write("elect_many")
	return g.tracedElect(ctx, cand, from)
}

func (g *groupStore) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	start := time.Now()
	w, err := g.Driver.RenewMany(ctx, id, held)
	took := time.Since(start)
	g.settled("renew_many", len(held), len(w), err)
	g.mu.Lock()
	g.lat = append(g.lat, took)
	g.mu.Unlock()
	if err != nil {
		g.count.add("error", 1)
	}
	return w, err
}

func (g *groupStore) ReleaseMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	w, err := g.Driver.ReleaseMany(ctx, id, held)
	g.settled("release_many", len(held), len(w), err)
	return w, err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// keyScale: one group leads k keys on a pool of 8 connections with a 1 s heartbeat
// for dur; statements per second, CPU, renewal latency, and lost leases.
func keyScale(ctx context.Context, sys *casSystem, k int, dur time.Duration) result {
	r := result{Scenario: "keys", System: sys.Name(), Params: map[string]any{"keys": k, "seconds": dur.Seconds(), "pool": 8}, Values: map[string]float64{}}
	st, closeFn, err := sys.open(ctx, 8)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer closeFn()
	gs := &groupStore{Driver: st, mysql: sys.opt.dialect == "mariadb"}
	keys := make([]string, k)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%05d", randName("key"), i)
	}
	g, err := casleader.NewGroup(gs, casleader.GroupConfig{
		ID: "scaler", Keys: keys,
		LeaseDuration: 5 * time.Second, RenewDeadline: 3 * time.Second, HeartbeatInterval: time.Second, PollInterval: 5 * time.Second,
		BatchSize: 1000, Parallel: 4,
	})
	if err != nil {
		r.Error = err.Error()
		return r
	}
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(gctx) }()
	defer func() {
		cancel()
		<-done
	}()
	t0 := time.Now()
	for g.Stats().Leading < k {
		if time.Since(t0) > time.Minute {
			r.Error = fmt.Sprintf("only %d of %d keys led after a minute", g.Stats().Leading, k)
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.Values["acquire_all_ms"] = ms(time.Since(t0))
	time.Sleep(1500 * time.Millisecond) // into the steady rhythm
	before := gs.count.snapshot()
	gs.mu.Lock()
	gs.lat = nil
	gs.mu.Unlock()
	lost0 := g.Stats().LostLeases
	cpu0, start := cpuTime(), time.Now()
	minLeading := k
	for time.Since(start) < dur {
		minLeading = min(minLeading, g.Stats().Leading)
		time.Sleep(50 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	d := diff(gs.count.snapshot(), before)
	total := 0.0
	for kind, v := range d {
		if kind == "error" {
			r.Values["errors"] = float64(v)
			continue
		}
		total += float64(v)
		r.Values["per_s_"+kind] = float64(v) / secs
	}
	gs.mu.Lock()
	lat := gs.lat
	gs.mu.Unlock()
	notLed := 0
	for _, key := range keys {
		if !g.IsLeader(key) {
			notLed++
		}
	}
	r.Values["per_s"] = total / secs
	r.Values["cpu_percent"] = 100 * cpu.Seconds() / secs
	r.Values["renew_p50_ms"] = ms(percentile(lat, 0.5))
	r.Values["renew_p99_ms"] = ms(percentile(lat, 0.99))
	r.Values["renew_max_ms"] = ms(percentile(lat, 1))
	r.Values["lost_leases"] = float64(g.Stats().LostLeases - lost0)
	r.Values["min_leading"] = float64(minLeading)
	r.Values["not_led_at_end"] = float64(notLed)
	return r
}
