//go:build linux

package casleadertest

import (
	"context"
	"time"

	"github.com/casleader/casleader/schema"
)

// probeTable is the table of the probe's row.
func (c *ProcessCluster) probeTable() string { return c.cfg.Table + "_probe" }

// probe runs the harness's probe (see probe) until ctx ends, into History.Stalls.
// On SQLite, where writers queue for one lock, it sends SELECT 1.
func (c *ProcessCluster) probe(ctx context.Context) {
	q := probeWrite(c.quote(c.probeTable()))
	if c.cfg.Dialect == schema.SQLite {
		q = "SELECT 1"
	}
	probe(ctx, c.db, q, stallGrace(c.bounds().Renew), func(s Stall) {
		c.mu.Lock()
		c.hist.Stalls = append(c.hist.Stalls, s)
		c.mu.Unlock()
	})
}

// waitFor waits until cond holds, for up to d of time not stalled (History.Stalls),
// and reports whether it held.
func (c *ProcessCluster) waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	return waitFor(ctx, &c.mu, &c.hist.Stalls, d, cond)
}
