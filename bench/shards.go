package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/store"
)

// The shards scenario: four candidate processes (this program run with -shard
// SPEC), each a balanced casleader.Group (Config.Balance) over the same keys, go
// through seven events: started one by one, one killed (SIGKILL), one stopped
// (SIGTERM: Run's context ends and it hands its keys over) and started again. After
// each event the parent waits until the spread is fair (every key led by exactly
// one candidate, each live candidate within one key of N/M) and has stayed fair
// for a lease, then writes one result: keys led per candidate, keys whose leader
// changed, the longest time a key had no leader and the time until fair.
// -shards-together (for 100,000 keys) starts the four at once instead, watches the
// fair spread for -shards-steady, and goes on from the kill. Each result also
// holds the database server's statements and rows written per second and the CPU
// of its processes over the event's window (serverStats; none for SQLite).
//
// Who leads what comes from the children: each samples its group's IsLeader for
// every key (its own belief, by its monotonic trust deadline) every Sample and
// prints the changes on stdout with wall-clock times (one host, one clock):
//
//	+ I NS   key I seen led, first at NS (Unix nanoseconds, read after the check)
//	- I NS   key I no longer led; last seen led at NS
//	. NS S   a sweep that started at NS is complete; S batched statements so far
//	exit E   Run returned E
//
// A leading interval [first seen, last seen] is inside the real one, so two
// candidates' intervals of a key that overlap are a real overlap (two leaders); a
// gap between them is longer than the real one by at most a sample period. A
// killed child's open intervals end at the start of its last complete sweep.

// shardSpec tells a shard candidate process which group to run.
type shardSpec struct {
	Dialect string        `json:"dialect"`
	Table   string        `json:"table"`
	SQLite  string        `json:"sqlite,omitempty"`
	Prefix  string        `json:"prefix"`
	Keys    int           `json:"keys"`
	ID      string        `json:"id"`
	Lease   time.Duration `json:"lease"`
	Sample  time.Duration `json:"sample"`
	// Await, when not empty, holds the group's reads until its members view has
	// shown every candidate of Await, and at least until OpenAt (see gatedStore).
	Await  []string  `json:"await,omitempty"`
	OpenAt time.Time `json:"open_at,omitzero"`
}

// shardConfig: lease L, renew deadline 3L/5, heartbeat L/5, poll L, batches of
// 1,000 keys, 4 in flight, warnings to stderr (rate-limited).
func shardConfig(sp shardSpec, keys []string) casleader.GroupConfig {
	h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}).WithAttrs([]slog.Attr{slog.String("candidate", sp.ID)})
	return casleader.GroupConfig{
		ID: sp.ID, Keys: keys, Balance: true,
		LeaseDuration: sp.Lease, RenewDeadline: sp.Lease * 3 / 5, HeartbeatInterval: sp.Lease / 5, PollInterval: sp.Lease,
		BatchSize: 1000, Parallel: 4,
		Logger: slog.New(limitedHandler{Handler: h, lim: &retry.Limiter{}}),
	}
}

// shardChild is a candidate process of the shards scenario: it runs its group
// until ctx ends (SIGTERM) and reports its beliefs on stdout.
func shardChild(ctx context.Context, d dbs, specJSON string) error {
	var sp shardSpec
	if err := json.Unmarshal([]byte(specJSON), &sp); err != nil {
		return fmt.Errorf("-shard: %w", err)
	}
	sys := &casSystem{name: sp.ID, opt: casOptions{dialect: sp.Dialect}, dsn: d, table: sp.Table, sqlite: sp.SQLite}
	st, closeFn, err := sys.open(ctx, 8)
	if err != nil {
		return err
	}
	defer closeFn()
	if len(sp.Await) > 0 {
		gs := &gatedStore{Driver: st, await: sp.Await, open: make(chan struct{})}
		defer time.AfterFunc(time.Until(sp.OpenAt), gs.timeUp).Stop()
		st = gs
	}
	keys := scaleKeys(sp.Prefix, sp.Keys)
	g, err := casleader.NewGroup(st, shardConfig(sp, keys))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	was := make([]bool, len(keys))
	last := make([]int64, len(keys))
	for {
		if err := sweep(g, keys, was, last, w); err != nil {
			return err // the parent is gone
		}
		select {
		case err := <-done:
			_ = sweep(g, keys, was, last, w) // Run has returned: nothing is led
			fmt.Fprintf(w, "exit %s\n", strings.ReplaceAll(fmt.Sprint(err), "\n", " "))
			return w.Flush()
		case <-time.After(sp.Sample):
		}
	}
}

