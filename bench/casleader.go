package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// candidateLog receives the casleader candidates' logs (-v).
var candidateLog = slog.New(slog.DiscardHandler)

// dbs holds the DSNs of the benchmark's databases.
type dbs struct {
	MySQL, Postgres, PgBouncer, SQLiteDir string
}

func randName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// casOptions choose how casleader candidates connect.
type casOptions struct {
	dialect  string // "mariadb", "postgres", "pgbouncer", "sqlite"
	notifier bool   // wake followers on release: the store's wake-ups (LISTEN/NOTIFY, named locks, the SQLite wake-up file)
	handover bool   // the handover scenario's leader hands over to a named follower (HandoverTo) instead of resigning
	shared   bool   // all candidates share one pool (8 connections) instead of one each
	conns    int    // connections per candidate's own pool (default 4)
	// members: the candidates keep their rows in the members table, so that the
	// leader's members reads know its live followers and a resign hands the lease
	// to one of them (one write) instead of releasing it (then the follower's
	// election: two).
	members bool
}

type casSystem struct {
	name  string
	t     timing
	opt   casOptions
	dsn   dbs
	table string

	admin func(ctx context.Context, q string) error
	// executed returns when the database executed the last write of key: its
	// tick_time, by the database clock (the host's clock: the databases run on this
	// machine; SQLite's is the writing process's clock, microseconds in tick_time).
	executed func(ctx context.Context, key string) (time.Time, error)
	closers  []func()
	shared   store.Driver
	count    counter
	sqlite   string
}

func newCasSystem(ctx context.Context, name string, t timing, d dbs, opt casOptions) (*casSystem, error) {
	s := &casSystem{name: name, t: t, opt: opt, dsn: d, table: randName("bench_cas")}
	st, closeFn, err := s.open(ctx, 8)
	if err != nil {
		return nil, err
	}
	if err := st.(interface{ CreateTable(context.Context) error }).CreateTable(ctx); err != nil {
		closeFn()
		return nil, err
	}
	s.shared = st
	s.closers = append(s.closers, closeFn)
	return s, nil
}

func (s *casSystem) Name() string { return s.name }

// open returns a store on a new pool of n connections, and its closer.
func (s *casSystem) open(ctx context.Context, n int) (store.Driver, func(), error) {
	switch s.opt.dialect {
	case "mariadb":
		db, err := mysql.Open(s.dsn.MySQL)
		if err != nil {
			return nil, nil, err
		}
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
		st, err := mysql.New(db, s.table)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		if s.admin == nil {
			s.admin = func(ctx context.Context, q string) error { _, err := db.ExecContext(ctx, q); return err }
			s.executed = func(ctx context.Context, key string) (time.Time, error) {
				var us int64
				err := db.QueryRowContext(ctx, `SELECT CAST(UNIX_TIMESTAMP(tick_time) * 1000000 AS SIGNED) FROM `+s.table+` WHERE elect_key = ?`, key).Scan(&us)
				return time.UnixMicro(us), err
			}
		}
		return st, func() { db.Close() }, nil
	case "postgres", "pgbouncer":
		dsn := s.dsn.Postgres
		if s.opt.dialect == "pgbouncer" {
			dsn = s.dsn.PgBouncer
		}
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, nil, err
		}
		cfg.MaxConns = int32(n)
		cfg.ConnConfig.RuntimeParams["application_name"] = appName
		// As postgres.Open configures its pools: pgxpool's default pings a
		// connection idle for more than a second before handing it out, a round
		// trip before a woken follower's election (its connection has been idle
		// since its last read, up to a lease ago) and before many reads.
		cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration >= time.Minute }
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		st, err := postgres.New(pool, s.table)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		if s.admin == nil {
			s.admin = func(ctx context.Context, q string) error { _, err := pool.Exec(ctx, q); return err }
			s.executed = func(ctx context.Context, key string) (time.Time, error) {
				var us int64
				err := pool.QueryRow(ctx, `SELECT (EXTRACT(EPOCH FROM tick_time) * 1000000)::bigint FROM `+s.table+` WHERE elect_key = $1`, key).Scan(&us)
				return time.UnixMicro(us), err
			}
		}
		return st, pool.Close, nil
	case "sqlite":
		if s.sqlite == "" {
			s.sqlite = filepath.Join(s.dsn.SQLiteDir, s.table+".db")
		}
		db, err := sqlite.Open(s.sqlite)
		if err != nil {
			return nil, nil, err
		}
		db.SetMaxOpenConns(n)
		st, err := sqlite.New(db, s.table)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		if s.admin == nil {
			s.admin = func(ctx context.Context, q string) error { _, err := db.ExecContext(ctx, q); return err }
			s.executed = func(ctx context.Context, key string) (time.Time, error) {
				var us int64
				err := db.QueryRowContext(ctx, `SELECT tick_time FROM `+s.table+` WHERE elect_key = ?`, key).Scan(&us)
				return time.UnixMicro(us), err
			}
		}
		return st, func() { db.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown dialect %q", s.opt.dialect)
}

