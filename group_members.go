package casleader

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/casleader/casleader/internal/members"
	"github.com/casleader/casleader/store"
)

// startMembers starts recording this candidate in the members table for every key
// of the group: one batched statement
// per period (see internal/members.Period) for all keys, on a goroutine of its own that never touches the
// election rows. stop ends it and waits; on a clean stop (not KeepLeaseOnExit) it
// deletes the group's rows.
func (g *Group) startMembers(ctx context.Context) (stop func()) {
	c := members.Config{Store: g.st, ID: g.cfg.ID, Lease: g.cfg.LeaseDuration, Priority: int64(g.cfg.Priority),
		Snapshot: g.memberRows, Written: func(err error) { g.named.Store(err == nil) },
		Leading: g.ledTerms, Handover: g.handover, Successor: g.noteSuccessor,
		Keep: g.cfg.KeepLeaseOnExit, Logger: g.log}
	if g.cfg.Balance {
		c.Anchor, c.Balance = g.anchor, g.rebalance
	}
	return members.Start(ctx, c)
}

// ledTerms returns the keys led now with their terms, for the preferred leader rule.
func (g *Group) ledTerms() map[string]int64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out map[string]int64
	for key, sh := range g.keys {
		if token := sh.trust.Token(); token != 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[key] = token
		}
	}
	return out
}

// handover asks Run to hand key, led in term, over to to (the preferred leader
// rule); Run ignores it when that term has ended.
func (g *Group) handover(key string, term int64, to string) {
	g.request(op{key: key, token: term, to: to, reason: "handing the key over: the preferred leader rule"})
}

// rebalanceTo asks Run to hand key, led in term, over to to, to balance the group.
func (g *Group) rebalanceTo(key string, term int64, to string) {
	g.request(op{key: key, token: term, to: to, reason: "handing the key over to balance the group", quiet: true})
}

// successor is a key's successor as one read of its members showed it.
type successor struct {
	id   string            // "" when the read showed no live candidate
	incs map[string]string // the incarnations of the candidates that read showed, by ID
	sent time.Time         // when that read was sent
}

// noteSuccessor records the successor of key by the read sent at sent, and the
// incarnations of the members it returned (the members goroutine calls it after
// each read of the keys led).
func (g *Group) noteSuccessor(key, id string, read []store.Member, sent time.Time) {
	g.mu.RLock()
	sh := g.keys[key]
	g.mu.RUnlock()
	if sh == nil {
		return
	}
	next := &successor{id: id, sent: sent}
	for _, m := range read {
		if m.Incarnation != "" {
			if next.incs == nil {
				next.incs = map[string]string{}
			}
			next.incs[m.ID] = m.Incarnation
		}
	}
	if old := sh.next.Swap(next); old == nil || old.id != id {
		g.log.Debug("casleader: a graceful end of the term hands the key to this successor (none: releases it)", "key", key, "successor", id)
	}
}

// successor returns whom a graceful end of the term of s at now hands the lease
// to (a resign, Remove, Pause, the end of Run): the best live candidate of the key
// by the last read of its members (members.Successor), when that read was sent
// less than members.Fresh ago, so that the target wrote its row within two such
// spans; "" otherwise, and the lease is released. The target claims the lease
// with an election from the handed row, as after HandoverTo; one that died
// meanwhile leaves the lease to expire a lease later.
func (r *engine) successor(s *state, now time.Time) string {
	if n := s.sh.fresh(now, r.g.cfg.LeaseDuration); n != nil {
		return n.id
	}
	return ""
}

// fresh returns the last read of the key's members if it was sent less than
// members.Fresh(lease) before now, else nil: an older read vouches for nobody.
func (sh *shared) fresh(now time.Time, lease time.Duration) *successor {
	if n := sh.next.Load(); n != nil && now.Sub(n.sent) < members.Fresh(lease) {
		return n
	}
	return nil
}

// target is the candidate that a handover of the key to id writes in the row: with
// the incarnation that the last read of the key's members showed for id, when that
// read was sent less than members.Fresh before now, so that the target's process
// leads the handed term from its next read; else without (the target claims the
// handed lease with an election). A stale incarnation (the target restarted since)
// is adopted by nobody: the lease then expires a lease later, as when a target
// dies. Two processes that share id never both lead: the row names one process.
func (sh *shared) target(id string, now time.Time, lease time.Duration) store.Candidate {
	if n := sh.fresh(now, lease); n != nil {
		return store.Candidate{ID: id, Incarnation: n.incs[id]}
	}
	return store.Candidate{ID: id}
}

// memberRows are the group's rows in the members table now, one per key, each
// with this process's incarnation.
func (g *Group) memberRows() []store.Member {
	paused := g.paused.Load()
	g.mu.RLock()
	out := make([]store.Member, 0, len(g.keys))
	for key, sh := range g.keys {
		role := members.RoleFollower
		switch {
		case g.cfg.Observer:
			role = members.RoleObserver
		case sh.trust.IsLeader():
			role = members.RoleLeader
		}
		out = append(out, store.Member{Key: key, ID: g.cfg.ID, Role: role, Paused: paused, Priority: int64(g.cfg.Priority), Incarnation: g.cand.Incarnation})
	}
	g.mu.RUnlock()
	slices.SortFunc(out, func(a, b store.Member) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Members returns the candidates of the election key seen within the last two
// leases by the database clock, ordered by ID (see [Elector.Members]). It
// fails when the members table is missing (create it with `casleader migrate`)
// or the store keeps none.
func (g *Group) Members(ctx context.Context, key string) ([]store.Member, error) {
	ms, err := g.st.Members(ctx, key, members.Window(g.cfg.LeaseDuration))
	if err != nil {
		return nil, fmt.Errorf("casleader: members of %q: %w", key, err)
	}
	return ms, nil
}