// sweep checks every key once and prints what changed since the last sweep.
func sweep(g *casleader.Group, keys []string, was []bool, last []int64, w *bufio.Writer) error {
	start := time.Now().UnixNano()
	for i, k := range keys {
		is := g.IsLeader(k)
		now := time.Now().UnixNano()
		switch {
		case is && !was[i]:
			fmt.Fprintf(w, "+ %d %d\n", i, now)
		case !is && was[i]:
			fmt.Fprintf(w, "- %d %d\n", i, last[i])
		}
		was[i] = is
		if is {
			last[i] = now
		}
	}
	fmt.Fprintf(w, ". %d %d\n", start, g.Stats().Statements)
	return w.Flush()
}

// gatedStore holds a group's reads (ObserveMany) until a members read has shown
// every candidate of await and the members loop has called the store again (its
// next write, half a lease later: the rebalance of that read, which runs between
// the two calls, has then decided the spread), and until timeUp is called (at the
// time the parent gave every candidate, 3 leases after it started them, so that
// they all begin at once). Candidates started together then make their first
// decisions with the keys already spread: a group campaigns for every key it
// finds free until its first members read, so without the gate the first of four
// processes started at once takes nearly every key (200 keys, lease 2 s: c1 led
// all 200 before handing 150 over), and at 100,000 keys the handovers that fix
// it, 32 per half lease, would take hours.
type gatedStore struct {
	store.Driver
	await []string
	open  chan struct{}
	mu    sync.Mutex
	seen  bool // a members read showed every candidate of await
	ready bool // and the members loop has called again since
	late  bool // timeUp was called
	once  sync.Once
}

func (g *gatedStore) ObserveMany(ctx context.Context, keys []string) (map[string]store.Record, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, fmt.Errorf("held until the members view shows %v: %w", g.await, ctx.Err())
	}
	return g.Driver.ObserveMany(ctx, keys)
}

func (g *gatedStore) MembersOf(ctx context.Context, keys []string, within time.Duration) ([]store.Member, error) {
	g.next()
	ms, err := g.Driver.MembersOf(ctx, keys, within)
	if err != nil {
		return ms, err
	}
	all := true
	for _, id := range g.await {
		all = all && slices.ContainsFunc(ms, func(m store.Member) bool { return m.ID == id })
	}
	g.mu.Lock()
	g.seen = g.seen || all
	g.mu.Unlock()
	return ms, nil
}

func (g *gatedStore) PutMembers(ctx context.Context, ms []store.Member) error {
	g.next()
	return g.Driver.PutMembers(ctx, ms)
}

// next notes a call of the members loop: after the read that showed every
// candidate, the spread is decided.
func (g *gatedStore) next() {
	g.mu.Lock()
	g.ready = g.ready || g.seen
	open := g.ready && g.late
	g.mu.Unlock()
	if open {
		g.once.Do(func() { close(g.open) })
	}
}

// timeUp opens the gate now if the spread is decided, else as soon as it is.
func (g *gatedStore) timeUp() {
	g.mu.Lock()
	g.late = true
	g.mu.Unlock()
	g.next()
}

// interval is one candidate's leading of one key.
type interval struct {
	id       string
	from, to time.Time
}

// shardTracker holds what the children reported.
type shardTracker struct {
	mu    sync.Mutex
	open  []map[string]time.Time // per key: candidate -> first seen leading
	ivs   [][]interval           // per key: closed intervals
	count map[string]int         // keys each candidate leads now
	swept map[string]time.Time   // start of each candidate's last complete sweep
	stmts map[string]int64       // batched statements each candidate made so far
	exit  map[string]string      // what Run returned, per candidate
}

func newShardTracker(n int) *shardTracker {
	t := &shardTracker{open: make([]map[string]time.Time, n), ivs: make([][]interval, n),
		count: map[string]int{}, swept: map[string]time.Time{}, stmts: map[string]int64{}, exit: map[string]string{}}
	for i := range t.open {
		t.open[i] = map[string]time.Time{}
	}
	return t
}

