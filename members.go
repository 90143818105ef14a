package casleader

import (
	"context"
	"fmt"

	"github.com/casleader/casleader/internal/members"
	"github.com/casleader/casleader/store"
)

// startMembers starts recording this candidate in the store's members table, on a
// goroutine of its own: it never touches
// the election row and never delays the election. stop ends it and waits; on a
// clean stop (not KeepLeaseOnExit) it deletes the candidate's row.
func (e *Elector) startMembers(ctx context.Context) (stop func()) {
	return members.Start(ctx, members.Config{
		Store: e.store, ID: e.cfg.ID, Lease: e.cfg.LeaseDuration, Priority: int64(e.cfg.Priority),
		Snapshot: e.memberRow, Leading: e.leading, Keep: e.cfg.KeepLeaseOnExit,
		Logger: e.cfg.Logger.With("id", e.cfg.ID), // it logs the key where a line is about one
		Handover: func(_ string, term int64, to string) {
			// Scoped to the term: ignored if it has ended meanwhile.
			e.post(request{handoverTo: to, term: term, cooldown: e.cfg.LeaseDuration})
		},
	})
}

// leading returns the key with the term led now, for the preferred leader rule.
func (e *Elector) leading() map[string]int64 {
	if token := e.trust.Token(); token != 0 {
		return map[string]int64{e.cfg.Key: token}
	}
	return nil
}

// memberRow is this candidate's row in the members table now.
func (e *Elector) memberRow() []store.Member {
	role := members.RoleFollower
	switch {
	case e.cfg.Observer:
		role = members.RoleObserver
	case e.IsLeader():
		role = members.RoleLeader
	}
	e.mu.Lock()
	paused := e.paused
	e.mu.Unlock()
	return []store.Member{{Key: e.cfg.Key, ID: e.cfg.ID, Role: role, Paused: paused, Priority: int64(e.cfg.Priority)}}
}

// Members returns the candidates of this election seen within the last two leases by
// the database clock, ordered by ID: their role as each last recorded it, whether it
// is paused, its priority and how long ago it was last seen. Each running candidate
// records itself every half lease; one that stopped cleanly is gone, one that died
// drops out after two leases. It fails when the members table is missing (create
// it with `casleader migrate`) or the store keeps none.
func (e *Elector) Members(ctx context.Context) ([]store.Member, error) {
	ms, err := e.store.Members(ctx, e.cfg.Key, members.Window(e.cfg.LeaseDuration))
	if err != nil {
		return nil, fmt.Errorf("casleader: members of %q: %w", e.cfg.Key, err)
	}
	return ms, nil
}
