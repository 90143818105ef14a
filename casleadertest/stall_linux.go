//go:build linux

package casleadertest

import (
	"context"
	"time"

	"github.com/casleader/casleader/schema"
)

// probePeriod is how often the probe asks the database.
const probePeriod = 100 * time.Millisecond

// stallGrace is how much longer than probePeriod a probe round may take before
// it counts as stalled, for a renew deadline renew: a candidate whose statement
// took a quarter of its deadline longer than usual is close to missing it.
func stallGrace(renew time.Duration) time.Duration { return max(renew/4, 20*time.Millisecond) }

// probeTable is the table of the probe's row.
func (c *ProcessCluster) probeTable() string { return c.cfg.Table + "_probe" }

// probe runs until ctx ends: every probePeriod it commits a write of one row of a
// table of its own (on SQLite, where writers queue for one lock, a SELECT 1) on the
// parent's connection, as a candidate's statement waits for the machine, the
// server and its log's flush, and appends to History.Stalls the part of each round
// that took more than stallGrace past the period (the timer's own lateness
// included: a starved harness is a starved candidate too).
func (c *ProcessCluster) probe(ctx context.Context) {
	grace := stallGrace(c.bounds().Renew)
	q := "UPDATE " + c.quote(c.probeTable()) + " SET n = n + 1 WHERE id = 1"
	if c.cfg.Dialect == schema.SQLite {
		q = "SELECT 1"
	}
	last := Mono()
	for ctx.Err() == nil {
		time.Sleep(probePeriod)
		qctx, cancel := context.WithTimeout(ctx, maxStallCredit)
		_, _ = c.db.ExecContext(qctx, q) // an error is a long round too
		cancel()
		now := Mono()
		if time.Duration(now-last) > probePeriod+grace {
			c.mu.Lock()
			c.hist.Stalls = append(c.hist.Stalls, Stall{Start: last + int64(probePeriod+grace), End: now})
			c.mu.Unlock()
		}
		last = now
	}
}

// waitFor waits until cond holds, for up to d of time not stalled (History.Stalls),
// and reports whether it held.
func (c *ProcessCluster) waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	start := Mono()
	for ctx.Err() == nil {
		if cond() {
			return true
		}
		c.mu.Lock()
		deadline := extend(c.hist.Stalls, start, d)
		c.mu.Unlock()
		if Mono() >= deadline {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
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