// apply takes one line of candidate id.
func (t *shardTracker) apply(id, line string) error {
	f := strings.Fields(line)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(f) > 0 && f[0] == "exit" {
		t.exit[id] = strings.TrimPrefix(line, "exit ")
		return nil
	}
	if len(f) != 3 {
		return fmt.Errorf("candidate %s said %q", id, line)
	}
	a, err1 := strconv.Atoi(f[1])
	b, err2 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil || (f[0] != "." && (a < 0 || a >= len(t.open))) {
		return fmt.Errorf("candidate %s said %q", id, line)
	}
	switch f[0] {
	case "+":
		t.open[a][id] = time.Unix(0, b)
		t.count[id]++
	case "-":
		t.closeOne(a, id, time.Unix(0, b))
	case ".":
		ns, _ := strconv.ParseInt(f[1], 10, 64)
		t.swept[id], t.stmts[id] = time.Unix(0, ns), b
	}
	return nil
}

// reset forgets a candidate's statements, before it is started (again).
func (t *shardTracker) reset(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.stmts, id)
	delete(t.exit, id)
}

func (t *shardTracker) closeOne(k int, id string, to time.Time) {
	from, ok := t.open[k][id]
	if !ok {
		return
	}
	delete(t.open[k], id)
	t.count[id]--
	t.ivs[k] = append(t.ivs[k], interval{id, from, later(from, to)})
}

// closeAll ends the intervals a dead candidate left open at the start of its last
// complete sweep (it was seen leading each of them then, or later).
func (t *shardTracker) closeAll(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.open {
		t.closeOne(k, id, t.swept[id])
	}
}

func (t *shardTracker) exitOf(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return cmp.Or(t.exit[id], "no exit line (killed)")
}

// leaders returns the candidate leading each key now ("" none, "*" several).
func (t *shardTracker) leaders() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, len(t.open))
	for k, o := range t.open {
		for id := range o {
			if out[k] != "" {
				out[k] = "*"
			} else {
				out[k] = id
			}
		}
	}
	return out
}

// fair reports whether every key is led by exactly one candidate, each of live
// within one key of N/M, and no other candidate leads.
func (t *shardTracker) fair(live []string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.open {
		if len(o) != 1 {
			return false
		}
	}
	share := float64(len(t.open)) / float64(len(live))
	for id, c := range t.count {
		if !slices.Contains(live, id) && c != 0 {
			return false
		}
	}
	for _, id := range live {
		if d := float64(t.count[id]) - share; d > 1 || d < -1 {
			return false
		}
	}
	return true
}

// window returns, over [t0, t1], the longest time a key had no leader, the most
// candidates that led one key at once, and how many times a key was taken (a
// leading interval began).
func (t *shardTracker) window(t0, t1 time.Time) (gap time.Duration, most, taken int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.open {
		ivs := slices.Clone(t.ivs[k])
		for id, from := range t.open[k] {
			ivs = append(ivs, interval{id, from, t1})
		}
		for _, iv := range ivs {
			if iv.from.After(t0) && !iv.from.After(t1) {
				taken++
			}
		}
		g, m := coverage(ivs, t0, t1)
		gap, most = max(gap, g), max(most, m)
	}
	return gap, most, taken
}

// coverage returns the longest stretch of [t0, t1] that no interval covers, and
// the most intervals that overlap at one instant (touching is not overlapping).
func coverage(ivs []interval, t0, t1 time.Time) (gap time.Duration, most int) {
	type edge struct {
		at time.Time
		d  int
	}
	var es []edge
	cursor := t0
	slices.SortFunc(ivs, func(a, b interval) int { return a.from.Compare(b.from) })
	for _, iv := range ivs {
		if !iv.to.After(t0) || !iv.from.Before(t1) {
			continue
		}
		from, to := later(iv.from, t0), earlier(iv.to, t1)
		gap = max(gap, from.Sub(cursor))
		cursor = later(cursor, to)
		es = append(es, edge{from, 1}, edge{to, -1})
	}
	gap = max(gap, t1.Sub(cursor))
	slices.SortFunc(es, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d // an end before a start at the same instant
	})
	n := 0
	for _, e := range es {
		n += e.d
		most = max(most, n)
	}
	return gap, most
}

func (t *shardTracker) counts() (map[string]int, map[string]int64, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := map[string]int{}
	for id, n := range t.count {
		if n != 0 {
			c[id] = n
		}
	}
	notLed := 0
	for _, o := range t.open {
		if len(o) == 0 {
			notLed++
		}
	}
	s := map[string]int64{}
	for id, n := range t.stmts {
		s[id] = n
	}
	return c, s, notLed
}

// shardProc is one candidate process.
type shardProc struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{} // its stdout reached EOF and the process was waited for
	err  error         // a line it should not have said, or its exit status
}

