// Command bench compares casleader with the INSERT … ON DUPLICATE KEY UPDATE
// election design and with etcd's concurrency.Election, in one process run with the
// same lease and heartbeat: crash failover, graceful handover, steady-state load, a
// herd of 64 candidates and one process leading up to 10,000 keys (the last two for
// casleader only). casleader alone also runs: load (what one key with five
// candidates and the library's defaults costs the database server, counted apart
// from the server's other clients, -load-for; see serverload.go), scale (100,000 keys led by this process
// and followed by a second process it starts, -scale-keys, -scale-for), electors
// (10,000 single-key Electors on one store, beside one group, -electors) and, only when asked,
// saturate (the election under pgbench on PostgreSQL and sysbench on MariaDB, which
// must be installed and their databases initialised: see BENCHMARKS.md), and
// roundtrip (what each statement of a handover costs on PostgreSQL and MariaDB,
// with PostgreSQL's wait events), and shards (four candidate processes, each a
// balanced group over the same keys, started one by one, one killed, one stopped
// and restarted: the spread after each event, -shards-keys, -shards-lease,
// -shards-together for 100,000 keys; see shards.go).
//
//	cd bench && go run . [-trials N] [-lease D -heartbeat D] [-followers N -parallel N] [-smoke] [-out DIR] [-only failover,handover,steady,load,herd,keys,scale,electors,shards,saturate,roundtrip]
//
// It prints markdown tables, and writes (by default into results/) DIR/results.jsonl (one JSON object per
// measurement), DIR/summary.md, DIR/failover.svg and DIR/handover.svg. Databases
// come from CASLEADER_MYSQL_DSN, CASLEADER_POSTGRES_DSN and CASLEADER_PGBOUNCER_DSN
// (defaults: local MariaDB and PostgreSQL, database test); etcd is embedded and
// listens on 127.0.0.1 only. -smoke is a one-trial quick run for CI: it never
// asserts timings, and fails only when a run breaks (setup errors, two leaders at
// once, a takeover before the lease expired; in shards, on SQLite only with 60
// keys, a key not led at the end).
package main

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	trials := flag.Int("trials", 20, "trials per failover/handover/herd measurement")
	followers := flag.Int("followers", 2, "followers of the leader in each failover trial")
	parallel := flag.Int("parallel", 1, "failover trials run at once, each on a key of its own (the first runs alone)")
	smoke := flag.Bool("smoke", false, "one quick trial of everything (CI); never asserts timings")
	out := flag.String("out", "", "directory for results.jsonl, summary.md and the SVG timelines (default results, or a temporary directory with -smoke)")
	only := flag.String("only", "failover,handover,steady,load,herd,keys,scale,electors,shards", "scenarios to run (also: saturate, which needs pgbench and sysbench and their databases; roundtrip, the cost of each handover statement)")
	rttN := flag.Int("roundtrips", 300, "statements of each kind in the roundtrip run")
	systems := flag.String("systems", "", "run only the systems whose name contains one of these comma-separated words")
	steadyFor := flag.Duration("steady", 20*time.Second, "measuring window of each steady-state run")
	loadFor := flag.Duration("load-for", time.Minute, "measuring window of the load run (5 candidates, lease 3 s, heartbeat 1 s, defaults otherwise; statements at the server)")
	keysFor := flag.Duration("keys-for", 30*time.Second, "measuring window of each key-scaling run (10,000 keys: at least 2 min)")
	scaleKeysN := flag.Int("scale-keys", 100000, "keys of the scale run (one process leads them, another follows them)")
	scaleFor := flag.Duration("scale-for", 10*time.Minute, "measuring window of the scale run")
	satFor := flag.Duration("saturate-for", 10*time.Minute, "how long the election runs under the saturating load")
	satBase := flag.Duration("saturate-baseline", 5*time.Minute, "how long the load runs alone first, for its rate without the election")
	traceTakeovers := flag.String("trace-takeovers", "", "saturate: write each takeover's reads to this file")
	satTerm := flag.Duration("saturate-term", 20*time.Second, "saturate: how long each term runs before its leader is killed")
	pgbenchDB := flag.String("pgbench-db", "pgbench", "database initialised with pgbench -i -s 50 for the saturation run")
	sysbenchDB := flag.String("sysbench-db", "sbtest", "MariaDB database prepared with sysbench oltp_write_only --tables=4 --table-size=250000 for the saturation run")
	electorsN := flag.Int("electors", 10000, "single-key electors of the electors run, on one store")
	electorsFor := flag.Duration("electors-for", time.Minute, "measuring window of the electors run")
	followJSON := flag.String("follow", "", "internal: run as the follower process of the scale run")
	shardsKeys := flag.Int("shards-keys", 1000, "keys of the shards run (each of its four candidate processes runs a balanced group over all of them)")
	shardsLease := flag.Duration("shards-lease", 5*time.Second, "lease of the shards run's groups (renew deadline 3/5 of it, heartbeat 1/5, poll = lease)")
	shardsTogether := flag.Bool("shards-together", false, "shards: start the four candidates at once, watch the fair spread for -shards-steady, then kill, stop and restart (for 100,000 keys, where joins one by one would take hours)")
	shardsSteady := flag.Duration("shards-steady", time.Minute, "shards with -shards-together: how long the fair spread of four is watched (statements and CPU at rest)")
	shardsTimeout := flag.Duration("shards-timeout", 0, "shards: how long each event may take to become fair before it is recorded as not fair (default 5m, 2m with -smoke)")
	shardJSON := flag.String("shard", "", "internal: run as a candidate process of the shards run")
	verbose := flag.String("v", "", "log the casleader candidates at this level (debug, info, warn)")
	child := flag.Bool("child", false, "run as a SQLite candidate process of another run (internal)")
	childDB := flag.String("child-db", "", "with -child: the SQLite database file")
	childTable := flag.String("child-table", "", "with -child: the election table")
	childKey := flag.String("child-key", "", "with -child: the election key")
	childID := flag.String("child-id", "", "with -child: the candidate ID")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (in a scale run, the leader) to this file")
	flag.Parse()
	if *traceTakeovers != "" {
		f, err := os.Create(*traceTakeovers)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		traceOut = log.New(f, "", log.Lmicroseconds)
	}
	if *child {
		childMain(*childDB, *childTable, *childKey, *childID, benchTiming())
		return
	}
	if *verbose != "" {
		var lvl slog.Level
		check(lvl.UnmarshalText([]byte(*verbose)))
		candidateLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	}
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	if *smoke {
		*trials, *steadyFor, *keysFor, *loadFor = 1, 3*time.Second, 3*time.Second, 5*time.Second
		*scaleKeysN, *scaleFor = 2000, 3*time.Second
		*electorsN, *electorsFor = 50, 3*time.Second
		*shardsKeys, *shardsLease = 60, 2*time.Second
	}
	if *out == "" {
		*out = "results"
		if *smoke {
			*out = filepath.Join(os.TempDir(), "casleader-bench-smoke")
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	d := dbs{
		MySQL:     cmp.Or(os.Getenv("CASLEADER_MYSQL_DSN"), "root@tcp(127.0.0.1:3306)/test"),
		Postgres:  cmp.Or(os.Getenv("CASLEADER_POSTGRES_DSN"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		PgBouncer: os.Getenv("CASLEADER_PGBOUNCER_DSN"),
	}
	if *followJSON != "" {
		check(follow(ctx, d, *followJSON))
		return
	}
	if *shardJSON != "" {
		check(shardChild(ctx, d, *shardJSON))
		return
	}
	if *cpuProfile != "" {
		pf, err := os.Create(*cpuProfile)
		check(err)
		check(pprof.StartCPUProfile(pf))
		defer func() {
			pprof.StopCPUProfile()
			check(pf.Close())
		}()
	}
	dir, err := os.MkdirTemp("", "casleader-bench-sqlite-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d.SQLiteDir = dir
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}

	// One setting for everybody, by default lease 2 s (etcd session TTL 2 s, its
	// minimum here being 1.5 s), heartbeat 500 ms (etcd's keep-alive is TTL/3 and not
	// configurable through concurrency.Session), casleader's renew deadline 1.4 s, and
	// follower poll interval = lease (followers read once per lease unless woken).
	t := benchTiming()
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		want[strings.TrimSpace(s)] = true
	}
	hdr := fmt.Sprintf("lease %v, heartbeat %v, renew deadline %v (casleader), poll %v (casleader), %d trials, %s/%s, %d CPUs, GOMAXPROCS %d",
		t.Lease, t.Heartbeat, t.Renew, t.Poll, *trials, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	log.Printf("bench: %s", hdr)
	load := watchLoad()

	var results []result
	var broken []string
	record := func(r result) {
		results = append(results, r)
		b, _ := jsonLine(r)
		log.Printf("%s", b)
		if r.Error != "" {
			log.Printf("  error: %s", r.Error)
		}
		if r.Values["max_leaders"] > 1 {
			broken = append(broken, fmt.Sprintf("%s %s: %v candidates led at once", r.Scenario, r.System, r.Values["max_leaders"]))
		}
		if strings.Contains(r.Error, "before the lease expired") && !strings.HasPrefix(r.System, "etcd") {
			broken = append(broken, fmt.Sprintf("%s %s trial %d: %s", r.Scenario, r.System, r.Trial, r.Error))
		}
	}

	type mk struct {
		name string
		new  func() (system, error)
	}
	cas := func(name string, o casOptions) mk {
		return mk{name, func() (system, error) { return newCasSystem(ctx, name, t, d, o) }}
	}
	upsert := mk{"upsert/MariaDB", func() (system, error) { return newUpsertSystem(ctx, t, d.MySQL) }}
	etcd := mk{"etcd-election", func() (system, error) { return newEtcdSystem(t) }}
	latencySystems := []mk{
		cas("casleader/PostgreSQL+notify", casOptions{dialect: "postgres", notifier: true}),
		cas("casleader/MariaDB+notify", casOptions{dialect: "mariadb", notifier: true}),
		cas("casleader/SQLite+wake (one process, a pool each)", casOptions{dialect: "sqlite", notifier: true}),
		{"casleader/SQLite+wake (a process each)", func() (system, error) { return newProcSystem("casleader/SQLite+wake (a process each)", d.SQLiteDir) }},
		cas("casleader/MariaDB (polling)", casOptions{dialect: "mariadb"}),
		cas("casleader/PostgreSQL+notify, HandoverTo", casOptions{dialect: "postgres", notifier: true, handover: true}),
		cas("casleader/MariaDB+notify, HandoverTo", casOptions{dialect: "mariadb", notifier: true, handover: true}),
		cas("casleader/SQLite+wake (one process, a pool each), HandoverTo", casOptions{dialect: "sqlite", notifier: true, handover: true}),
		cas("casleader/PostgreSQL+notify, resign to a live follower", casOptions{dialect: "postgres", notifier: true, members: true}),
		cas("casleader/MariaDB+notify, resign to a live follower", casOptions{dialect: "mariadb", notifier: true, members: true}),
		cas("casleader/SQLite+wake (one process, a pool each), resign to a live follower", casOptions{dialect: "sqlite", notifier: true, members: true}),
	}
	if d.PgBouncer != "" {
		latencySystems = append(latencySystems, cas("casleader/PgBouncer-tx (notify falls back)", casOptions{dialect: "pgbouncer", notifier: true}))
	}
	latencySystems = append(latencySystems, upsert, etcd)

	var failTL, handTL []*timeline
	run := func(m mk, f func(system)) {
		if ctx.Err() != nil || !selected(m.name, *systems) {
			return
		}
		sys, err := m.new()
		if err != nil {
			broken = append(broken, fmt.Sprintf("%s: setup: %v", m.name, err))
			log.Printf("%s: setup failed: %v", m.name, err)
			return
		}
		defer sys.Close()
		f(sys)
	}
	if want["failover"] {
		for _, m := range latencySystems {
			if strings.Contains(m.name, "polling") || strings.Contains(m.name, "PgBouncer") || strings.Contains(m.name, "HandoverTo") || strings.Contains(m.name, "resign to") {
				continue // notifications and handovers play no part in a crash
			}
			if strings.Contains(m.name, "a process each") {
				continue // a killed child cannot report its last renewal
			}
			run(m, func(sys system) {
				tl := trialsInParallel(ctx, *trials, *parallel, func(i int) (result, *timeline) {
					return failover(ctx, sys, t, *followers+1, i, i == 0)
				}, record)
				if tl != nil {
					failTL = append(failTL, tl, closeUp(tl, 1))
				}
			})
		}
	}
	if want["handover"] {
		for _, m := range latencySystems {
			run(m, func(sys system) {
				for i := 0; i < *trials && ctx.Err() == nil; i++ {
					r, tl := handover(ctx, sys, t, i)
					record(r)
					if tl != nil && i == 0 {
						handTL = append(handTL, tl)
						if last := tl.Events[len(tl.Events)-1].At; last.Sub(tl.Events[0].At) < 100*time.Millisecond {
							handTL = append(handTL, closeUp(tl, 0))
						}
					}
				}
			})
		}
	}
	if want["roundtrip"] {
		n := *rttN
		if *smoke {
			n = 3
		}
		for _, r := range roundtrips(ctx, d, n) {
			record(r)
		}
	}
	if want["steady"] {
		steadySystems := []mk{
			cas("casleader/PostgreSQL", casOptions{dialect: "postgres", shared: true}),
			cas("casleader/MariaDB", casOptions{dialect: "mariadb", shared: true}),
			cas("casleader/SQLite", casOptions{dialect: "sqlite", shared: true}),
			upsert, etcd,
		}
		for _, m := range steadySystems {
			run(m, func(sys system) {
				for _, n := range []int{1, 10, 50} {
					record(steady(ctx, sys, t, n, *steadyFor))
				}
			})
		}
	}
	if want["load"] {
		for _, dialect := range []string{"postgres", "mariadb"} {
			if ctx.Err() == nil && selected("casleader/"+dialect, *systems) {
				r := serverLoad(ctx, d, dialect, *loadFor)
				record(r)
				if r.Error != "" {
					broken = append(broken, fmt.Sprintf("load %s: %s", dialect, r.Error))
				}
			}
		}
	}
	if want["herd"] {
		for _, m := range []mk{
			cas("casleader/PostgreSQL", casOptions{dialect: "postgres", conns: 1}),
			cas("casleader/MariaDB", casOptions{dialect: "mariadb", conns: 1}),
			cas("casleader/SQLite", casOptions{dialect: "sqlite", conns: 1}),
		} {
			run(m, func(sys system) {
				for i := range max(*trials/4, 1) {
					record(herd(ctx, sys, 64, i))
				}
			})
		}
	}
	if want["keys"] {
		for _, m := range []struct {
			name string
			o    casOptions
		}{
			{"casleader-group/PostgreSQL", casOptions{dialect: "postgres"}},
			{"casleader-group/MariaDB", casOptions{dialect: "mariadb"}},
			{"casleader-group/SQLite", casOptions{dialect: "sqlite"}},
		} {
			run(cas(m.name, m.o), func(sys system) {
				for _, k := range []int{1, 100, 1000, 10000} {
					dur := *keysFor
					if k == 10000 && !*smoke {
						dur = max(dur, 2*time.Minute)
					}
					record(keyScale(ctx, sys.(*casSystem), k, dur))
				}
			})
		}
	}

	if want["scale"] {
		for _, m := range []struct {
			name string
			o    casOptions
		}{
			{"casleader-group/PostgreSQL", casOptions{dialect: "postgres"}},
			{"casleader-group/MariaDB", casOptions{dialect: "mariadb"}},
			{"casleader-group/SQLite", casOptions{dialect: "sqlite"}},
		} {
			run(cas(m.name, m.o), func(sys system) {
				for _, r := range scale(ctx, sys.(*casSystem), *scaleKeysN, *scaleFor) {
					record(r)
				}
			})
		}
	}

	if want["electors"] {
		for _, m := range []struct {
			name string
			o    casOptions
		}{
			{"casleader/PostgreSQL", casOptions{dialect: "postgres"}},
			{"casleader/MariaDB", casOptions{dialect: "mariadb"}},
			{"casleader/SQLite", casOptions{dialect: "sqlite"}},
		} {
			run(cas(m.name, m.o), func(sys system) {
				record(electors(ctx, sys.(*casSystem), *electorsN, *electorsFor))
			})
		}
	}
	if want["shards"] {
		for _, m := range []struct {
			db string
			o  casOptions
		}{
			{"PostgreSQL", casOptions{dialect: "postgres"}},
			{"MariaDB", casOptions{dialect: "mariadb"}},
			{"SQLite", casOptions{dialect: "sqlite"}},
		} {
			if *smoke && m.db != "SQLite" {
				continue // one database is enough to show the run works
			}
			run(cas("casleader-group/"+m.db, m.o), func(sys system) {
				o := shardsOptions{Keys: *shardsKeys, Lease: *shardsLease, Smoke: *smoke, Together: *shardsTogether, Steady: *shardsSteady, Timeout: *shardsTimeout}
				rs := shards(ctx, sys.(*casSystem), m.db, o)
				for _, r := range rs {
					record(r)
					// -smoke asserts no timing: a spread not yet fair is not a failure there.
					if r.Error != "" && !(*smoke && strings.HasPrefix(r.Error, "not fair")) {
						broken = append(broken, fmt.Sprintf("shards %s %v: %s", m.db, r.Params["event"], r.Error))
					}
				}
				if len(rs) == 0 || rs[len(rs)-1].Values["not_led"] != 0 || rs[len(rs)-1].Params["event"] != "restart c3" && ctx.Err() == nil {
					broken = append(broken, fmt.Sprintf("shards %s: the run did not end with every key led", m.db))
				}
			})
		}
	}
	if want["saturate"] {
		for _, m := range []struct {
			name string
			o    casOptions
			load loadTool
		}{
			{"casleader-group/PostgreSQL", casOptions{dialect: "postgres"}, pgbenchTool(*pgbenchDB, 16)},
			{"casleader-group/MariaDB", casOptions{dialect: "mariadb"}, sysbenchTool(*sysbenchDB, 4, 250000, 16)},
		} {
			run(cas(m.name, m.o), func(sys system) {
				record(saturate(ctx, sys.(*casSystem), m.load, *satBase, *satFor, *satTerm))
			})
		}
	}

	// Output.
	var md bytes.Buffer
	fmt.Fprintf(&md, "Settings: %s.\n\nMachine: %s.\n", hdr, load)
	markdown(&md, results, map[string]string{"failover": "upsert/MariaDB", "handover": "upsert/MariaDB"})
	roundtripTable(&md, results)
	shardsTable(&md, results)
	fmt.Fprintf(&md, "\nRatios against etcd-election (p50): %s\n", etcdRatios(results))
	os.Stdout.Write(md.Bytes())
	check(os.WriteFile(filepath.Join(*out, "summary.md"), md.Bytes(), 0o644))
	f, err := os.Create(filepath.Join(*out, "results.jsonl"))
	check(err)
	check(writeJSONL(f, results))
	check(f.Close())
	check(svg(filepath.Join(*out, "failover.svg"), "Crash failover: the leader is killed; followers win once its lease has expired", failTL))
	check(svg(filepath.Join(*out, "handover.svg"), "Graceful handover: the leader resigns; the next one wins", handTL))
	if len(broken) > 0 {
		fmt.Fprintf(os.Stderr, "bench: broken runs:\n  %s\n", strings.Join(broken, "\n  "))
		if *cpuProfile != "" {
			pprof.StopCPUProfile()
		}
		os.Exit(1)
	}
}

func selected(name, words string) bool {
	if words == "" {
		return true
	}
	for _, w := range strings.Split(words, ",") {
		if w != "" && strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// closeUp returns a copy of tl drawn around its events from the from-th on.
func closeUp(tl *timeline, from int) *timeline {
	z := *tl
	z.Zoom, z.ZoomFrom = true, from
	return &z
}

func etcdRatios(rs []result) string {
	var parts []string
	for _, sc := range []struct{ scenario, metric string }{{"failover", "after_expiry_ms"}, {"handover", "after_release_ms"}} {
		order, vals, _ := values(rs, sc.scenario, sc.metric)
		base := summarize(vals["etcd-election"]).P50
		if base == 0 {
			continue
		}
		for _, sys := range order {
			if strings.HasPrefix(sys, "casleader") && len(vals[sys]) > 0 {
				parts = append(parts, fmt.Sprintf("%s %s %.2g×", sc.scenario, sys, summarize(vals[sys]).P50/base))
			}
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

func jsonLine(r result) ([]byte, error) {
	var b bytes.Buffer
	err := writeJSONL(&b, []result{r})
	return bytes.TrimSpace(b.Bytes()), err
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

var (
	leaseFlag     = flag.Duration("lease", 2*time.Second, "lease of every system (etcd: its TTL, rounded up to whole seconds); casleader's renew deadline is 70% of it and its poll interval equal to it")
	heartbeatFlag = flag.Duration("heartbeat", 500*time.Millisecond, "heartbeat of the casleader and upsert systems (etcd keeps its session alive every TTL/3)")
)

// benchTiming is the one setting for everybody (see main): -lease and -heartbeat.
func benchTiming() timing {
	l := *leaseFlag
	return timing{Lease: l, Renew: l * 7 / 10, Heartbeat: *heartbeatFlag, Poll: l}
}
