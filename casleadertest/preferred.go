//go:build linux

package casleadertest

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// envPriority is the candidate's priority (Config.Priorities).
const envPriority = "CASLEADERTEST_PRIORITY"

// KillPreferred is the fault of [ProcessCluster.RunPreferred]: SIGKILL of the preferred
// candidate (slot 0), which is then started again.
const KillPreferred = "kill-preferred"

// priority returns the priority of the candidate in slot.
func (c *ProcessCluster) priority(slot int) int {
	if slot < len(c.cfg.Priorities) {
		return c.cfg.Priorities[slot]
	}
	return 0
}

// PreferredReport is what [ProcessCluster.RunPreferred] measured of the preferred
// leader rule, besides the checker's [Report].
type PreferredReport struct {
	Restarts int // kills and restarts of the preferred candidate
	// PreferredTerms counts, over every key, the terms led by the preferred
	// candidate (each came by a handover, or an election while nobody led);
	// OtherTerms those led by the others.
	PreferredTerms, OtherTerms int
	// ToHandover are the times from each start of the preferred candidate to
	// the moment it led every key: the rule allows none below one lease.
	ToHandover []time.Duration
	// LostTerms counts the terms, of any candidate and key, that ended because
	// no renewal succeeded in time (the database or the machine did not answer):
	// each allows one more term of the preferred candidate and two more of the
	// others (a takeover, and a handover to the middle priority).
	LostTerms int
	// Missed counts the candidates' statements that reached their deadline.
	Missed int
}

// RunPreferred runs the preferred leader scenario: the candidate in slot 0 has
// the highest priority (Config.Priorities), the others lower ones. It waits
// until the preferred candidate leads every key (the others hand over to it once
// it has been live for a lease), lets it lead for up to a lease, kills it
// (SIGKILL: another candidate takes over when the lease expires) and starts it
// again, restarts times; then it stops everything and checks the history like
// [ProcessCluster.Run] (beliefs never overlap, tokens never go back, a leader back
// after each kill). By the rule each start of the preferred candidate allows at
// most one term of it per key, and each kill (and the start) at most one term of
// another candidate per key plus one per priority level between that candidate
// and the preferred one (a lower one hands over to a middle one that has been
// live for a lease before the restarted preferred one has). Each handover to the
// preferred candidate must come one lease or more after it started.
func (c *ProcessCluster) RunPreferred(ctx context.Context, restarts int) (Report, PreferredReport, error) {
	cfg := c.cfg
	var pr PreferredReport
	if c.priority(0) <= slices.Max(append([]int{0}, cfg.Priorities[min(1, len(cfg.Priorities)):]...)) {
		return Report{}, pr, fmt.Errorf("casleadertest: RunPreferred needs slot 0's priority above every other (Priorities %v)", cfg.Priorities)
	}
	sctx, stopSnaps := context.WithCancel(ctx)
	defer stopSnaps()
	go c.snapshotLoop(sctx)
	started := time.Now()
	for i := range c.slots {
		if err := c.start(i); err != nil {
			return Report{}, pr, err
		}
	}
	bound := c.bounds().Liveness()
	// The handover comes a lease after the preferred candidate's rows were first
	// seen live (its first write, then the leader's next members read: once a
	// lease), at the first members read after that (up to a lease later, or two
	// when the write times estimated by the reads fall just short of a lease),
	// after the leader has led a lease itself, then the drain and the write.
	handoverBound := 4*c.bounds().Lease + bound
	for i := 0; ; i++ {
		if err := c.failure(); err != nil {
			return Report{}, pr, err
		}
		pref := c.slots[0]
		if !c.waitHandover(ctx, pref, handoverBound) {
			return Report{}, pr, c.harnessError(fmt.Sprintf("restart %d: the preferred candidate %s did not lead every key within %v of its start, or of the last statement of a candidate that ran out of time (%s)",
				i, pref.id, handoverBound, c.missedSummary()))
		}
		pr.ToHandover = append(pr.ToHandover, time.Since(started))
		if i == restarts {
			break
		}
		time.Sleep(time.Duration(c.rng.Int64N(int64(cfg.Lease)))) // let it lead
		f := Fault{Kinds: []string{KillPreferred}, Targets: []string{pref.id}, Leader: procID(c.leader()), Start: Mono()}
		if err := c.kill(pref); err != nil {
			return Report{}, pr, fmt.Errorf("restart %d: kill %s: %w", i, pref.id, err)
		}
		f.Heal = Mono()
		c.mu.Lock()
		c.hist.Faults = append(c.hist.Faults, f)
		c.mu.Unlock()
		after := c.waitLeader(ctx, bound+30*time.Second)
		if after == nil {
			return Report{}, pr, c.harnessError(fmt.Sprintf("restart %d: no leader (of every key) within %v of killing %s", i, bound+30*time.Second, pref.id))
		}
		cfg.Logf("%s restart %d: killed the preferred candidate %s; %s leads after %v", time.Now().Format("15:04:05.000"), i, pref.id, after.id,
			time.Duration(Mono()-f.Heal).Round(time.Millisecond))
		started = time.Now()
		if err := c.start(0); err != nil {
			return Report{}, pr, err
		}
		pr.Restarts++
	}
	time.Sleep(cfg.Lease) // a last stretch: nobody hands over again
	stopSnaps()
	c.mu.Lock()
	c.hist.End = Mono()
	c.mu.Unlock()
	c.stopAll()
	if err := c.failure(); err != nil {
		return Report{}, pr, err
	}
	c.mu.Lock()
	for k := range c.open {
		c.closeBelief(k, Mono())
	}
	h := c.hist
	preferred := map[string]bool{}
	for _, p := range c.all {
		if p.slot == 0 {
			preferred[p.id] = true
		}
	}
	pr.LostTerms, pr.Missed = c.missed.lostTerms(), c.missed.n
	c.mu.Unlock()
	acts, err := c.readActions(ctx)
	if err != nil {
		return Report{}, pr, err
	}
	h.Actions = acts
	c.History = h
	terms := map[belief]map[int64]bool{}
	for _, b := range h.Beliefs {
		k := belief{b.Cand, b.Key}
		if terms[k] == nil {
			terms[k] = map[int64]bool{}
		}
		terms[k][b.Token] = true
	}
	for k, ts := range terms {
		if preferred[k.cand] {
			pr.PreferredTerms += len(ts)
		} else {
			pr.OtherTerms += len(ts)
		}
	}
	return Check(h, c.bounds()), pr, nil
}