func startShard(sp shardSpec, tr *shardTracker) (*shardProc, error) {
	spec, _ := json.Marshal(sp)
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-shard", string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start candidate %s: %w", sp.ID, err)
	}
	p := &shardProc{id: sp.ID, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if err := tr.apply(sp.ID, sc.Text()); err != nil && p.err == nil {
				p.err = err
			}
		}
		if err := cmd.Wait(); err != nil && p.err == nil {
			p.err = fmt.Errorf("candidate %s: %w", sp.ID, err)
		}
	}()
	return p, nil
}

func (p *shardProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *shardProc) kill(tr *shardTracker) error {
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	<-p.done
	tr.closeAll(p.id)
	return nil
}

// stop sends SIGTERM (Run's context ends) and waits until the process exits.
func (p *shardProc) stop(tr *shardTracker, bound time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(bound):
		_ = p.cmd.Process.Kill()
		<-p.done
		tr.closeAll(p.id)
		return fmt.Errorf("candidate %s did not exit within %v of SIGTERM", p.id, bound)
	}
	tr.closeAll(p.id)
	return p.err
}

// minMoves returns the fewest keys whose leader must change to go from leads (keys
// per candidate) to a fair spread over live: each live candidate keeps up to its
// quota (⌊N/M⌋, or ⌈N/M⌉ for N mod M of them, given to those that lead more).
func minMoves(n int, leads map[string]int, live []string) int {
	q, r := n/len(live), n%len(live)
	kept := 0
	for _, id := range live {
		b := leads[id]
		if b > q && r > 0 {
			kept, r = kept+1, r-1
		}
		kept += min(b, q)
	}
	return n - kept
}

// procCPU returns the user + system CPU time of process pid, from /proc.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return 0, false
	}
	f := strings.Fields(string(b[i+2:])) // f[0] is field 3, state
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / 100, true // USER_HZ is 100 on Linux
}

func loadLine() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// shardsRun is one run of the scenario on one database.
type shardsRun struct {
	sys     *casSystem
	db      string
	spec    shardSpec
	tr      *shardTracker
	procs   map[string]*shardProc
	server  *serverStats  // the database server's counters (nil for SQLite)
	timeout time.Duration // per event, until fair
	poll    time.Duration // how often waitFair looks at the spread
}

// shardsOptions are the run's settings: Keys keys, lease Lease. Together starts
// the four candidates at once (event "start c1-c4") instead of one by one, then
// watches the fair spread for Steady (event "steady") before the kill; the
// join of a candidate to three that lead 100,000 keys takes about N/4 / 32
// half leases (32 handovers per half lease per leader), so starting them one by
// one would take hours there. Timeout bounds each event's wait for a fair spread
// (0: 5 minutes, 2 with Smoke).
type shardsOptions struct {
	Keys     int
	Lease    time.Duration
	Smoke    bool
	Together bool
	Steady   time.Duration
	Timeout  time.Duration
}

// shardEvent is one event of the run: what to do, who is live after it, and
// how long the spread must then stay fair (0: a lease).
type shardEvent struct {
	name string
	act  func() error
	live []string
	hold time.Duration
}

// shards runs the scenario of o on sys's database.
func shards(ctx context.Context, sys *casSystem, db string, o shardsOptions) []result {
	sample, poll := 5*time.Millisecond, 10*time.Millisecond
	if o.Keys > 10000 {
		sample, poll = 250*time.Millisecond, 200*time.Millisecond
	}
	s := &shardsRun{sys: sys, db: db, tr: newShardTracker(o.Keys), procs: map[string]*shardProc{}, poll: poll,
		timeout: cmp.Or(o.Timeout, 5*time.Minute),
		spec:    shardSpec{Dialect: sys.opt.dialect, Table: sys.table, SQLite: sys.sqlite, Prefix: randName("shard"), Keys: o.Keys, Lease: o.Lease, Sample: sample}}
	if o.Smoke && o.Timeout == 0 {
		s.timeout = 2 * time.Minute
	}
	server, err := newServerStats(ctx, sys.opt.dialect, sys.dsn)
	if err != nil {
		log.Printf("shards %s: %v (no server counts)", db, err)
	} else if server != nil {
		s.server = server
		defer server.close()
	}
	defer s.stopAll(o.Lease)
	var out []result
	for i, ev := range s.events(o) {
		if ctx.Err() != nil {
			break
		}
		r := s.step(ctx, i, ev)
		log.Printf("shards %s %s: %v", db, ev.name, r.Values)
		out = append(out, r)
		if r.Error != "" && strings.HasPrefix(r.Error, "event:") {
			break // the run cannot go on as planned
		}
	}
	return out
}