func (s *casSystem) Statements() map[string]int64 { return s.count.snapshot() }

func (s *casSystem) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.admin != nil && s.opt.dialect != "sqlite" {
		_ = s.admin(ctx, "DROP TABLE IF EXISTS "+s.table)
		_ = s.admin(ctx, "DROP TABLE IF EXISTS "+s.table+"_members")
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

func (s *casSystem) Start(ctx context.Context, key, id string) (candidate, error) {
	c := &casCandidate{id: id, sys: s, done: make(chan struct{})}
	var st store.Driver
	var closers []func()
	if s.opt.shared {
		st = s.shared
	} else {
		n := s.opt.conns
		if n == 0 {
			n = 4
		}
		var closeFn func()
		var err error
		st, closeFn, err = s.open(ctx, n)
		if err != nil {
			return nil, err
		}
		closers = append(closers, closeFn)
	}
	c.rec = &recorder{Driver: st, marks: &c.marks, count: &s.count, mysql: s.opt.dialect == "mariadb", log: candidateLog.With("system", s.name, "id", id),
		members: s.opt.members, id: id}
	cfg := casleader.Config{
		Key: key, ID: id, Logger: candidateLog.With("system", s.name),
		LeaseDuration: s.t.Lease, RenewDeadline: s.t.Renew, HeartbeatInterval: s.t.Heartbeat, PollInterval: s.t.Poll,
		KeepLeaseOnExit: true, // Crash keeps the lease; Stop resigns explicitly
		OnStartedLeading: func(context.Context, int64) {
			now := time.Now()
			c.marks.set(func(m *marks) { m.Led = now })
		},
	}
	rctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	var runs []func(context.Context) error
	if s.opt.notifier {
		// The store's own wake-ups, through the recorder, which marks when each
		// reaches the elector (through PgBouncer in transaction mode their
		// self-test fails and followers poll).
		l, ok := st.(interface{ Listening() bool })
		if !ok {
			cancel()
			return nil, fmt.Errorf("the %s store has no wake-ups", s.opt.dialect)
		}
		c.listening = l.Listening
		c.rec.wakes, c.rec.markWakes = true, true
	}
	el, err := casleader.New(c.rec, cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	c.el = el
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { _ = r(rctx) })
	}
	wg.Go(func() {
		if err := el.Run(rctx); err != nil {
			c.err = err
		}
	})
	go func() {
		wg.Wait()
		for _, f := range closers {
			f()
		}
		close(c.done)
	}()
	return c, nil
}

type casCandidate struct {
	listening func() bool // whether the store's wake-ups listen, when the system has a notifier
	id        string
	sys       *casSystem
	el        *casleader.Elector
	rec       *recorder
	marks     markBox
	cancel    context.CancelFunc
	done      chan struct{}
	err       error
	once      sync.Once
}

func (c *casCandidate) ID() string { return c.id }

// Ready reports whether the candidate's wake-ups, if any, listen.
func (c *casCandidate) Ready() bool {
	if c.listening != nil {
		return c.listening()
	}
	return true
}
func (c *casCandidate) IsLeader() bool { return c.el.IsLeader() }
func (c *casCandidate) Marks() marks   { return c.marks.get() }

func (c *casCandidate) Crash() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
	})
}

func (c *casCandidate) Resign(ctx context.Context) error {
	return c.el.ResignFor(ctx, time.Hour)
}

// HandsOver reports whether the handover scenario hands this system's lease to a
// named follower rather than resigning it.
func (s *casSystem) HandsOver() bool { return s.opt.handover }

func (c *casCandidate) HandoverTo(ctx context.Context, id string) error {
	return c.el.HandoverTo(ctx, id)
}

