package main

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casleader/casleader/store/mysql"
)

// upsertSystem is the INSERT … ON DUPLICATE KEY UPDATE election design, the
// baseline: every candidate runs, every heartbeat interval,
//
//	INSERT … ON DUPLICATE KEY UPDATE leader_id = IF(expired OR mine, me, leader_id),
//	                                 tick = IF(leader_id = me, NOW(6), tick)
//
// and learns whether it leads by querying the row (its IsLeader() is a query: here
// one per heartbeat, the least an application can do). There is no trust deadline,
// no fencing and no release; Resign here expires the row's tick so that the next
// upsert of a follower takes over (more than that design does, in the baseline's favour).
type upsertSystem struct {
	t     timing
	db    *sql.DB
	table string
	count counter
}

func newUpsertSystem(ctx context.Context, t timing, dsn string) (*upsertSystem, error) {
	db, err := mysql.Open(dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	s := &upsertSystem{t: t, db: db, table: randName("bench_upsert")}
	_, err = db.ExecContext(ctx, `CREATE TABLE `+s.table+` (
		elect_key VARCHAR(255) NOT NULL PRIMARY KEY,
		leader_id VARCHAR(255) NOT NULL,
		tick TIMESTAMP(6) NOT NULL) ENGINE=InnoDB`)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *upsertSystem) Name() string                 { return "upsert/MariaDB" }
func (s *upsertSystem) Statements() map[string]int64 { return s.count.snapshot() }

func (s *upsertSystem) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = s.db.ExecContext(ctx, `DROP TABLE IF EXISTS `+s.table)
	s.db.Close()
}

func (s *upsertSystem) Start(_ context.Context, key, id string) (candidate, error) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &upsertCandidate{s: s, key: key, id: id, cancel: cancel, done: make(chan struct{})}
	go c.loop(ctx)
	return c, nil
}

type upsertCandidate struct {
	s       *upsertSystem
	key, id string
	leader  atomic.Bool
	marks   markBox
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

func (c *upsertCandidate) ID() string     { return c.id }
func (c *upsertCandidate) IsLeader() bool { return c.leader.Load() }
func (c *upsertCandidate) Marks() marks   { return c.marks.get() }

func (c *upsertCandidate) loop(ctx context.Context) {
	defer close(c.done)
	s := c.s
	upsert := `INSERT INTO ` + s.table + ` (elect_key, leader_id, tick) VALUES (?, ?, NOW(6)) ON DUPLICATE KEY UPDATE` +
		` leader_id = IF(tick < NOW(6) - INTERVAL ? MICROSECOND OR leader_id = ?, ?, leader_id),` +
		` tick = IF(leader_id = ?, NOW(6), tick)`
	isLeader := `SELECT leader_id = ? FROM ` + s.table + ` WHERE elect_key = ?`
	t := time.NewTicker(s.t.Heartbeat)
	defer t.Stop()
	for {
		sent := time.Now()
		qctx, cancel := context.WithTimeout(ctx, s.t.Heartbeat)
		_, err := s.db.ExecContext(qctx, upsert, c.key, c.id, s.t.Lease.Microseconds(), c.id, c.id, c.id)
		s.count.add("upsert", 1)
		var me bool
		if err == nil {
			err = s.db.QueryRowContext(qctx, isLeader, c.id, c.key).Scan(&me)
			s.count.add("is_leader", 1)
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.count.add("error", 1)
			me = false
		}
		now := time.Now()
		if me {
			c.marks.set(func(m *marks) {
				m.LastRenew = sent
				if !c.leader.Load() {
					m.Won = now
				}
			})
		}
		c.leader.Store(me)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *upsertCandidate) Crash() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
		c.leader.Store(false)
	})
}

func (c *upsertCandidate) Resign(ctx context.Context) error {
	c.Crash()
	_, err := c.s.db.ExecContext(ctx, `UPDATE `+c.s.table+` SET tick = NOW(6) - INTERVAL 1 DAY WHERE elect_key = ? AND leader_id = ?`, c.key, c.id)
	c.s.count.add("release", 1)
	if err == nil {
		now := time.Now()
		c.marks.set(func(m *marks) { m.Released = now })
	}
	return err
}

func (c *upsertCandidate) Stop() { c.Crash() }
