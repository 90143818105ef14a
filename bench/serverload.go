package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
)

// The load run: what one election key with five candidates costs the database
// server, with the library's defaults. Each candidate has its own store and pool,
// as five processes would, and the Config sets only the lease (3 s) and the
// heartbeat (1 s): the store's wake-ups are on and the members table is there and
// written. Once a leader is up and a lease and a heartbeat have passed, the run
// counts, over its window, the statements the server ran for these candidates
// alone (the server is shared with other clients) and, at the client, the store
// calls by kind.
//
// Isolation. PostgreSQL: the candidates run in a database that the run creates and
// drops; the count is xact_commit + xact_rollback of that database in
// pg_stat_database (one transaction per statement; autovacuum's count too),
// which an idle backend reports up to 10 s late (PGSTAT_IDLE_INTERVAL): the
// window starts 11 s after the start-up and lasts a minute.
// MariaDB: Questions is server-wide, so the run turns userstat on (and back off
// when it was off) and the candidates connect as a user of their own, created and
// dropped by the run; the count is SELECT_COMMANDS + UPDATE_COMMANDS +
// OTHER_COMMANDS of that user in information_schema.USER_STATISTICS. Both also
// report the connections opened in the window (server_per_s_connections): a new
// PostgreSQL session commits a transaction of its own at start-up.
const (
	loadCandidates = 5
	loadLease      = 3 * time.Second
	loadHeartbeat  = time.Second
	statsLag       = 11 * time.Second
)

// loadServer is the isolated server of one dialect for the load run.
type loadServer struct {
	dialect string
	// open returns a candidate's store on a pool of its own, and its closer.
	open func(ctx context.Context, table string) (store.Driver, func(), error)
	// count returns the server's statement count for the candidates, and its
	// parts by kind when the server tells them.
	count func(ctx context.Context) (total int64, parts map[string]int64, err error)
	close func()
}

// serverLoad runs the load scenario on dialect for dur.
func serverLoad(ctx context.Context, d dbs, dialect string, dur time.Duration) result {
	r := result{Scenario: "load", System: "casleader/" + dialect, Values: map[string]float64{},
		Params: map[string]any{"candidates": loadCandidates, "lease_s": loadLease.Seconds(), "heartbeat_s": loadHeartbeat.Seconds(), "seconds": dur.Seconds()}}
	var srv *loadServer
	var err error
	switch dialect {
	case "postgres":
		srv, err = pgLoadServer(ctx, d.Postgres)
	case "mariadb":
		srv, err = mysqlLoadServer(ctx, d.MySQL)
	default:
		err = fmt.Errorf("load: unknown dialect %q", dialect)
	}
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer srv.close()
	r.Params["isolation"] = map[string]string{"postgres": "database of its own", "mariadb": "user of its own, userstat"}[dialect]
	if err := measureLoad(ctx, srv, dur, &r); err != nil {
		r.Error = err.Error()
	}
	return r
}

