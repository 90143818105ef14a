package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/mysql"
)

// appName names the election's PostgreSQL sessions, so that the saturation run can
// tell them apart in pg_stat_activity.
const appName = "casleader-bench"

// loadTool is an external load generator run against the election's server.
type loadTool struct {
	name  string
	args  func(secs int) []string
	parse func(out []byte) (tps float64, ok bool)
	// interval matches one line of the tool's progress report (every
	// loadInterval), its transactions per second in the first group.
	interval *regexp.Regexp
}

// loadInterval is how often the load tools report their rate: the spread of those
// rates within a phase is the noise a difference between phases is judged against.
const loadInterval = 10

var (
	pgbenchTPS       = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	pgbenchProgress  = regexp.MustCompile(`(?m)^progress: [0-9.]+ s, ([0-9.]+) tps`)
	sysbenchTPS      = regexp.MustCompile(`transactions:\s+\d+\s+\(([0-9.]+) per sec\.\)`)
	sysbenchProgress = regexp.MustCompile(`(?m)^\[ *\d+s \] thds: \d+ tps: ([0-9.]+)`)
)

func pgbenchTool(db string, clients int) loadTool {
	return loadTool{
		name: fmt.Sprintf("pgbench -c %d (database %s)", clients, db),
		args: func(secs int) []string {
			return []string{"pgbench", "-h", "127.0.0.1", "-U", "postgres", "-c", strconv.Itoa(clients), "-j", "2", "-T", strconv.Itoa(secs),
				"-P", strconv.Itoa(loadInterval), db}
		},
		parse:    func(out []byte) (float64, bool) { return firstFloat(pgbenchTPS, out) },
		interval: pgbenchProgress,
	}
}

func sysbenchTool(db string, tables, size, threads int) loadTool {
	return loadTool{
		name: fmt.Sprintf("sysbench oltp_write_only --threads=%d (database %s, %d tables × %d rows)", threads, db, tables, size),
		args: func(secs int) []string {
			return []string{"sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-user=root", "--mysql-db=" + db,
				"--tables=" + strconv.Itoa(tables), "--table-size=" + strconv.Itoa(size), "--threads=" + strconv.Itoa(threads), "--time=" + strconv.Itoa(secs),
				"--report-interval=" + strconv.Itoa(loadInterval), "run"}
		},
		parse:    func(out []byte) (float64, bool) { return firstFloat(sysbenchTPS, out) },
		interval: sysbenchProgress,
	}
}

func firstFloat(re *regexp.Regexp, out []byte) (float64, bool) {
	m := re.FindSubmatch(out)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	return v, err == nil
}

// loadRun is one run of a load tool: its overall rate and its rate in each
// reporting interval.
type loadRun struct {
	tps       float64
	intervals []float64
}

// runLoad runs the load tool for dur.
func runLoad(ctx context.Context, t loadTool, dur time.Duration) (loadRun, error) {
	a := t.args(int(dur.Seconds()))
	out, err := exec.CommandContext(ctx, a[0], a[1:]...).CombinedOutput()
	if err != nil {
		return loadRun{}, fmt.Errorf("%s: %w: %s", t.name, err, tail(out))
	}
	tps, ok := t.parse(out)
	if !ok {
		return loadRun{}, fmt.Errorf("%s: no transaction rate in its output: %s", t.name, tail(out))
	}
	r := loadRun{tps: tps}
	for _, m := range t.interval.FindAllSubmatch(out, -1) {
		if v, err := strconv.ParseFloat(string(m[1]), 64); err == nil {
			r.intervals = append(r.intervals, v)
		}
	}
	return r, nil
}

// meanSD returns the mean and the sample standard deviation of vs.
func meanSD(vs []float64) (mean, sd float64) {
	if len(vs) == 0 {
		return 0, 0
	}
	for _, v := range vs {
		mean += v
	}
	mean /= float64(len(vs))
	if len(vs) < 2 {
		return mean, 0
	}
	for _, v := range vs {
		sd += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sd / float64(len(vs)-1))
}

// phaseValues records a load phase: the tool's overall rate, the mean and spread of
// its interval rates, the load average at the phase's end, and this process's CPU
// over the phase (cpu: its CPU time at the start, wall: the phase's length).
func phaseValues(r *result, name string, lr loadRun, cpu time.Duration, wall time.Duration) {
	if wall > 0 {
		r.Values["bench_cpu_percent_"+name] = 100 * float64(cpuTime()-cpu) / float64(wall)
	}
	r.Values["load_tps_"+name] = lr.tps
	m, sd := meanSD(lr.intervals)
	r.Values["load_interval_mean_tps_"+name] = m
	r.Values["load_interval_sd_tps_"+name] = sd
	r.Values["load_intervals_"+name] = float64(len(lr.intervals))
	r.Values["load_avg_"+name], _ = loadavg()
}

