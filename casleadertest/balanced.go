//go:build linux

package casleadertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/casleader/casleader/schema"
)

// Events of [ProcessCluster.RunBalanced] besides [KillLeader], [StopLeader] and
// [CutLeader] (in a balanced group every candidate leads some keys: each is "the
// leader" of its share).
const (
	Join  = "join"  // a stopped candidate is started
	Leave = "leave" // a candidate is stopped gracefully (SIGTERM): its Run ends and hands its keys over
)

// balanceEvents are the kinds RunBalanced draws from, each once in a shuffled
// order before any comes again.
var balanceEvents = []string{Join, Leave, KillLeader, StopLeader, CutLeader}

// RunBalanced runs the balanced group scenario (ProcessConfig.Balance, Keys):
// every slot's candidate starts, and once the keys are spread fairly, events
// times one of: a join (a stopped slot's candidate starts), a graceful leave
// (SIGTERM), a kill (SIGKILL), a pause past the lease (SIGSTOP until the others
// share the keys fairly, then SIGCONT) or a network cut (a black hole until the
// same, then healed), drawn at random among those the cluster allows then (a
// leave or a kill leaves two candidates or more, a pause or a cut one or more, a
// join needs a stopped slot). Then it stops everything and checks the history
// like [ProcessCluster.Run], per key, and the fairness of the spread after each
// change of the candidates that take a share (History.Shares), within bounds
// from the design, with L the lease, P the poll interval, S the slack, and a
// members period of L/2 (the live candidates are read, and the keys handed over,
// once per period; at most movesPerPeriod handovers per leader per period):
//
//   - a candidate lost (kill, pause, cut): 2L + P + S. Its leases run out within
//     L, its members rows stop being fresh within 3L/4 and the survivors' next
//     read (within a period) gives its keys out; a period more when their views
//     differ; the one given a key takes it at its next read (within P); and a key
//     found free for a lease is taken by anyone (2L).
//   - a candidate gained (join, or back from a pause or a cut, with no key
//     left): a period for every leader to read it, as many periods as the
//     handovers of the leader that sheds the most need (movesPerPeriod per period), a
//     period more when views differ, P for the target's read, and S.
//   - a candidate that leaves hands each key to the candidate that should take
//     it and deletes its rows; the others' next read (within a period) no
//     longer shows it, a period more when views differ: L + P + S.
//
// Not on SQLite, whose candidates have no link to cut.
//
// S covers round trips and scheduling as in the liveness bound, and stalls of the
// database (History.Stalls) lengthen every bound and every wait.
func (c *ProcessCluster) RunBalanced(ctx context.Context, events int) (Report, error) {
	if !c.cfg.Balance || c.cfg.Dialect == schema.SQLite {
		return Report{}, errors.New("casleadertest: RunBalanced needs ProcessConfig.Balance and Keys, on MySQL or PostgreSQL")
	}
	for i := range c.slots {
		if err := c.start(i); err != nil {
			return Report{}, err
		}
	}
	live := c.running()
	if err := c.awaitReady(ctx, live); err != nil {
		return Report{}, err
	}
	// At the start one candidate may lead every key and hand over movesPerPeriod per period;
	// the start is not judged (no Share), so the wait is generous: every process
	// starts at once, on a machine that may be loaded.
	if !c.waitFair(ctx, live, time.Duration(len(c.keys)/movesPerPeriod+4)*c.bounds().Lease+c.bounds().Liveness()+2*time.Minute) {
		return Report{}, c.harnessError(fmt.Sprintf("the keys were not spread fairly over %d candidates after the start", len(live)))
	}
	var deck []string
	for i := 0; i < events; i++ {
		if err := c.failure(); err != nil {
			return Report{}, err
		}
		time.Sleep(time.Duration(300+c.rng.IntN(1200)) * time.Millisecond) // let it work
		if len(deck) == 0 {
			deck = slices.Clone(balanceEvents)
			c.rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		j := slices.IndexFunc(deck, c.allowed)
		kind := deck[j]
		deck = slices.Delete(deck, j, j+1)
		if err := c.balanceEvent(ctx, i, kind); err != nil {
			return Report{}, err
		}
	}
	time.Sleep(time.Second) // a last stretch of history
	return c.finishBalanced(ctx)
}

// allowed reports whether the event kind may come now (see RunBalanced).
func (c *ProcessCluster) allowed(kind string) bool {
	n := len(c.running())
	switch kind {
	case Join:
		return n < len(c.slots)
	case Leave, KillLeader:
		return n >= 3
	default:
		return n >= 2
	}
}

// running returns the candidates running now, by slot.
func (c *ProcessCluster) running() []*proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*proc
	for _, p := range c.slots {
		if p.cmd != nil && !p.killed && !p.stopping && !closed(p.exited) {
			out = append(out, p)
		}
	}
	return out
}

