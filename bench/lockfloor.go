package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/casleader/casleader/store/mysql"
)

// lockFloors measures, on MySQL/MariaDB, the database's part of a handover's
// wake-up through a named lock, without any engine: from the leader's first send
// to the reply of the woken follower's read of the row, which must show the
// handover. Four connections: the leader's writes, its lock, the follower's lock
// wait and its read. Two orders, interleaved:
//
//   - "after commit" (what the store does): the leader's UPDATE commits on its own,
//     then its lock connection releases the lock; granted it, the follower reads;
//   - "before commit": the leader begins a transaction, UPDATEs, releases the lock
//     and commits at once; granted it, the follower reads with LOCK IN SHARE MODE,
//     which waits for the leader's row lock, so it returns once the commit has.
//
// It is the floor of each order on this server, the sum the engine adds its own
// hops to.
func lockFloors(ctx context.Context, dsn string, n int) ([]result, error) {
	db, err := mysql.Open(dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	table := randName("bench_floor")
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (k VARCHAR(64) PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB`); err != nil {
		return nil, err
	}
	defer func() { _, _ = db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE `+table) }()
	if _, err := db.ExecContext(ctx, `INSERT INTO `+table+` VALUES ('k', 0)`); err != nil {
		return nil, err
	}
	var cs [4]*sql.Conn
	for i := range cs {
		if cs[i], err = db.Conn(ctx); err != nil {
			return nil, err
		}
		defer cs[i].Close()
	}
	f := floor{table: table, writer: cs[0], holder: cs[1], waiter: cs[2], reader: cs[3]}
	took := map[string][]float64{}
	v := int64(0)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		for _, before := range []bool{i%2 == 0, i%2 != 0} { // alternating which goes first
			v++
			d, err := f.trial(ctx, v, before)
			if err != nil {
				return nil, err
			}
			k := "handover → woken read, lock released after commit"
			if before {
				k = "handover → woken read, lock released before commit"
			}
			took[k] = append(took[k], ms(d))
		}
	}
	var out []result
	for _, k := range []string{"handover → woken read, lock released after commit", "handover → woken read, lock released before commit"} {
		s := summarize(took[k])
		out = append(out, result{Scenario: "roundtrip", System: "mariadb", Params: map[string]any{"statement": k},
			Values: map[string]float64{"n": float64(s.N), "p50_ms": s.P50, "p99_ms": s.P99, "mean_ms": s.Mean}})
	}
	return out, nil
}

// floor is the table and connections of lockFloors.
type floor struct {
	table                          string
	writer, holder, waiter, reader *sql.Conn
}

// trial hands the row over to version v in the order asked and returns the time
// from the leader's first send to the reply of the follower's read.
func (f floor) trial(ctx context.Context, v int64, beforeCommit bool) (time.Duration, error) {
	name := randName("bench_floor_lock")
	var got sql.NullInt64
	if err := f.holder.QueryRowContext(ctx, `SELECT GET_LOCK(?, 1)`, name).Scan(&got); err != nil || got.Int64 != 1 {
		return 0, fmt.Errorf("the leader's lock %s: %v (granted %d)", name, err, got.Int64)
	}
	read := `SELECT v FROM ` + f.table + ` WHERE k = 'k'`
	if beforeCommit {
		read += ` LOCK IN SHARE MODE`
	}
	type seen struct {
		v   int64
		at  time.Time
		err error
	}
	woken := make(chan seen, 1)
	go func() {
		var g sql.NullInt64
		if err := f.waiter.QueryRowContext(ctx, `SELECT GET_LOCK(?, 5)`, name).Scan(&g); err != nil || g.Int64 != 1 {
			woken <- seen{err: fmt.Errorf("the follower's wait on %s: %v (granted %d)", name, err, g.Int64)}
			return
		}
		var s seen
		s.err = f.reader.QueryRowContext(ctx, read).Scan(&s.v)
		s.at = time.Now()
		_, _ = f.waiter.ExecContext(ctx, `DO RELEASE_LOCK(?)`, name)
		woken <- s
	}()
	time.Sleep(5 * time.Millisecond) // the follower waits at the server by now
	start := time.Now()
	if err := f.handOver(ctx, name, v, beforeCommit); err != nil {
		return 0, err
	}
	s := <-woken
	if s.err != nil {
		return 0, s.err
	}
	if s.v != v {
		return 0, fmt.Errorf("the woken read saw version %d, want %d (release before commit: %v)", s.v, v, beforeCommit)
	}
	return s.at.Sub(start), nil
}

// handOver writes version v and releases the leader's lock, in the order asked.
func (f floor) handOver(ctx context.Context, name string, v int64, beforeCommit bool) error {
	update := `UPDATE ` + f.table + ` SET v = ? WHERE k = 'k'`
	release := func() error {
		_, err := f.holder.ExecContext(ctx, `DO RELEASE_LOCK(?)`, name)
		return err
	}
	if !beforeCommit {
		if _, err := f.writer.ExecContext(ctx, update, v); err != nil {
			return err
		}
		return release()
	}
	tx, err := f.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, update, v); err != nil {
		_ = tx.Rollback()
		return err
	}
	released := make(chan error, 1)
	go func() { released <- release() }()
	if err := tx.Commit(); err != nil {
		<-released
		return err
	}
	return <-released
}