// compare records how much slower phase b ran than phase a, in percent of a's mean
// interval rate, with the half-width of its 95 % confidence interval (Welch, normal
// approximation; the intervals are not independent, so it is a lower bound of the
// uncertainty).
func compare(r *result, name string, a, b loadRun) {
	ma, sa := meanSD(a.intervals)
	mb, sb := meanSD(b.intervals)
	if ma == 0 || len(a.intervals) < 2 || len(b.intervals) < 2 {
		return
	}
	se := math.Sqrt(sa*sa/float64(len(a.intervals)) + sb*sb/float64(len(b.intervals)))
	r.Values[name+"_percent"] = 100 * (ma - mb) / ma
	r.Values[name+"_ci95_percent"] = 100 * 1.96 * se / ma
}

func tail(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	return string(b)
}

// satCandidate is one group of the saturation run, on its own pool.
type satCandidate struct {
	id     string
	g      *casleader.Group
	gs     *groupStore
	cancel context.CancelFunc
	done   chan struct{}
	lost   int64 // leases lost, read before a crash
}

// satWin is a key won by a candidate of the saturation run.
type satWin struct {
	c   *satCandidate
	key string
	at  time.Time
}

func startSat(ctx context.Context, sys *casSystem, id string, keys []string, wins chan<- satWin) (*satCandidate, error) {
	st, closeFn, err := sys.open(ctx, 4)
	if err != nil {
		return nil, err
	}
	gs := &groupStore{Driver: st, mysql: sys.opt.dialect == "mariadb", trace: newTrace()}
	c := &satCandidate{id: id, gs: gs, done: make(chan struct{})}
	// Default timings: lease 15 s, renew deadline 10 s, heartbeat 2 s, poll 5 s.
	g, err := casleader.NewGroup(gs, casleader.GroupConfig{ID: id, Keys: keys, KeepLeaseOnExit: true, Logger: candidateLog.With("id", id),
		OnStartedLeading: func(ctx context.Context, key string, _ int64) {
			select {
			case wins <- satWin{c: c, key: key, at: time.Now()}:
			case <-ctx.Done():
			}
		}})
	if err != nil {
		closeFn()
		return nil, err
	}
	c.g = g
	rctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		defer closeFn()
		_ = g.Run(rctx)
	}()
	return c, nil
}

// crash stops the candidate without releasing its leases, like kill -9.
func (c *satCandidate) crash() {
	c.lost = c.g.Stats().LostLeases
	c.cancel()
	<-c.done
}

func (c *satCandidate) led(keys []string) []string {
	var out []string
	for _, k := range keys {
		if c.g.IsLeader(k) {
			out = append(out, k)
		}
	}
	return out
}

// waitSampler counts, every 20 ms, what the election's statements in the server wait
// on (PostgreSQL: wait_event_type/wait_event of its active sessions, none meaning on
// CPU; MariaDB: the processlist state of its running statements).
type waitSampler struct {
	mu      sync.Mutex
	counts  map[string]int
	samples int
}

func (w *waitSampler) reset() {
	w.mu.Lock()
	w.counts, w.samples = map[string]int{}, 0
	w.mu.Unlock()
}

func (w *waitSampler) snapshot() (int, map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.samples, maps.Clone(w.counts)
}

