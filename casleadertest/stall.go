package casleadertest

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store/sqlite"
)

// Stall is a stretch of time (CLOCK_MONOTONIC, see [Mono]) in which the harness
// could not get a trivial statement answered by the database in time: the machine
// or the server was too busy to answer anyone, the candidates included. The design
// promises a leader back within the lease only while the database answers within
// the renew deadline, so the checker does not count stalled time against the
// liveness bound (see [Bounds.Liveness]). Safety is judged the same, stalls or not.
type Stall struct{ Start, End int64 }

// maxStallCredit caps the stalled time that one liveness bound or one harness wait
// may add: past it, a machine too busy to run the suite fails the run.
const maxStallCredit = 2 * time.Minute

// stalled returns how much of [from, to] the stalls cover. Stalls are in time
// order and do not overlap.
func stalled(stalls []Stall, from, to int64) time.Duration {
	var d int64
	for _, s := range stalls {
		if lo, hi := max(s.Start, from), min(s.End, to); hi > lo {
			d += hi - lo
		}
	}
	return time.Duration(d)
}

// extend returns the deadline of a wait of d from start that does not count
// stalled time: start + d + the stalls in between, at most maxStallCredit more.
func extend(stalls []Stall, start int64, d time.Duration) int64 {
	end := start + int64(d)
	for {
		credit := min(stalled(stalls, start, end), maxStallCredit)
		next := start + int64(d+credit)
		if next == end {
			return end
		}
		end = next
	}
}

// probePeriod is how often the probe asks the database.
const probePeriod = 100 * time.Millisecond

// stallGrace is how much longer than probePeriod a probe round may take before
// it counts as stalled, for a renew deadline renew: a candidate whose statement
// took a quarter of its deadline longer than usual is close to missing it.
func stallGrace(renew time.Duration) time.Duration { return max(renew/4, 20*time.Millisecond) }

// probe runs until ctx ends: every probePeriod it runs q on db (a commit of a
// one-row write to a table of the harness's own, probeWrite, or a SELECT 1), as a
// candidate's statement waits for the machine, the
// server and its log's flush, and passes to add the part of each round that took
// more than grace past the period (the timer's own lateness included: a starved
// harness is a starved candidate too).
func probe(ctx context.Context, db *sql.DB, q string, grace time.Duration, add func(Stall)) {
	last := Mono()
	for ctx.Err() == nil {
		time.Sleep(probePeriod)
		qctx, cancel := context.WithTimeout(ctx, maxStallCredit)
		_, _ = db.ExecContext(qctx, q) // an error is a long round too
		cancel()
		now := Mono()
		if time.Duration(now-last) > probePeriod+grace {
			add(Stall{Start: last + int64(probePeriod+grace), End: now})
		}
		last = now
	}
}

// createProbeTable creates the probe's table (quoted) on db, with its one row.
func createProbeTable(ctx context.Context, db *sql.DB, table string) error {
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (id INT PRIMARY KEY, n BIGINT NOT NULL)"); err != nil {
		return err
	}
	_, _ = db.ExecContext(ctx, "INSERT INTO "+table+" (id, n) VALUES (1, 0)") // there already after an earlier run
	return nil
}

// probeWrite is the probe's statement on its table (quoted).
func probeWrite(table string) string { return "UPDATE " + table + " SET n = n + 1 WHERE id = 1" }

// waitFor waits until cond holds, for up to d of time that the stalls (read under
// mu) do not cover, and reports whether it held.
func waitFor(ctx context.Context, mu *sync.Mutex, stalls *[]Stall, d time.Duration, cond func() bool) bool {
	start := Mono()
	for ctx.Err() == nil {
		if cond() {
			return true
		}
		mu.Lock()
		deadline := extend(*stalls, start, d)
		mu.Unlock()
		if Mono() >= deadline {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cond()
}

// probe starts the harness's probe (see probe) on db, into the run's
// History.Stalls, for a renew deadline renew; it stops, and its table is dropped,
// when t ends. On SQLite it writes to a database file of its own, so that it waits
// for the disk and the machine as the candidates do without taking their write
// lock.
func (r *recorder) probe(t testing.TB, db *DB, renew time.Duration) {
	pdb, dialect, name := db.SQL, schema.Dialect(db.Dialect), db.Table+"_probe"
	if db.Dialect == SQLite {
		var err error
		if pdb, err = sqlite.Open(filepath.Join(t.TempDir(), "probe.db")); err != nil {
			t.Fatalf("casleadertest: the probe's database: %v", err)
		}
		t.Cleanup(func() { pdb.Close() })
	}
	table, err := ident.Quote(dialect, name)
	if err != nil {
		t.Fatalf("casleadertest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := createProbeTable(ctx, pdb, table); err != nil {
		t.Fatalf("casleadertest: the probe's table: %v", err)
	}
	pctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		probe(pctx, pdb, probeWrite(table), stallGrace(renew), func(s Stall) {
			r.mu.Lock()
			r.hist.Stalls = append(r.hist.Stalls, s)
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		stop()
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = pdb.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
	})
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
