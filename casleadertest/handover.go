//go:build linux

package casleadertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	mysqlstore "github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// HandoverToDuplicate is the fault of [ProcessCluster.RunHandovers]: a step-down
// request, as `casleader handover --to` writes it, that hands every key over to an
// ID that two live candidate processes share.
const HandoverToDuplicate = "handover-to-duplicate"

// HandoverReport is what [ProcessCluster.RunHandovers] measured besides the
// checker's [Report].
type HandoverReport struct {
	Rounds int // handovers to the shared ID
	// Refusals counts the processes of the shared ID that stopped with
	// ErrDuplicateID.
	Refusals int
	// SharedTerms counts the terms (of a key) that more than one process believed
	// it led: the protocol allows none, whatever IDs the processes share.
	SharedTerms int
	// ToClaim are the times from each handover request to the moment every key was
	// led by a process of the shared ID.
	ToClaim []time.Duration
}

// stepDowner is what the harness needs of a store to ask for a handover.
type stepDowner interface {
	Observe(ctx context.Context, key string) (store.Record, bool, error)
	RequestStepDown(ctx context.Context, key string, version int64, to string) (bool, error)
}

// RunHandovers runs the duplicated ID scenario: two or more slots share one
// candidate ID (ProcessConfig.IDs), as two processes started with one ID by
// mistake, and another slot (the home slot, of an ID of its own) leads first.
// Each of rounds times, with every process of the shared ID running, it asks the
// leader through the store to hand every key over to the shared ID, waits until
// those processes lead every key and one of them stopped with ErrDuplicateID
// (it read a term of its ID that it did not win being renewed), then hands every
// key back to the home slot and starts the stopped processes again. Then it stops
// everything and checks the history like [ProcessCluster.Run]: one term has one
// believer, beliefs never overlap, tokens never go back, a leader back after each
// handover. A round in which no process refuses is a harness error.
func (c *ProcessCluster) RunHandovers(ctx context.Context, rounds int) (Report, HandoverReport, error) {
	var hr HandoverReport
	shared, home, err := c.handoverSlots()
	if err != nil {
		return Report{}, hr, err
	}
	st, err := c.stepDowner()
	if err != nil {
		return Report{}, hr, err
	}
	b := c.bounds()
	wait := 3*b.Lease + b.Liveness() // a handover, or a lease that expires after a refusal
	if err := c.start(home); err != nil {
		return Report{}, hr, err
	}
	for i := range rounds {
		if err := c.handBack(ctx, st, c.slots[home], wait); err != nil {
			return Report{}, hr, fmt.Errorf("round %d: %w", i, err)
		}
		twins, err := c.startTwins(ctx, shared, wait)
		if err != nil {
			return Report{}, hr, err
		}
		f := Fault{Kinds: []string{HandoverToDuplicate}, Leader: c.slots[home].id, Start: Mono()}
		for _, p := range twins {
			f.Targets = append(f.Targets, p.id)
		}
		if err := c.handAll(ctx, st, c.candID(shared[0])); err != nil {
			return Report{}, hr, fmt.Errorf("round %d: %w", i, err)
		}
		f.Heal = Mono()
		c.mu.Lock()
		c.hist.Faults = append(c.hist.Faults, f)
		c.mu.Unlock()
		hr.Rounds++
		// Every key led by them, unless one stopped first (a group whose keys went
		// to both: the keys of the one that stopped come back by the lease). A
		// claim needs the twins' reads and elections answered: the wait counts
		// from the last statement that ran out of time (waitAnswered).
		if !c.waitAnswered(ctx, wait, func() bool { return c.ledBy(twins) || c.refusals(twins) > 0 }) {
			return Report{}, hr, c.harnessError(fmt.Sprintf("round %d: the processes of ID %q did not lead every key within %v of the handover, or of the last statement of a candidate that ran out of time (%s)",
				i, c.candID(shared[0]), wait, c.missedSummary()))
		}
		if c.ledBy(twins) {
			hr.ToClaim = append(hr.ToClaim, time.Duration(Mono()-f.Heal))
		}
		// Telling the twins apart needs their reads answered too.
		if !c.waitAnswered(ctx, wait, func() bool { return c.refusals(twins) > 0 }) {
			return Report{}, hr, c.harnessError(fmt.Sprintf("round %d: no process of ID %q stopped with ErrDuplicateID within %v of leading, or of the last statement of a candidate that ran out of time (%s)",
				i, c.candID(shared[0]), wait, c.missedSummary()))
		}
		c.cfg.Logf("%s round %d: handed over to %q (processes %v) %v ago; %d of them stopped with ErrDuplicateID",
			time.Now().Format("15:04:05.000"), i, c.candID(shared[0]), f.Targets, time.Duration(Mono()-f.Heal).Round(time.Millisecond), c.refusals(twins))
	}
	if err := c.handBack(ctx, st, c.slots[home], wait); err != nil {
		return Report{}, hr, err
	}
	time.Sleep(b.Lease) // a last stretch of history
	return c.finishHandovers(ctx, hr)
}