func sampleWaits(ctx context.Context, sys *casSystem) (*waitSampler, func(), error) {
	w := &waitSampler{counts: map[string]int{}}
	var query func(context.Context) (map[string]int, error)
	var closeFn func()
	switch sys.opt.dialect {
	case "postgres":
		pool, err := pgxpool.New(ctx, sys.dsn.Postgres)
		if err != nil {
			return nil, nil, err
		}
		closeFn = pool.Close
		query = func(ctx context.Context) (map[string]int, error) {
			rows, err := pool.Query(ctx, `SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, 'running'), count(*) FROM pg_stat_activity
				WHERE application_name = $1 AND state = 'active' GROUP BY 1`, appName)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			out := map[string]int{}
			for rows.Next() {
				var k string
				var n int
				if err := rows.Scan(&k, &n); err != nil {
					return nil, err
				}
				out[k] = n
			}
			return out, rows.Err()
		}
	case "mariadb":
		db, err := mysql.Open(sys.dsn.MySQL)
		if err != nil {
			return nil, nil, err
		}
		db.SetMaxOpenConns(1)
		closeFn = func() { db.Close() }
		query = func(ctx context.Context) (map[string]int, error) {
			return groupCount(ctx, db, `SELECT COALESCE(NULLIF(state, ''), '(none)'), COUNT(*) FROM information_schema.processlist
				WHERE command = 'Query' AND id <> CONNECTION_ID() AND info LIKE ? GROUP BY 1`, "%"+sys.table+"%")
		}
	default:
		return nil, nil, fmt.Errorf("no wait sampler for %s", sys.opt.dialect)
	}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			m, err := query(sctx)
			if err != nil {
				continue
			}
			w.mu.Lock()
			w.samples++
			for k, n := range m {
				w.counts[k] += n
			}
			w.mu.Unlock()
		}
	})
	return w, func() { cancel(); wg.Wait(); closeFn() }, nil
}

func groupCount(ctx context.Context, db *sql.DB, q string, args ...any) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}

