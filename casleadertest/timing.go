//go:build linux

package casleadertest

import (
	"strings"
	"time"
)

// timing is a candidate's lease, renew deadline, heartbeat and poll interval.
type timing struct{ lease, renew, heartbeat, poll time.Duration }

// String is the candidate's envTimings: lease,renew,heartbeat,poll.
func (t timing) String() string {
	return strings.Join([]string{t.lease.String(), t.renew.String(), t.heartbeat.String(), t.poll.String()}, ",")
}

// timing returns the timings of the candidate in slot (ProcessConfig.Leases).
func (c *ProcessCluster) timing(slot int) timing {
	cfg := c.cfg
	t := timing{cfg.Lease, cfg.Renew, cfg.Heartbeat, cfg.Poll}
	if slot >= len(cfg.Leases) || cfg.Leases[slot] == 0 {
		return t
	}
	f := float64(cfg.Leases[slot]) / float64(cfg.Lease)
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * f) }
	return timing{cfg.Leases[slot], scale(cfg.Renew), scale(cfg.Heartbeat), scale(cfg.Poll)}
}

// bounds are the checker's bounds: those of the slowest timings in the cluster, as
// a takeover waits for the lease of the leader it replaces.
func (c *ProcessCluster) bounds() Bounds {
	b := Bounds{Slack: c.cfg.Slack}
	for slot := range c.cfg.Candidates {
		t := c.timing(slot)
		b.Lease, b.Renew, b.Poll = max(b.Lease, t.lease), max(b.Renew, t.renew), max(b.Poll, t.poll)
	}
	return b
}

// candID returns the candidate ID given to slot (ProcessConfig.IDs), or "" when
// each of its processes takes one of its own.
func (c *ProcessCluster) candID(slot int) string {
	if slot < len(c.cfg.IDs) {
		return c.cfg.IDs[slot]
	}
	return ""
}

// shared reports whether slot's candidate ID is given to another slot too.
func (c *ProcessCluster) shared(slot int) bool {
	id := c.candID(slot)
	n := 0
	for _, x := range c.cfg.IDs {
		if x == id {
			n++
		}
	}
	return id != "" && n > 1
}