func (c *casCandidate) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.el.IsLeader() {
		_ = c.el.ResignFor(ctx, time.Hour)
	}
	c.Crash()
}

// recorder wraps a store: it counts statements and records a candidate's marks.
// It passes the store's wake-ups on only when wakes is set (a system with a
// notifier), marking each one when markWakes is set too, and the members calls
// only when members is set (counting each by kind), as a user's elector with
// defaults makes them.
type recorder struct {
	store.Driver
	members          bool        // pass the members calls on (casOptions.members)
	id               string      // the candidate's ID
	knows            atomic.Bool // a members read showed another candidate
	wakes, markWakes bool
	marks            *markBox
	count            *counter
	mysql            bool
	log              *slog.Logger
}

// Subscribe subscribes to the store's wake-ups when r passes them on.
func (r *recorder) Subscribe(key, id string, wake func(version int64)) (unsubscribe func()) {
	if !r.wakes {
		return func() {}
	}
	return r.Driver.Subscribe(key, id, func(version int64) {
		if r.markWakes {
			now := time.Now()
			r.marks.set(func(m *marks) { m.wake(now) })
		}
		wake(version)
	})
}

// Without members set, the members calls do nothing: the electors measured here
// keep no members table, and their writes fail as on a database without one (so
// that no handover can name their process).
func (r *recorder) PutMembers(ctx context.Context, ms []store.Member) error {
	if !r.members {
		return fmt.Errorf("%w: the benchmark keeps no members table", store.ErrDeployment)
	}
	r.count.add("members_put", 1)
	return r.Driver.PutMembers(ctx, ms)
}

func (r *recorder) DeleteMembers(ctx context.Context, id string, keys []string) error {
	if !r.members {
		return nil
	}
	r.count.add("members_delete", 1)
	return r.Driver.DeleteMembers(ctx, id, keys)
}

func (r *recorder) PruneMembers(ctx context.Context, olderThan time.Duration) (int64, error) {
	if !r.members {
		return 0, nil
	}
	r.count.add("members_prune", 1)
	return r.Driver.PruneMembers(ctx, olderThan)
}

// MembersOf records whether the read showed another candidate: the elector's
// reads of the keys it leads, whose last one names its successor.
func (r *recorder) MembersOf(ctx context.Context, keys []string, within time.Duration) ([]store.Member, error) {
	if !r.members {
		return nil, nil
	}
	r.count.add("members_read", 1)
	ms, err := r.Driver.MembersOf(ctx, keys, within)
	for _, m := range ms {
		if m.ID != r.id { // seen within Fresh, as the read asks
			r.knows.Store(true)
		}
	}
	return ms, err
}

func (r *recorder) Members(ctx context.Context, key string, within time.Duration) ([]store.Member, error) {
	if r.members {
		r.count.add("members_read", 1)
	}
	return r.Driver.Members(ctx, key, within)
}

// KnowsSuccessor reports whether the candidate's members reads have shown another
// live candidate (without members rows: never).
func (c *casCandidate) KnowsSuccessor() bool { return c.rec.knows.Load() }

// Observed and Leading reach the store's wake-ups only when r passes them on.
func (r *recorder) Observed(key string, rec store.Record) {
	if r.wakes {
		r.Driver.Observed(key, rec)
	}
}

func (r *recorder) Leading(key string, token int64, leading bool) {
	if r.wakes {
		r.Driver.Leading(key, token, leading)
	}
}

// called records a store call in the candidate's marks.
func (r *recorder) called(op string, sent time.Time, ok bool) {
	done := time.Now()
	r.marks.set(func(m *marks) { m.call(call{Op: op, Sent: sent, Done: done, OK: ok}) })
}

func (r *recorder) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	r.count.add("observe", 1)
	sent := time.Now()
	rec, found, err := r.Driver.Observe(ctx, key)
	r.called("observe", sent, false)
	if r.log != nil {
		r.log.Debug("bench: observe", "version", rec.Version, "leader", rec.LeaderID, "age", rec.Age, "took", time.Since(sent), "error", err)
	}
	return rec, found, err
}

func (r *recorder) Insert(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	r.count.add("insert", 1)
	term, ok, err := r.Driver.Insert(ctx, key, cand)
	if ok && err == nil {
		now := time.Now()
		r.marks.set(func(m *marks) { m.Won = now })
	}
	r.errs(err)
	return term, ok, err
}

