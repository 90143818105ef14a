package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
)

// roundtrips measures what one statement of the handover costs on each SQL
// database, with casleader's own statements on a table of their own, one
// connection, the kinds interleaved so that the machine's load weighs on each
// alike:
//
//   - ping: SELECT 1, the round trip with no table and no commit;
//   - observe: the follower's read of the row;
//   - renew: a compare-and-set UPDATE of the row (the election's cost, less its
//     term computation), committed durably;
//   - renew-async (PostgreSQL only): the same with synchronous_commit = off, on a
//     connection of its own: the difference is the commit's wait for its WAL flush;
//   - release: the release UPDATE (on PostgreSQL with its pg_notify, whose commit
//     takes the notification queue's lock) followed by an ElectReleased, which puts
//     the row back; both timed.
//
// On PostgreSQL it also samples pg_stat_activity for the measuring connection every
// millisecond: while a statement runs, which wait event (or none: on CPU, or not
// scheduled) the backend shows. The second half of the PostgreSQL run has three
// more connections LISTENing on the stores' channel (a handover trial's three
// listeners), so that each release's NOTIFY wakes them: the statements of that half
// are marked ", 3 listeners".
func roundtrips(ctx context.Context, d dbs, n int) []result {
	var out []result
	for _, dialect := range []string{"postgres", "mariadb"} {
		rs, err := roundtripsOn(ctx, d, dialect, n)
		if err != nil {
			out = append(out, result{Scenario: "roundtrip", System: dialect, Error: err.Error()})
			continue
		}
		out = append(out, rs...)
	}
	rs, err := lockHandoffs(ctx, d.MySQL, n)
	if err != nil {
		return append(out, result{Scenario: "roundtrip", System: "mariadb", Error: "lock handoffs: " + err.Error()})
	}
	out = append(out, rs...)
	rs, err = lockFloors(ctx, d.MySQL, n)
	if err != nil {
		return append(out, result{Scenario: "roundtrip", System: "mariadb", Error: "lock floors: " + err.Error()})
	}
	return append(out, rs...)
}