// saturate runs the load alone for base; then again for base with the wait
// sampler running (the control: the benchmark's own work, without an election);
// then 3 candidates (groups of 10 keys, default timings, each on its own pool of 4)
// alone for a minute and under the load for dur, crashing the leader over and over
// during the load, each time its term has run for term: leases lost, renewal latency (alone and under load), failover
// from the crash to the next leader's win and its parts, what the election's
// statements wait on in the server, and the load's rate in each phase.
func saturate(ctx context.Context, sys *casSystem, load loadTool, base, dur, term time.Duration) result {
	r := result{Scenario: "saturate", System: sys.Name(), Params: map[string]any{"load": load.name, "seconds": dur.Seconds(), "baseline_seconds": base.Seconds(),
		"candidates": 3, "keys": 10, "interval_seconds": loadInterval, "term_seconds": term.Seconds()}, Values: map[string]float64{}}
	cpu0, t0 := cpuTime(), time.Now()
	alone, err := runLoad(ctx, load, base)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	phaseValues(&r, "alone", alone, cpu0, time.Since(t0))
	// The control: the sampler reads what the election's sessions wait on (there
	// are none yet) as often as it will beside the election.
	waits, stopWaits, err := sampleWaits(ctx, sys)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer stopWaits()
	cpu0, t0 = cpuTime(), time.Now()
	control, err := runLoad(ctx, load, base)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	phaseValues(&r, "control", control, cpu0, time.Since(t0))
	waits.reset()

	keys := scaleKeys(randName("sat"), 10)
	wins := make(chan satWin, 1024)
	var cands []*satCandidate
	var gone []*satCandidate
	defer func() {
		for _, c := range cands {
			c.crash()
		}
	}()
	for i := range 3 {
		c, err := startSat(ctx, sys, fmt.Sprintf("c%d", i+1), keys, wins)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		cands = append(cands, c)
	}
	lats := func() []time.Duration {
		var out []time.Duration
		for _, c := range append(append([]*satCandidate(nil), cands...), gone...) {
			c.gs.mu.Lock()
			out = append(out, c.gs.lat...)
			c.gs.lat = nil
			c.gs.mu.Unlock()
		}
		return out
	}
	time.Sleep(time.Minute)
	quiet := lats()
	r.Values["renew_quiet_p50_ms"] = ms(percentile(quiet, 0.5))
	r.Values["renew_quiet_p99_ms"] = ms(percentile(quiet, 0.99))
	waits.reset()

	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	type loadReply struct {
		run loadRun
		err error
	}
	loadDone := make(chan loadReply, 1)
	cpu0, t0 = cpuTime(), time.Now()
	go func() {
		lr, err := runLoad(lctx, load, dur)
		loadDone <- loadReply{lr, err}
	}()
	start := time.Now()
	lease := 15 * time.Second
	var failovers, afterExpiry []time.Duration
	var parts []takeover
	failed, restarts := 0, 0
	for time.Since(start) < dur-2*lease && ctx.Err() == nil {
		// The candidate leading the most keys, once it has led them for term: a
		// term killed within seconds of its start is known to its followers by
		// their first reads only, one that lived a few poll intervals by their
		// reads of a running leader, as a term that lives for hours is.
		time.Sleep(term)
		var victim *satCandidate
		var held []string
		for _, c := range cands {
			if l := c.led(keys); len(l) > len(held) {
				victim, held = c, l
			}
		}
		if victim == nil {
			continue
		}
		terms := map[string]int64{}
		for _, k := range held {
			terms[k] = victim.g.Token(k)
		}
		t0 := time.Now()
		victim.crash()
		var rest []*satCandidate
		for _, c := range cands {
			if c != victim {
				rest = append(rest, c)
			}
		}
		cands, gone = rest, append(gone, victim)
		// The dead leader's last write of each key, by the database clock: its
		// lease expires L after it, and the next leader's winning write is judged
		// against that (the part of a failover the election controls).
		lastTick := map[string]time.Time{}
		if sys.executed != nil {
			for _, k := range held {
				if at, err := sys.executed(ctx, k); err == nil {
					lastTick[k] = at
				}
			}
		}
		pending := map[string]bool{}
		for _, k := range held {
			pending[k] = true
		}
		// Wins arrive from the candidates' OnStartedLeading; the winning write's
		// time is read beside the loop, so that a read under the load does not
		// delay noticing the next keys' new leaders; it must come before the new
		// leader's first renewal (a heartbeat) moves tick_time.
		var reads sync.WaitGroup
		var readMu sync.Mutex
		timeout := time.NewTimer(2 * lease)
	collect:
		for len(pending) > 0 {
			select {
			case w := <-wins:
				if !pending[w.key] || w.c == victim {
					continue
				}
				delete(pending, w.key)
				failovers = append(failovers, w.at.Sub(t0))
				if last, ok := lastTick[w.key]; ok {
					reads.Go(func() {
						won, err := sys.executed(ctx, w.key)
						if err != nil {
							return
						}
						p := w.c.gs.trace.takeoverOf(w.key, terms[w.key], last, won, lease)
						readMu.Lock()
						afterExpiry = append(afterExpiry, won.Sub(last)-lease)
						parts = append(parts, p)
						readMu.Unlock()
					})
				}
			case <-timeout.C:
				break collect
			case <-ctx.Done():
				break collect
			}
		}
		timeout.Stop()
		reads.Wait()
		failed += len(pending)
		restarts++
		c, err := startSat(ctx, sys, fmt.Sprintf("c%d", 3+restarts), keys, wins)
		if err != nil {
			r.Error = err.Error()
			break
		}
		cands = append(cands, c)
	}
	reply := <-loadDone
	samples, counts := waits.snapshot()
	under := lats()
	if reply.err != nil && r.Error == "" {
		r.Error = reply.err.Error()
	}
	phaseValues(&r, "with_election", reply.run, cpu0, time.Since(t0))
	if alone.tps > 0 && reply.run.tps > 0 {
		r.Values["load_slowdown_percent"] = 100 * (alone.tps - reply.run.tps) / alone.tps
	}
	compare(&r, "control_vs_alone_slowdown", alone, control)
	compare(&r, "election_vs_control_slowdown", control, reply.run)
	r.Values["renew_p50_ms"] = ms(percentile(under, 0.5))
	r.Values["renew_p99_ms"] = ms(percentile(under, 0.99))
	r.Values["renew_max_ms"] = ms(percentile(under, 1))
	r.Values["renewals"] = float64(len(under))
	var lost int64
	for _, c := range gone {
		lost += c.lost
	}
	for _, c := range cands {
		lost += c.g.Stats().LostLeases
	}
	r.Values["lost_leases"] = float64(lost)
	r.Values["failover_trials"] = float64(restarts)
	r.Values["failover_keys"] = float64(len(failovers))
	r.Values["failover_missing"] = float64(failed)
	r.Values["failover_p50_ms"] = ms(percentile(failovers, 0.5))
	r.Values["failover_p99_ms"] = ms(percentile(failovers, 0.99))
	r.Values["failover_max_ms"] = ms(percentile(failovers, 1))
	// From the dead leader's lease expiry (its last write + L) to the next leader's
	// winning write, both by the database clock.
	if len(afterExpiry) > 0 {
		r.Values["after_expiry_keys"] = float64(len(afterExpiry))
		r.Values["after_expiry_p50_ms"] = ms(percentile(afterExpiry, 0.5))
		r.Values["after_expiry_p99_ms"] = ms(percentile(afterExpiry, 0.99))
		r.Values["after_expiry_max_ms"] = ms(percentile(afterExpiry, 1))
	}
	takeoverParts(&r, parts)
	r.Values["lease_ms"] = ms(lease)
	r.Values["wait_samples"] = float64(samples)
	for k, n := range counts {
		r.Values["wait "+k] = float64(n)
	}
	return r
}