// events returns the run's events: the four started one by one, or together and
// then watched for o.Steady; then c2 killed, c3 stopped and started again.
func (s *shardsRun) events(o shardsOptions) []shardEvent {
	start := func(ids ...string) func() error {
		return func() error {
			for _, id := range ids {
				sp := s.spec
				sp.ID = id
				if len(ids) > 1 {
					sp.Await, sp.OpenAt = ids, time.Now().Add(3*s.spec.Lease)
				}
				s.tr.reset(id)
				p, err := startShard(sp, s.tr)
				if err != nil {
					return err
				}
				s.procs[id] = p
			}
			return nil
		}
	}
	kill := func(id string) func() error { return func() error { return s.procs[id].kill(s.tr) } }
	stop := func(id string) func() error {
		return func() error { return s.procs[id].stop(s.tr, 2*o.Lease+time.Minute) }
	}
	all := []string{"c1", "c2", "c3", "c4"}
	evs := []shardEvent{
		{"start c1", start("c1"), all[:1], 0},
		{"start c2", start("c2"), all[:2], 0},
		{"start c3", start("c3"), all[:3], 0},
		{"start c4", start("c4"), all, 0},
	}
	if o.Together {
		evs = []shardEvent{
			{"start c1-c4", start(all...), all, 0},
			{"steady", func() error { return nil }, all, o.Steady},
		}
	}
	return append(evs,
		shardEvent{"kill c2", kill("c2"), []string{"c1", "c3", "c4"}, 0},
		shardEvent{"stop c3", stop("c3"), []string{"c1", "c4"}, 0},
		shardEvent{"restart c3", start("c3"), []string{"c1", "c3", "c4"}, 0})
}

func (s *shardsRun) stopAll(lease time.Duration) {
	var wg sync.WaitGroup
	for _, p := range s.procs {
		if p.exited() {
			continue
		}
		wg.Go(func() { _ = p.stop(s.tr, 2*lease+time.Minute) })
	}
	wg.Wait()
}

// step runs one event and measures it until the spread has been fair for ev.hold
// (a lease when 0).
func (s *shardsRun) step(ctx context.Context, i int, ev shardEvent) result {
	live := ev.live
	r := result{Scenario: "shards", System: s.sys.Name(), Trial: i, Values: map[string]float64{},
		Params: map[string]any{"event": ev.name, "database": s.db, "keys": s.spec.Keys, "live": len(live), "lease_s": s.spec.Lease.Seconds(), "loadavg_start": loadLine()}}
	before := s.tr.leaders()
	led0, stmts, _ := s.tr.counts()
	r.Values["min_moves"] = float64(minMoves(s.spec.Keys, led0, live))
	stmts0, cpu0 := map[string]int64{}, map[string]time.Duration{}
	for id, p := range s.procs {
		if !p.exited() {
			stmts0[id] = stmts[id]
			cpu0[id], _ = procCPU(p.cmd.Process.Pid)
		}
	}
	srv0 := s.server.sample(ctx)
	t0 := time.Now()
	if err := ev.act(); err != nil {
		r.Error = "event: " + err.Error()
		return r
	}
	peak := map[string]int{}
	fairAt, err := s.waitFair(ctx, t0, live, peak, cmp.Or(ev.hold, s.spec.Lease))
	t1 := time.Now()
	if err != nil {
		r.Error = err.Error()
	}
	for id, n := range peak {
		r.Values["peak_"+id] = float64(n)
	}
	s.measure(&r, before, stmts0, cpu0, t0, fairAt, t1, live)
	if st, rows, cpu, ok := rates(srv0, s.server.sample(ctx)); ok {
		r.Values["server_statements_per_s"], r.Values["server_rows_written_per_s"], r.Values["server_cpu_percent"] = st, rows, cpu
	}
	return r
}

// waitFair waits until the spread has been fair for hold; it returns when it
// became fair. It keeps in peak the most keys each candidate led at once.
func (s *shardsRun) waitFair(ctx context.Context, t0 time.Time, live []string, peak map[string]int, hold time.Duration) (time.Time, error) {
	var since time.Time
	for {
		c, _, _ := s.tr.counts()
		for id, n := range c {
			peak[id] = max(peak[id], n)
		}
		now := time.Now()
		switch {
		case !s.tr.fair(live):
			since = time.Time{}
		case since.IsZero():
			since = now
		case now.Sub(since) >= hold:
			return since, nil
		}
		if now.Sub(t0) > s.timeout+hold || ctx.Err() != nil {
			c, _, notLed := s.tr.counts()
			return since, fmt.Errorf("not fair within %v: leads %v, %d keys not led", s.timeout, c, notLed)
		}
		time.Sleep(s.poll)
	}
}