func (r *recorder) Elect(ctx context.Context, key string, cand store.Candidate, v int64) (int64, bool, error) {
	r.count.add("elect", 1)
	sent := time.Now()
	term, ok, err := r.Driver.Elect(ctx, key, cand, v)
	r.called("elect", sent, ok && err == nil)
	if r.log != nil {
		r.log.Debug("bench: elect", "from", v, "ok", ok, "took", time.Since(sent), "error", err)
	}
	if ok && err == nil {
		now := time.Now()
		r.marks.set(func(m *marks) { m.Won = now })
	}
	r.errs(err)
	return term, ok, err
}

// ElectReleased passes the store's election of a released row through (every
// casleader store has one): without it the elector would read, then elect.
func (r *recorder) ElectReleased(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	r.count.add("elect", 1)
	sent := time.Now()
	term, ok, err := r.Driver.ElectReleased(ctx, key, cand)
	r.called("elect released", sent, ok && err == nil)
	if r.log != nil {
		r.log.Debug("bench: elect released", "ok", ok, "took", time.Since(sent), "error", err)
	}
	if ok && err == nil {
		now := time.Now()
		r.marks.set(func(m *marks) { m.Won = now })
	}
	r.errs(err)
	return term, ok, err
}

func (r *recorder) Renew(ctx context.Context, key, id string, v int64) (bool, error) {
	r.count.add("renew", 1)
	sent := time.Now()
	ok, err := r.Driver.Renew(ctx, key, id, v)
	if r.log != nil {
		r.log.Debug("bench: renew", "from", v, "ok", ok, "took", time.Since(sent), "error", err)
	}
	if ok && err == nil {
		r.marks.set(func(m *marks) { m.LastRenew = sent })
	}
	r.errs(err)
	return ok, err
}

func (r *recorder) Release(ctx context.Context, key, id string, v int64) (bool, error) {
	r.count.add("release", 1)
	sent := time.Now()
	ok, err := r.Driver.Release(ctx, key, id, v)
	r.called("release", sent, ok && err == nil)
	if ok && err == nil {
		now := time.Now()
		r.marks.set(func(m *marks) { m.Released, m.ReleaseSent = now, sent })
	}
	r.errs(err)
	return ok, err
}

func (r *recorder) Handover(ctx context.Context, key, id string, v int64, to store.Candidate) (int64, bool, error) {
	r.count.add("handover", 1)
	sent := time.Now()
	term, ok, err := r.Driver.Handover(ctx, key, id, v, to)
	r.called("handover", sent, ok && err == nil)
	if ok && err == nil {
		now := time.Now()
		r.marks.set(func(m *marks) { m.Released, m.ReleaseSent = now, sent })
	}
	r.errs(err)
	return term, ok, err
}

func (r *recorder) errs(err error) {
	if err != nil {
		r.count.add("error", 1)
	}
}

// The many-key statements, the step-down request and the checks are counted by
// kind too (a single-key elector may send them), and passed on.

func (r *recorder) RequestStepDown(ctx context.Context, key string, v int64, to string) (bool, error) {
	r.count.add("request_step_down", 1)
	return r.Driver.RequestStepDown(ctx, key, v, to)
}

func (r *recorder) ObserveMany(ctx context.Context, keys []string) (map[string]store.Record, error) {
	r.count.add("observe_many", 1)
	return r.Driver.ObserveMany(ctx, keys)
}

func (r *recorder) InsertMany(ctx context.Context, cand store.Candidate, keys []string) ([]store.Won, error) {
	r.count.add("insert_many", 1)
	return r.Driver.InsertMany(ctx, cand, keys)
}

func (r *recorder) ElectMany(ctx context.Context, cand store.Candidate, from []store.KeyVersion) ([]store.Won, error) {
	r.count.add("elect_many", 1)
	return r.Driver.ElectMany(ctx, cand, from)
}

func (r *recorder) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	r.count.add("renew_many", 1)
	return r.Driver.RenewMany(ctx, id, held)
}

func (r *recorder) ReleaseMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	r.count.add("release_many", 1)
	return r.Driver.ReleaseMany(ctx, id, held)
}

func (r *recorder) Check(ctx context.Context) error {
	r.count.add("check", 1)
	return r.Driver.Check(ctx)
}
