package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/casleader/casleader/store/mysql"
)

// lockHandoffs measures, on MySQL/MariaDB, what a named lock costs the wake-up of a
// handover (the MySQL notifier: a follower waits on its leader's lock): n times, a
// holder connection releases a lock on which another connection waits, timed from
// the release's send to its reply ("release lock, a waiter") and to the waiter's
// grant ("release lock → waiter granted"), and a release with nobody waiting
// ("release lock, alone").
func lockHandoffs(ctx context.Context, dsn string, n int) ([]result, error) {
	db, err := mysql.Open(dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	holder, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer holder.Close()
	waiter, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer waiter.Close()
	took := map[string][]float64{}
	lock := func(c *sql.Conn, name string, wait int) error {
		var got sql.NullInt64
		if err := c.QueryRowContext(ctx, `SELECT GET_LOCK(?, ?)`, name, wait).Scan(&got); err != nil {
			return err
		}
		if got.Int64 != 1 {
			return fmt.Errorf("lock %s not granted", name)
		}
		return nil
	}
	release := func(c *sql.Conn, name string) error {
		_, err := c.ExecContext(ctx, `DO RELEASE_LOCK(?)`, name)
		return err
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		name := randName("bench_lock")
		if err := lock(holder, name, 1); err != nil {
			return nil, err
		}
		sent := time.Now()
		if err := release(holder, name); err != nil {
			return nil, err
		}
		took["release lock, alone"] = append(took["release lock, alone"], ms(time.Since(sent)))

		if err := lock(holder, name, 1); err != nil {
			return nil, err
		}
		granted := make(chan error, 1)
		var at time.Time
		go func() { err := lock(waiter, name, 5); at = time.Now(); granted <- err }()
		time.Sleep(5 * time.Millisecond) // the waiter waits at the server by now
		sent = time.Now()
		if err := release(holder, name); err != nil {
			return nil, err
		}
		took["release lock, a waiter"] = append(took["release lock, a waiter"], ms(time.Since(sent)))
		if err := <-granted; err != nil {
			return nil, err
		}
		took["release lock → waiter granted"] = append(took["release lock → waiter granted"], ms(at.Sub(sent)))
		if err := release(waiter, name); err != nil {
			return nil, err
		}
	}
	var out []result
	for _, k := range []string{"release lock, alone", "release lock, a waiter", "release lock → waiter granted"} {
		s := summarize(took[k])
		out = append(out, result{Scenario: "roundtrip", System: "mariadb", Params: map[string]any{"statement": k},
			Values: map[string]float64{"n": float64(s.N), "p50_ms": s.P50, "p99_ms": s.P99, "mean_ms": s.Mean}})
	}
	return out, nil
}