// awaitReady waits until each of procs takes part (its Run started).
func (c *ProcessCluster) awaitReady(ctx context.Context, procs []*proc) error {
	for _, p := range procs {
		if !c.waitFor(ctx, 30*time.Second, func() bool { return closed(p.ready) || closed(p.exited) }) || !closed(p.ready) {
			return c.harnessError(fmt.Sprintf("candidate %s did not take part within 30s of its start", p.id))
		}
	}
	return nil
}

// balanceEvent applies one event of kind, records it as a fault and its shares,
// and waits until the spread is fair again.
func (c *ProcessCluster) balanceEvent(ctx context.Context, i int, kind string) error {
	b := c.bounds()
	before := c.running()
	t, err := c.eventTarget(ctx, kind, before)
	if err != nil {
		return err
	}
	f := Fault{Kinds: []string{kind}, Targets: []string{t.id}, Leader: t.id}
	among := slices.DeleteFunc(slices.Clone(before), func(p *proc) bool { return p == t })
	lost := 2*b.Lease + b.Poll + b.Slack
	f.Start = Mono()
	switch kind {
	case Join:
		f.Leader = ""
		among = append(among, t)
		c.share(f.Start, among, c.gainBound(len(among)), kind, t)
	case Leave:
		c.mu.Lock()
		t.stopping = true
		c.mu.Unlock()
		err = t.cmd.Process.Signal(syscall.SIGTERM)
		c.share(f.Start, among, b.Lease+b.Poll+b.Slack, kind, t)
	case KillLeader:
		err = c.kill(t)
		c.share(f.Start, among, lost, kind, t)
	case StopLeader, CutLeader:
		c.share(f.Start, among, lost, kind, t)
		among, err = c.holdOff(ctx, kind, t, among, lost)
	}
	if err != nil {
		return fmt.Errorf("event %d: %s %s: %w", i, kind, t.id, err)
	}
	f.Heal = Mono()
	c.mu.Lock()
	c.hist.Faults = append(c.hist.Faults, f)
	c.mu.Unlock()
	fair := c.waitFair(ctx, among, max(lost, c.gainBound(len(among))))
	c.cfg.Logf("%s event %d: %s %s; %d candidates; spread fair %v after (%v)", time.Now().Format("15:04:05.000"), i, kind, t.id,
		len(among), time.Duration(Mono()-f.Heal).Round(time.Millisecond), fair)
	if kind == Leave && !c.waitFor(ctx, 30*time.Second, func() bool { return closed(t.exited) }) {
		return c.harnessError(fmt.Sprintf("event %d: %s did not exit within 30s of SIGTERM", i, t.id))
	}
	return nil
}

// eventTarget returns the candidate an event of kind acts on: for a join, the
// process it started in a stopped slot, once it takes part; else one of before.
func (c *ProcessCluster) eventTarget(ctx context.Context, kind string, before []*proc) (*proc, error) {
	if kind != Join {
		return before[c.rng.IntN(len(before))], nil
	}
	slot := slices.IndexFunc(c.slots, func(p *proc) bool { return !slices.Contains(before, p) })
	if err := c.start(slot); err != nil {
		return nil, err
	}
	t := c.slots[slot]
	return t, c.awaitReady(ctx, []*proc{t})
}