func (s *shardsRun) measure(r *result, before []string, stmts0 map[string]int64, cpu0 map[string]time.Duration, t0, fairAt, t1 time.Time, live []string) {
	after := s.tr.leaders()
	moved := 0
	for k := range after {
		if after[k] != before[k] {
			moved++
		}
	}
	gap, most, taken := s.tr.window(t0, t1)
	led, stmts, notLed := s.tr.counts()
	secs := t1.Sub(t0).Seconds()
	r.Params["led"] = led
	r.Params["loadavg_end"] = loadLine()
	r.Values["moved"] = float64(moved)
	r.Values["taken"] = float64(taken)
	r.Values["max_gap_ms"] = ms(gap)
	r.Values["max_leaders"] = float64(most)
	r.Values["not_led"] = float64(notLed)
	r.Values["window_ms"] = ms(t1.Sub(t0))
	if !fairAt.IsZero() {
		r.Values["fair_ms"] = ms(fairAt.Sub(t0))
	}
	for _, id := range live {
		p := s.procs[id]
		if c, ok := procCPU(p.cmd.Process.Pid); ok {
			r.Values["cpu_percent_"+id] = 100 * (c - cpu0[id]).Seconds() / secs
		}
		r.Values["statements_per_s_"+id] = float64(stmts[id]-stmts0[id]) / secs
	}
	for id, p := range s.procs {
		if _, ran := cpu0[id]; ran && p.exited() {
			r.Params["exit_"+id] = s.tr.exitOf(id)
			if p.err != nil && !strings.Contains(p.err.Error(), "signal: killed") {
				r.Error = strings.TrimSpace(r.Error + " " + p.err.Error())
			}
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// shardsTable renders the shards events, one row each.
func shardsTable(w io.Writer, rs []result) {
	first := true
	for _, r := range rs {
		if r.Scenario != "shards" {
			continue
		}
		if first {
			fmt.Fprintf(w, "\n### Shards: four balanced candidate processes (lease %vs)\n\n", r.Params["lease_s"])
			fmt.Fprintf(w, "| database | event | keys led per candidate | keys moved (fewest possible) | longest without leader ms | fair after ms | most leaders of one key | CPU %% per candidate | batched statements/s per candidate | server: statements/s, rows written/s, CPU %% | error |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
			first = false
		}
		led := ledOf(r.Params["led"])
		var ids []string
		for id := range led {
			ids = append(ids, id)
		}
		for k := range r.Values {
			if id, ok := strings.CutPrefix(k, "cpu_percent_"); ok && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		var ls, cpu, st []string
		for _, id := range ids {
			ls = append(ls, fmt.Sprintf("%s %d", id, led[id]))
			if v, ok := r.Values["cpu_percent_"+id]; ok {
				cpu = append(cpu, fmt.Sprintf("%s %s", id, f1(v)))
				st = append(st, fmt.Sprintf("%s %s", id, f1(r.Values["statements_per_s_"+id])))
			}
		}
		fair := "–"
		if v, ok := r.Values["fair_ms"]; ok {
			fair = f1(v)
		}
		server := "–"
		if v, ok := r.Values["server_statements_per_s"]; ok {
			server = fmt.Sprintf("%s, %s, %s", f1(v), f1(r.Values["server_rows_written_per_s"]), f1(r.Values["server_cpu_percent"]))
		}
		fmt.Fprintf(w, "| %v | %v | %s | %.0f (%.0f) | %s | %s | %.0f | %s | %s | %s | %s |\n", r.Params["database"], r.Params["event"],
			strings.Join(ls, ", "), r.Values["moved"], r.Values["min_moves"], f1(r.Values["max_gap_ms"]), fair, r.Values["max_leaders"],
			strings.Join(cpu, ", "), strings.Join(st, ", "), server, r.Error)
	}
}

// ledOf returns the keys led per candidate of a result's params, as recorded or
// as read back from JSON.
func ledOf(v any) map[string]int {
	switch v := v.(type) {
	case map[string]int:
		return v
	case map[string]any:
		out := map[string]int{}
		for id, n := range v {
			if f, ok := n.(float64); ok {
				out[id] = int(f)
			}
		}
		return out
	}
	return nil
}