func roundtripsOn(ctx context.Context, d dbs, dialect string, n int) ([]result, error) {
	table := randName("bench_rtt")
	var (
		st    store.Driver
		async store.Driver
		ping  func(context.Context) error
		drop  func()
		app   = table
		pools []func()
	)
	defer func() {
		for _, f := range pools {
			f()
		}
	}()
	switch dialect {
	case "postgres":
		open := func(params map[string]string) (*pgxpool.Pool, error) {
			cfg, err := pgxpool.ParseConfig(d.Postgres)
			if err != nil {
				return nil, err
			}
			cfg.MaxConns, cfg.MinConns = 1, 1
			cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration >= time.Minute }
			cfg.ConnConfig.RuntimeParams["application_name"] = app
			for k, v := range params {
				cfg.ConnConfig.RuntimeParams[k] = v
			}
			return pgxpool.NewWithConfig(ctx, cfg)
		}
		pool, err := open(nil)
		if err != nil {
			return nil, err
		}
		pools = append(pools, pool.Close)
		apool, err := open(map[string]string{"synchronous_commit": "off"})
		if err != nil {
			return nil, err
		}
		pools = append(pools, apool.Close)
		s, err := postgres.New(pool, table)
		if err != nil {
			return nil, err
		}
		if err := s.CreateTable(ctx); err != nil {
			return nil, err
		}
		as, err := postgres.New(apool, table)
		if err != nil {
			return nil, err
		}
		st, async = s, as
		ping = func(ctx context.Context) error { _, err := pool.Exec(ctx, "SELECT 1"); return err }
		drop = func() { _, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) }
	case "mariadb":
		db, err := mysql.Open(d.MySQL)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		pools = append(pools, func() { db.Close() })
		s, err := mysql.New(db, table)
		if err != nil {
			return nil, err
		}
		if err := s.CreateTable(ctx); err != nil {
			return nil, err
		}
		st = s
		ping = func(ctx context.Context) error { _, err := db.ExecContext(ctx, "SELECT 1"); return err }
		drop = func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table) }
	}
	defer drop()
	const key, id = "k", "me"
	version, ok, err := st.Insert(ctx, key, store.Candidate{ID: id})
	if err != nil || !ok {
		return nil, fmt.Errorf("insert: ok=%v: %v", ok, err)
	}

	// The wait-event sampler (PostgreSQL): counts per wait event while a timed
	// statement runs on the measuring connection.
	var (
		mu      sync.Mutex
		current string // the kind being timed, "" between statements
		events  = map[string]map[string]int{}
	)
	stop := func() {}
	if dialect == "postgres" {
		cfg, err := pgxpool.ParseConfig(d.Postgres)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = 1
		spool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		pools = append(pools, spool.Close)
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for sctx.Err() == nil {
				rows, err := spool.Query(sctx, `SELECT state, coalesce(wait_event_type || ':' || wait_event, 'none (on CPU or runnable)') FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'`, app)
				if err != nil {
					return
				}
				var seen []string
				for rows.Next() {
					var state, ev string
					if rows.Scan(&state, &ev) == nil {
						seen = append(seen, ev)
					}
				}
				rows.Close()
				mu.Lock()
				if k := current; k != "" {
					if events[k] == nil {
						events[k] = map[string]int{}
					}
					for _, ev := range seen {
						events[k][ev]++
					}
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}()
		stop = func() { cancel(); <-done }
	}

	// With listeners (PostgreSQL): as many connections LISTENing on the stores'
	// channel as a handover trial has candidates, each read by a goroutine as a
	// store's listener does, for the second half of the run: a release's NOTIFY
	// then wakes them all at its commit.
	var listeners []func()
	listen := func() error {
		for range 3 {
			cfg, err := pgxpool.ParseConfig(d.Postgres)
			if err != nil {
				return err
			}
			conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
			if err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, `LISTEN casleader`); err != nil {
				conn.Close(ctx)
				return err
			}
			lctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					if _, err := conn.WaitForNotification(lctx); err != nil {
						return
					}
				}
			}()
			listeners = append(listeners, func() { cancel(); <-done; conn.Close(context.Background()) })
		}
		return nil
	}
	defer func() {
		for _, f := range listeners {
			f()
		}
	}()
	suffix := ""

	took := map[string][]float64{}
	timed := func(kind string, f func(ctx context.Context) error) error {
		mu.Lock()
		current = kind
		mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		sent := time.Now()
		err := f(cctx)
		dur := time.Since(sent)
		cancel()
		mu.Lock()
		current = ""
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		took[kind] = append(took[kind], ms(dur))
		return nil
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if dialect == "postgres" && i == n/2 {
			if err := listen(); err != nil {
				stop()
				return nil, fmt.Errorf("listen: %w", err)
			}
			suffix = ", 3 listeners"
		}
		steps := []struct {
			kind string
			f    func(ctx context.Context) error
		}{
			{"ping", ping},
			{"observe", func(ctx context.Context) error { _, _, err := st.Observe(ctx, key); return err }},
			{"renew", func(ctx context.Context) error {
				ok, err := st.Renew(ctx, key, id, version)
				if err == nil && !ok {
					err = fmt.Errorf("lost at version %d", version)
				}
				version++
				return err
			}},
			{"release", func(ctx context.Context) error {
				ok, err := st.Release(ctx, key, id, version)
				if err == nil && !ok {
					err = fmt.Errorf("lost at version %d", version)
				}
				version++
				return err
			}},
			{"elect released", func(ctx context.Context) error {
				term, ok, err := st.ElectReleased(ctx, key, store.Candidate{ID: id})
				if err == nil && !ok {
					err = fmt.Errorf("lost")
				}
				version = term
				return err
			}},
		}
		if async != nil {
			steps = append(steps, struct {
				kind string
				f    func(ctx context.Context) error
			}{"renew, synchronous_commit off", func(ctx context.Context) error {
				ok, err := async.Renew(ctx, key, id, version)
				if err == nil && !ok {
					err = fmt.Errorf("lost at version %d", version)
				}
				version++
				return err
			}})
		}
		for _, s := range steps {
			if err := timed(s.kind+suffix, s.f); err != nil {
				stop()
				return nil, err
			}
		}
	}
	stop()
	var out []result
	kinds := make([]string, 0, len(took))
	for k := range took {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		s := summarize(took[k])
		r := result{Scenario: "roundtrip", System: dialect, Params: map[string]any{"statement": k},
			Values: map[string]float64{"n": float64(s.N), "p50_ms": s.P50, "p99_ms": s.P99, "mean_ms": s.Mean}}
		total := 0
		for _, c := range events[k] {
			total += c
		}
		if total > 0 {
			r.Values["samples"] = float64(total)
			for ev, c := range events[k] {
				r.Values["share "+ev] = float64(c) / float64(total)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// roundtripTable renders the roundtrip results.
func roundtripTable(w io.Writer, rs []result) {
	var rows []result
	for _, r := range rs {
		if r.Scenario == "roundtrip" {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### One statement of the handover, one connection (interleaved)\n\n")
	fmt.Fprintf(w, "| database | statement | n | p50 ms | p99 ms | mean ms | PostgreSQL wait events while it ran (share of samples) |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(w, "| %s | error: %s | | | | | |\n", r.System, r.Error)
			continue
		}
		var evs []string
		for k, v := range r.Values {
			if ev, ok := strings.CutPrefix(k, "share "); ok {
				evs = append(evs, fmt.Sprintf("%s %.0f%%", ev, 100*v))
			}
		}
		sort.Strings(evs)
		fmt.Fprintf(w, "| %s | %v | %.0f | %s | %s | %s | %s |\n", r.System, r.Params["statement"], r.Values["n"],
			f1(r.Values["p50_ms"]), f1(r.Values["p99_ms"]), f1(r.Values["mean_ms"]), strings.Join(evs, ", "))
	}
}
