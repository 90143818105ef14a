package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/retry"
)

// followSpec tells a follower process (bench -follow SPEC) which election to follow.
type followSpec struct {
	Dialect string        `json:"dialect"`
	Table   string        `json:"table"`
	SQLite  string        `json:"sqlite,omitempty"`
	Prefix  string        `json:"prefix"`
	Keys    int           `json:"keys"`
	For     time.Duration `json:"for"`
}

// scaleTiming is the group setting of the scale runs: heartbeat 1 s.
func scaleConfig(id string, keys []string) casleader.GroupConfig {
	return casleader.GroupConfig{
		ID: id, Keys: keys,
		LeaseDuration: 5 * time.Second, RenewDeadline: 3 * time.Second, HeartbeatInterval: time.Second, PollInterval: 5 * time.Second,
		BatchSize: 1000, Parallel: 4,
		Logger: slog.New(limitedHandler{Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}).WithAttrs([]slog.Attr{slog.String("group", id)}), lim: &retry.Limiter{}}),
	}
}

// limitedHandler lets a record through the project's log limiter (one every
// retry.LogEvery, with the count of those held back): a group that loses its keys
// logs once per key, 100,000 lines at a time.
type limitedHandler struct {
	slog.Handler
	lim *retry.Limiter
}

func (h limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	ok, held := h.lim.Allow()
	if !ok {
		return nil
	}
	if held > 0 {
		r.AddAttrs(slog.Int("warnings_not_logged", held))
	}
	return h.Handler.Handle(ctx, r)
}

func scaleKeys(prefix string, k int) []string {
	keys := make([]string, k)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%06d", prefix, i)
	}
	return keys
}

// heapNow returns the live heap after a collection.
func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// window measures a running group for dur: statements per second by kind, CPU,
// renewal latencies, leases lost and the fewest keys led (or followed) at once.
func window(g *casleader.Group, gs *groupStore, keys []string, dur time.Duration, leader bool, r *result) {
	before := gs.count.snapshot()
	gs.mu.Lock()
	gs.lat = nil
	gs.mu.Unlock()
	lost0 := g.Stats().LostLeases
	cpu0, start := cpuTime(), time.Now()
	minLeading, maxLeading := len(keys), 0
	for time.Since(start) < dur {
		n := g.Stats().Leading
		minLeading, maxLeading = min(minLeading, n), max(maxLeading, n)
		time.Sleep(100 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	total := 0.0
	for kind, v := range diff(gs.count.snapshot(), before) {
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
	r.Values["per_s"] = total / secs
	r.Values["cpu_percent"] = 100 * cpu.Seconds() / secs
	r.Values["goroutines"] = float64(runtime.NumGoroutine())
	if leader {
		r.Values["renew_p50_ms"] = ms(percentile(lat, 0.5))
		r.Values["renew_p99_ms"] = ms(percentile(lat, 0.99))
		r.Values["renew_max_ms"] = ms(percentile(lat, 1))
		r.Values["lost_leases"] = float64(g.Stats().LostLeases - lost0)
		r.Values["min_leading"] = float64(minLeading)
	} else {
		r.Values["max_leading"] = float64(maxLeading) // a follower that led a key took it over
	}
}

// scale: one process leads k keys while a second process (this program run with
// -follow) follows the same k keys, each on its own pool of 8 connections, for dur.
func scale(ctx context.Context, sys *casSystem, k int, dur time.Duration) []result {
	r := result{Scenario: "scale", System: sys.Name() + " leader", Params: map[string]any{"keys": k, "seconds": dur.Seconds(), "pool": 8}, Values: map[string]float64{}}
	fail := func(err error) []result { r.Error = err.Error(); return []result{r} }
	st, closeFn, err := sys.open(ctx, 8)
	if err != nil {
		return fail(err)
	}
	defer closeFn()
	gs := &groupStore{Driver: st, mysql: sys.opt.dialect == "mariadb"}
	prefix := randName("scale")
	keys := scaleKeys(prefix, k)
	heap0 := heapNow()
	g, err := casleader.NewGroup(gs, scaleConfig("scaler", keys))
	if err != nil {
		return fail(err)
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
		if time.Since(t0) > 3*time.Minute || ctx.Err() != nil {
			return fail(fmt.Errorf("only %d of %d keys led after %v", g.Stats().Leading, k, time.Since(t0).Round(time.Second)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.Values["acquire_all_ms"] = ms(time.Since(t0))
	r.Values["heap_bytes_per_key"] = float64(int64(heapNow())-int64(heap0)) / float64(k)

	spec, _ := json.Marshal(followSpec{Dialect: sys.opt.dialect, Table: sys.table, SQLite: sys.sqlite, Prefix: prefix, Keys: k, For: dur})
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, dur+5*time.Minute)
	defer ccancel()
	cmd := exec.CommandContext(cctx, exe, "-follow", string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("start the follower process: %w", err))
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	if l, ok := <-lines; !ok || l != "ready" {
		_ = cmd.Wait()
		return fail(fmt.Errorf("the follower process did not get ready (said %q)", l))
	}
	window(g, gs, keys, dur, true, &r)
	notLed := 0
	for _, key := range keys {
		if !g.IsLeader(key) {
			notLed++
		}
	}
	r.Values["not_led_at_end"] = float64(notLed)
	var fr result
	for l := range lines {
		if err := json.Unmarshal([]byte(l), &fr); err != nil {
			fr = result{Error: fmt.Sprintf("follower said %q", l)}
		}
	}
	if err := cmd.Wait(); err != nil && fr.Error == "" {
		fr.Error = fmt.Sprintf("follower process: %v", err)
	}
	fr.Scenario, fr.System = "scale", sys.Name()+" follower"
	return []result{r, fr}
}

// follow is the follower process of scale: it follows the spec's keys with a group
// on a pool of 8 connections, says "ready" on stdout once it has read every key's
// leader, measures for the spec's duration and prints its result as one JSON line.
func follow(ctx context.Context, d dbs, specJSON string) error {
	var sp followSpec
	if err := json.Unmarshal([]byte(specJSON), &sp); err != nil {
		return fmt.Errorf("-follow: %w", err)
	}
	sys := &casSystem{name: "follower", opt: casOptions{dialect: sp.Dialect}, dsn: d, table: sp.Table, sqlite: sp.SQLite}
	r := result{Scenario: "scale", Params: map[string]any{"keys": sp.Keys, "seconds": sp.For.Seconds(), "pool": 8}, Values: map[string]float64{}}
	st, closeFn, err := sys.open(ctx, 8)
	if err != nil {
		return err
	}
	defer closeFn()
	gs := &groupStore{Driver: st, mysql: sp.Dialect == "mariadb"}
	keys := scaleKeys(sp.Prefix, sp.Keys)
	heap0 := heapNow()
	g, err := casleader.NewGroup(gs, scaleConfig("follower", keys))
	if err != nil {
		return err
	}
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(gctx) }()
	defer func() {
		cancel()
		<-done
	}()
	t0 := time.Now()
	for i := 0; i < len(keys); {
		if g.Leader(keys[i]) != "" {
			i++
			continue
		}
		if time.Since(t0) > 3*time.Minute || ctx.Err() != nil {
			return errors.New("the follower did not see a leader on every key within 3 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.Values["read_all_ms"] = ms(time.Since(t0))
	r.Values["heap_bytes_per_key"] = float64(int64(heapNow())-int64(heap0)) / float64(len(keys))
	fmt.Println("ready")
	window(g, gs, keys, sp.For, false, &r)
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fmt.Println(strings.TrimSpace(string(b)))
	return nil
}