// handoverSlots returns the slots that share an ID and the first slot that has
// one of its own.
func (c *ProcessCluster) handoverSlots() (shared []int, home int, err error) {
	home = -1
	for slot := range c.cfg.Candidates {
		switch {
		case c.shared(slot) && (len(shared) == 0 || c.candID(slot) == c.candID(shared[0])):
			shared = append(shared, slot)
		case !c.shared(slot) && home < 0:
			home = slot
		}
	}
	if len(shared) == 0 || home < 0 {
		return nil, 0, fmt.Errorf("casleadertest: RunHandovers needs two slots of one ID and a slot of an ID of its own (IDs %q, Candidates %d)", c.cfg.IDs, c.cfg.Candidates)
	}
	return shared, home, nil
}

// stepDowner returns a store on the parent's connection.
func (c *ProcessCluster) stepDowner() (stepDowner, error) {
	switch c.cfg.Dialect {
	case schema.MySQL:
		return mysqlstore.New(c.db, c.cfg.Table)
	case schema.Postgres:
		return postgres.NewDB(c.db, c.cfg.Table)
	default:
		return sqlite.New(c.db, c.cfg.Table)
	}
}

// startTwins starts the processes of the shared slots that do not run (all of
// them at first, then those that stopped) and waits until each takes part.
func (c *ProcessCluster) startTwins(ctx context.Context, shared []int, wait time.Duration) ([]*proc, error) {
	var twins []*proc
	for _, slot := range shared {
		p := c.slots[slot]
		if p.cmd != nil && c.refusals([]*proc{p}) > 0 {
			// It stopped: its process ends.
			if !c.waitFor(ctx, wait, func() bool { return closed(p.exited) }) {
				return nil, c.harnessError(fmt.Sprintf("candidate %s did not exit within %v of stopping with ErrDuplicateID", p.id, wait))
			}
		}
		if p.cmd == nil || closed(p.exited) {
			if err := c.start(slot); err != nil {
				return nil, err
			}
		}
		p = c.slots[slot]
		c.waitFor(ctx, wait, func() bool { return closed(p.ready) || closed(p.exited) })
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case closed(p.ready):
		case closed(p.exited):
			return nil, c.harnessError(fmt.Sprintf("candidate %s exited before it took part", p.id))
		default:
			return nil, c.harnessError(fmt.Sprintf("candidate %s did not take part within %v of its start", p.id, wait))
		}
		twins = append(twins, p)
	}
	return twins, nil
}