// measureLoad starts the candidates, waits for a leader and a lease and a heartbeat
// more, and measures over dur into r.
func measureLoad(ctx context.Context, srv *loadServer, dur time.Duration, r *result) error {
	var count counter
	cs, stop, err := startLoad(ctx, srv, randName("load"), &count)
	if err != nil {
		return err
	}
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	for countLeaders(cs) == 0 {
		if time.Now().After(deadline) {
			return errors.New("load: no leader within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A lease and a heartbeat: every follower has read and gone to sleep. Then
	// statsLag: PostgreSQL's idle backends report their counts up to 10 s late,
	// and the start-up's statements (the tables' checks, the first writes) must
	// not land in the window.
	time.Sleep(loadLease + loadHeartbeat + statsLag)
	before, beforeParts, err := srv.count(ctx)
	if err != nil {
		return err
	}
	beforeCalls, start := count.snapshot(), time.Now()
	maxLeaders := 0
	for time.Since(start) < dur && ctx.Err() == nil {
		maxLeaders = max(maxLeaders, countLeaders(cs))
		time.Sleep(5 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	calls := diff(count.snapshot(), beforeCalls)
	after, afterParts, err := srv.count(ctx)
	if err != nil {
		return err
	}
	client := 0.0
	for k, v := range calls {
		r.Values["client_per_s_"+k] = float64(v) / secs
		if k != "error" {
			client += float64(v) / secs
		}
	}
	for k, v := range afterParts {
		r.Values["server_per_s_"+k] = float64(v-beforeParts[k]) / secs
	}
	r.Values["client_per_s"] = client
	r.Values["server_per_s"] = float64(after-before) / secs
	// The plain compare-and-set elector at the same heartbeat: the leader's
	// UPDATE and each follower's SELECT, every heartbeat.
	r.Values["baseline_per_s"] = float64(loadCandidates) / loadHeartbeat.Seconds()
	r.Values["max_leaders"] = float64(maxLeaders)
	return nil
}

func countLeaders(cs []*casleader.Elector) int {
	n := 0
	for _, c := range cs {
		if c.IsLeader() {
			n++
		}
	}
	return n
}

// startLoad creates the tables and starts the candidates on key; stop ends them
// (a clean stop: the leader resigns, each deletes its members rows) and closes
// their pools.
func startLoad(ctx context.Context, srv *loadServer, table string, count *counter) ([]*casleader.Elector, func(), error) {
	var (
		cs      []*casleader.Elector
		closers []func()
		wg      sync.WaitGroup
	)
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := func() {
		cancel()
		wg.Wait()
		for _, f := range closers {
			f()
		}
	}
	for i := range loadCandidates {
		st, closeFn, err := srv.open(ctx, table)
		if err != nil {
			stop()
			return nil, nil, err
		}
		closers = append(closers, closeFn)
		if i == 0 {
			if err := st.(interface{ CreateTable(context.Context) error }).CreateTable(ctx); err != nil {
				stop()
				return nil, nil, err
			}
		}
		rec := &recorder{Driver: st, wakes: true, members: true, marks: &markBox{}, count: count, mysql: srv.dialect == "mariadb"}
		el, err := casleader.New(rec, casleader.Config{Key: "load", ID: fmt.Sprintf("c%d", i), Logger: candidateLog,
			LeaseDuration: loadLease, HeartbeatInterval: loadHeartbeat})
		if err != nil {
			stop()
			return nil, nil, err
		}
		cs = append(cs, el)
		wg.Go(func() { _ = el.Run(rctx) })
	}
	return cs, stop, nil
}

// pgLoadServer creates a database of its own for the candidates on the server of
// dsn; close drops it.
func pgLoadServer(ctx context.Context, dsn string) (*loadServer, error) {
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("load: connect to PostgreSQL: %w", err)
	}
	db := randName("casleader_load")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		_ = admin.Close(ctx)
		return nil, fmt.Errorf("load: create database: %w", err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		_ = admin.Close(ctx)
		return nil, err
	}
	u.Path = "/" + db
	own := u.String()
	return &loadServer{dialect: "postgres",
		open: func(ctx context.Context, table string) (store.Driver, func(), error) {
			pool, err := postgres.Open(ctx, own)
			if err != nil {
				return nil, nil, err
			}
			st, err := postgres.New(pool, table)
			if err != nil {
				pool.Close()
				return nil, nil, err
			}
			return st, pool.Close, nil
		},
		count: func(ctx context.Context) (int64, map[string]int64, error) {
			var commits, rollbacks, sessions int64
			err := admin.QueryRow(ctx, `SELECT xact_commit, xact_rollback, sessions FROM pg_stat_database WHERE datname = $1`, db).Scan(&commits, &rollbacks, &sessions)
			return commits + rollbacks, map[string]int64{"rollback": rollbacks, "connections": sessions}, err
		},
		close: func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = admin.Exec(cctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
			_ = admin.Close(cctx)
		}}, nil
}

// mysqlLoadServer creates a user of its own for the candidates on the server of
// dsn and turns userstat on; close drops the user and their tables and puts
// userstat back.
func mysqlLoadServer(ctx context.Context, dsn string) (*loadServer, error) {
	at := strings.Index(dsn, "@")
	if at < 0 {
		return nil, fmt.Errorf("load: no user in the MariaDB DSN")
	}
	admin, err := mysql.Open(dsn)
	if err != nil {
		return nil, err
	}
	admin.SetMaxOpenConns(1)
	user := randName("cl_load")
	var was int
	var dbName string
	err = admin.QueryRowContext(ctx, `SELECT @@GLOBAL.userstat, DATABASE()`).Scan(&was, &dbName)
	for _, q := range []string{
		"SET GLOBAL userstat = 1",
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + user + "'",
		"CREATE USER '" + user + "'@'localhost' IDENTIFIED BY '" + user + "'",
		"GRANT ALL ON `" + dbName + "`.* TO '" + user + "'@'%'",
		"GRANT ALL ON `" + dbName + "`.* TO '" + user + "'@'localhost'",
	} {
		if err == nil {
			_, err = admin.ExecContext(ctx, q)
		}
	}
	var tables []string
	s := &loadServer{dialect: "mariadb", close: func() { mysqlLoadClose(admin, user, was, &tables) }}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("load: set up a MariaDB user of its own: %w", err)
	}
	own := user + ":" + user + dsn[at:]
	var mu sync.Mutex
	s.open = func(ctx context.Context, table string) (store.Driver, func(), error) {
		mu.Lock()
		tables = append(tables, table, table+"_members")
		mu.Unlock()
		db, err := mysql.Open(own)
		if err != nil {
			return nil, nil, err
		}
		st, err := mysql.New(db, table)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		return st, func() { db.Close() }, nil
	}
	s.count = func(ctx context.Context) (int64, map[string]int64, error) {
		var sel, upd, other, conns int64
		err := admin.QueryRowContext(ctx, `SELECT SELECT_COMMANDS, UPDATE_COMMANDS, OTHER_COMMANDS, TOTAL_CONNECTIONS
			FROM information_schema.USER_STATISTICS WHERE USER = ?`, user).Scan(&sel, &upd, &other, &conns)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil // no statement yet
		}
		return sel + upd + other, map[string]int64{"select": sel, "update": upd, "other": other, "connections": conns}, err
	}
	return s, nil
}

func mysqlLoadClose(admin *sql.DB, user string, was int, tables *[]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, t := range *tables {
		_, _ = admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+t)
	}
	_, _ = admin.ExecContext(ctx, "DROP USER IF EXISTS '"+user+"'@'%', '"+user+"'@'localhost'")
	if was == 0 {
		_, _ = admin.ExecContext(ctx, "SET GLOBAL userstat = 0")
	}
	admin.Close()
}