// leadsAll reports whether p believes it leads every key.
func (c *ProcessCluster) leadsAll(p *proc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, key := range c.keys {
		if _, ok := c.open[belief{p.id, key}]; !ok {
			return false
		}
	}
	return true
}

// waitLeading waits up to d (not stalled, see waitFor) until p believes it leads every key.
func (c *ProcessCluster) waitLeading(ctx context.Context, p *proc, d time.Duration) bool {
	return c.waitFor(ctx, d, func() bool { return c.leadsAll(p) })
}

// waitHandover waits until p believes it leads every key, for up to d (see
// waitAnswered). The rule hands a key over once the target's rows were seen live
// over a lease of the leader's term, read after read: a term lost, a members row
// written too late or a read that failed starts that lease again.
func (c *ProcessCluster) waitHandover(ctx context.Context, p *proc, d time.Duration) bool {
	return c.waitAnswered(ctx, d, func() bool { return c.leadsAll(p) })
}

// waitAnswered waits until cond holds, for up to d of time that the stalls do not
// cover (see waitFor), counted from the latest of the wait's start and the last
// miss that a candidate reported (see missHooks): a statement that reached its
// deadline, or a term lost to a missed renewal. The misses postpone the start by
// maxStallCredit at most, as stalls lengthen a wait, so that a cond that never
// comes still fails the run.
func (c *ProcessCluster) waitAnswered(ctx context.Context, d time.Duration, cond func() bool) bool {
	start := Mono()
	for ctx.Err() == nil {
		if cond() {
			return true
		}
		c.mu.Lock()
		from := min(max(start, c.missed.until), start+int64(maxStallCredit))
		deadline := extend(c.hist.Stalls, from, d)
		c.mu.Unlock()
		if Mono() >= deadline {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cond()
}

// missedSummary says what the candidates reported did not answer them in time.
func (c *ProcessCluster) missedSummary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.missed
	if m.until == 0 {
		return "none reported"
	}
	return fmt.Sprintf("%d statements reached their deadline and %d terms were lost to a missed renewal, the last %v ago",
		m.n, m.lostTerms(), time.Duration(Mono()-m.until).Round(time.Millisecond))
}