// handBack hands every key over to home until it leads them all, within wait:
// keys that a stopped process held come back by their lease, to any candidate.
func (c *ProcessCluster) handBack(ctx context.Context, st stepDowner, home *proc, wait time.Duration) error {
	var err error
	led := c.waitFor(ctx, wait, func() bool {
		if err = c.handAll(ctx, st, c.procCandID(home)); err != nil {
			return true
		}
		return c.waitLeading(ctx, home, c.bounds().Lease/2)
	})
	switch {
	case err != nil:
		return fmt.Errorf("hand back: %w", err)
	case !led:
		return c.harnessError(fmt.Sprintf("%s does not lead every key within %v of asking", home.id, wait))
	}
	return nil
}

// procCandID returns the candidate ID of process p.
func (c *ProcessCluster) procCandID(p *proc) string {
	if id := c.candID(p.slot); id != "" {
		return id
	}
	return p.id
}

// handAll asks the leader of every key, through the store, to hand it over to
// candidate to, as `casleader handover --to` does: a key that to leads already,
// that has a request for to pending, or that nobody leads is left alone.
func (c *ProcessCluster) handAll(ctx context.Context, st stepDowner, to string) error {
	for _, key := range c.keys {
		for attempt := 1; ; attempt++ {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			rec, found, err := st.Observe(rctx, key)
			swapped := false
			if err == nil && found && !rec.Released() && rec.LeaderID != to && !(rec.StepDown && rec.HandoverTo == to) {
				swapped, err = st.RequestStepDown(rctx, key, rec.Version, to)
			} else if err == nil {
				swapped = true // nothing to ask
			}
			cancel()
			if err != nil && !errors.Is(err, store.ErrTransient) {
				return fmt.Errorf("hand %q over to %q: %w", key, to, err)
			}
			if swapped {
				break
			}
			if attempt == 100 {
				return fmt.Errorf("hand %q over to %q: the row kept changing for %d attempts (last error: %v)", key, to, attempt, err)
			}
			time.Sleep(time.Duration(5+c.rng.IntN(20)) * time.Millisecond) // a renewal got in first
		}
	}
	return nil
}

// ledBy reports whether every key is led by one of procs.
func (c *ProcessCluster) ledBy(procs []*proc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, key := range c.keys {
		if !slices.ContainsFunc(procs, func(p *proc) bool { _, ok := c.open[belief{p.id, key}]; return ok }) {
			return false
		}
	}
	return true
}

// refusals counts the processes of procs that stopped with ErrDuplicateID.
func (c *ProcessCluster) refusals(procs []*proc) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range procs {
		if p.refused {
			n++
		}
	}
	return n
}

// finishHandovers stops everything, counts the refusals and the terms believed by
// more than one process, and checks the history.
func (c *ProcessCluster) finishHandovers(ctx context.Context, hr HandoverReport) (Report, HandoverReport, error) {
	c.mu.Lock()
	c.hist.End = Mono()
	c.mu.Unlock()
	c.stopAll()
	if err := c.failure(); err != nil {
		return Report{}, hr, err
	}
	c.mu.Lock()
	for k := range c.open {
		c.closeBelief(k, Mono())
	}
	h := c.hist
	hr.Refusals = 0
	for _, p := range c.all {
		if p.refused {
			hr.Refusals++
		}
	}
	c.mu.Unlock()
	believers := map[string]map[int64]map[string]bool{} // key, term: processes
	for _, b := range h.Beliefs {
		if believers[b.Key] == nil {
			believers[b.Key] = map[int64]map[string]bool{}
		}
		if believers[b.Key][b.Token] == nil {
			believers[b.Key][b.Token] = map[string]bool{}
		}
		believers[b.Key][b.Token][b.Cand] = true
	}
	for _, terms := range believers {
		for _, procs := range terms {
			if len(procs) > 1 {
				hr.SharedTerms++
			}
		}
	}
	acts, err := c.readActions(ctx)
	if err != nil {
		return Report{}, hr, err
	}
	h.Actions = acts
	c.History = h
	return Check(h, c.bounds()), hr, nil
}
