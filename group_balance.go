package casleader

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/casleader/casleader/cas"
	"github.com/casleader/casleader/internal/balance"
	"github.com/casleader/casleader/internal/members"
	"github.com/casleader/casleader/store"
)

// movesPerRound bounds the handovers one rebalance asks for, so that a newcomer
// that should take many keys takes them over a few rounds (half a lease apart)
// rather than all at once. The handovers of a round go in one statement per
// target (HandoverMany); when they went one statement per key, 100 of them on a
// loaded machine outlasted the renew deadline and the pace was 32 (docs/SAFETY.md,
// "Balanced groups").
const movesPerRound = 256

// anchor returns the key whose members are read to learn the group's live
// candidates: the least key of the group, which every candidate of a balanced
// group (all with the same keys) follows.
func (g *Group) anchor() string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	least := ""
	for k := range g.keys {
		if least == "" || k < least {
			least = k
		}
	}
	return least
}

// rebalance decides, from the live candidates of the group, who should lead each
// key (package balance), publishes it for the followers (see campaigns), reads at
// once the keys given to this candidate that it does not lead (a dead candidate's
// expired keys are taken without waiting for the next poll), and asks
// Run to hand the keys this candidate leads beyond its share to the candidates
// furthest below theirs, at most movesPerRound at once. Those targets are chosen
// on the rows as they are now (see fresh), never on the followers' last reads.
func (g *Group) rebalance(ctx context.Context, live []store.Member) error {
	g.live.Store(&live)
	keys, leaders, led := g.leaders()
	cands := g.candidates(live)
	to := balance.Assign(keys, leaders, cands)
	g.assigned.Store(&to)
	var mine []string // given to this candidate and not led: read them now
	for _, k := range keys {
		if to[k] == g.cfg.ID && led[k] == 0 {
			mine = append(mine, k)
		}
	}
	if len(mine) > 0 {
		g.Wake(mine...)
	}
	if !sheds(balance.Shed(keys, leaders, cands, g.cfg.ID), led) {
		return nil
	}
	if err := g.fresh(ctx, keys, leaders, led); err != nil {
		return err
	}
	moves := 0
	for k, target := range balance.Shed(keys, leaders, cands, g.cfg.ID) {
		if led[k] != 0 && target != "" && moves < movesPerRound {
			g.rebalanceTo(k, led[k], target)
			moves++
		}
	}
	return nil
}

// sheds reports whether shed hands over a key that is led (led[k] != 0).
func sheds(shed map[string]string, led map[string]int64) bool {
	for k, target := range shed {
		if led[k] != 0 && target != "" {
			return true
		}
	}
	return false
}

// fresh replaces in leaders the leader of each key not led (led[k] == 0) by the
// one its row names now ("" when the lease is free, or names this candidate
// without being handed to it: a term of ours that ended), in batches of
// BatchSize. A follower reads a live lease again only when it may have expired,
// so its last read can be a lease old: a candidate that had just taken keys
// looked below its share, and was handed keys it then handed on, each key
// moving twice for one join.
func (g *Group) fresh(ctx context.Context, keys []string, leaders map[string]string, led map[string]int64) error {
	var others []string
	for _, k := range keys {
		if led[k] == 0 {
			others = append(others, k)
		}
	}
	for b := range slices.Chunk(others, g.cfg.BatchSize) {
		recs, err := g.st.ObserveMany(ctx, b)
		g.statements.Add(1)
		if err != nil {
			return fmt.Errorf("reading the election rows before handing keys over: %w", err)
		}
		for _, k := range b {
			rec, found := recs[k]
			switch {
			case !found || rec.Expired(g.cfg.LeaseDuration):
				leaders[k] = ""
			case rec.LeaderID == g.cfg.ID && !rec.Handed():
				leaders[k] = ""
			default:
				leaders[k] = rec.LeaderID
			}
		}
	}
	return nil
}

// candidates returns the candidates that take a share: the live members that
// neither observe nor pause, and this candidate unless it does.
func (g *Group) candidates(live []store.Member) []balance.Candidate {
	var cs []balance.Candidate
	for _, m := range live {
		if m.Role != members.RoleObserver && !m.Paused && m.ID != g.cfg.ID {
			cs = append(cs, balance.Candidate{ID: m.ID, Weight: 1})
		}
	}
	if !g.cfg.Observer && !g.paused.Load() {
		cs = append(cs, balance.Candidate{ID: g.cfg.ID, Weight: 1})
	}
	return cs
}

// leaders returns the group's keys, the leader last observed of each, and the
// term of each key this candidate leads.
func (g *Group) leaders() (keys []string, leaders map[string]string, led map[string]int64) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	keys = make([]string, 0, len(g.keys))
	leaders = make(map[string]string, len(g.keys))
	led = map[string]int64{}
	for k, sh := range g.keys {
		keys = append(keys, k)
		leaders[k] = sh.leaderID()
		if token := sh.trust.Token(); token != 0 {
			led[k] = token
			leaders[k] = g.cfg.ID
		}
	}
	slices.Sort(keys)
	return keys, leaders, led
}

// campaigns adjusts how a follower of s takes part in a balanced group: it
// campaigns only for the keys the last decision gave it, and otherwise takes a
// key only when it is handed over by name (cas.CoolingDown), so that the keys of
// a candidate that died are taken up evenly by the others rather than all by the
// first to notice. Candidates whose views differ may each think another should
// take a free key: once reads have found it free for a lease, any takes it.
func (g *Group) campaigns(s *state, p cas.Participation, now time.Time) cas.Participation {
	if !g.cfg.Balance || p != cas.Campaigning {
		return p
	}
	if !s.freeSince.IsZero() && now.Sub(s.freeSince) >= g.cfg.LeaseDuration {
		return p
	}
	to := g.assigned.Load()
	if to == nil {
		return p
	}
	if target, ok := (*to)[s.key]; ok && target != "" && target != g.cfg.ID {
		return cas.CoolingDown
	}
	return p
}

// seenFree records whether a read found s's row free (missing, released or
// expired), for campaigns.
func (s *state) seenFree(free bool, now time.Time) {
	switch {
	case !free:
		s.freeSince = time.Time{}
	case s.freeSince.IsZero():
		s.freeSince = now
	}
}

// exitTargets returns, for each key this candidate leads, the candidate to hand
// it to when Run ends, spread over the others by the last members read. A key
// missing from it is released.
func (g *Group) exitTargets() map[string]string {
	live := g.live.Load()
	if !g.cfg.Balance || live == nil {
		return nil
	}
	var others []balance.Candidate
	for _, c := range g.candidates(*live) {
		if c.ID != g.cfg.ID {
			others = append(others, c)
		}
	}
	keys, leaders, _ := g.leaders()
	return balance.Shed(keys, leaders, others, g.cfg.ID)
}