// holdOff freezes (StopLeader) or cuts off (CutLeader) t until the others share
// the keys fairly or the bound lost has passed, then lets it back, and returns
// the candidates that share the keys from then on (a Share of them is recorded).
func (c *ProcessCluster) holdOff(ctx context.Context, kind string, t *proc, others []*proc, lost time.Duration) ([]*proc, error) {
	var err error
	if kind == StopLeader {
		err = t.cmd.Process.Signal(syscall.SIGSTOP)
	} else {
		err = c.cut(t)
	}
	if err != nil {
		return others, err
	}
	c.waitFair(ctx, others, lost) // past the lease: until the others share the keys
	if kind == StopLeader {
		err = t.cmd.Process.Signal(syscall.SIGCONT)
	} else {
		err = c.clear(t)
	}
	among := append(slices.Clone(others), t)
	c.share(Mono(), among, c.gainBound(len(among)), "back from "+kind, t)
	return among, err
}

// movesPerPeriod is how many keys a balanced group's leader hands over per members
// period at most (group_balance.go's movesPerRound).
const movesPerPeriod = 256

// gainBound is the fairness bound after a candidate joined m-1 others (see
// RunBalanced): the leader that sheds the most sheds ⌈N/(m-1)⌉ - ⌊N/m⌋ keys,
// movesPerPeriod per period.
func (c *ProcessCluster) gainBound(m int) time.Duration {
	b := c.bounds()
	period := b.Lease / 2
	n := len(c.keys)
	shed := n - n/m
	if m > 1 {
		shed = (n+m-2)/(m-1) - n/m
	}
	rounds := max(1, (shed+movesPerPeriod-1)/movesPerPeriod)
	return time.Duration(rounds+2)*period + b.Poll + b.Slack
}

// share records a Share of the keys among procs from at.
func (c *ProcessCluster) share(at int64, procs []*proc, within time.Duration, kind string, t *proc) {
	s := Share{At: at, Within: within, Kind: kind, Cause: kind + " " + t.id}
	for _, p := range procs {
		s.Among = append(s.Among, p.id)
	}
	c.mu.Lock()
	c.hist.Shares = append(c.hist.Shares, s)
	c.mu.Unlock()
}

// waitFair waits up to d (not stalled) until every key is believed led by one of
// procs (beliefs of others are not counted: a frozen candidate's stay open) and
// each leads ⌊N/M⌋ or ⌈N/M⌉ keys; it reports whether that came.
func (c *ProcessCluster) waitFair(ctx context.Context, procs []*proc, d time.Duration) bool {
	ids := map[string]bool{}
	for _, p := range procs {
		ids[p.id] = true
	}
	return c.waitFor(ctx, d, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		leaders := make(map[string]map[string]bool, len(c.keys))
		for _, k := range c.keys {
			leaders[k] = map[string]bool{}
		}
		for b := range c.open {
			if ids[b.cand] && leaders[b.key] != nil {
				leaders[b.key][b.cand] = true
			}
		}
		ok, _ := fairSpread(leaders, slices.Collect(func(yield func(string) bool) {
			for _, p := range procs {
				if !yield(p.id) {
					return
				}
			}
		}))
		return ok
	})
}

// finishBalanced stops everything and checks the history.
func (c *ProcessCluster) finishBalanced(ctx context.Context) (Report, error) {
	c.mu.Lock()
	c.hist.End = Mono()
	c.mu.Unlock()
	c.stopAll()
	if err := c.failure(); err != nil {
		return Report{}, err
	}
	c.mu.Lock()
	for k := range c.open {
		c.closeBelief(k, Mono())
	}
	h := c.hist
	c.mu.Unlock()
	acts, err := c.readActions(ctx)
	if err != nil {
		return Report{}, err
	}
	h.Actions = acts
	c.History = h
	rep := Check(h, c.bounds())
	rep.Violations = append(rep.Violations, untested(h, nil)...)
	return rep, nil
}
