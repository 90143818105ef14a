package casleader

import (
	"context"
	"fmt"
	"sync"

	"github.com/casleader/casleader/internal/members"
	"github.com/casleader/casleader/store"
)

// startMembers starts recording this candidate in the members table, when the
// store has one (the SQL stores do), on a goroutine of its own: it never touches
// the election row and never delays the election. stop ends it and waits; on a
// clean stop (not KeepLeaseOnExit) it deletes the candidate's row.
func (e *Elector) startMembers(ctx context.Context) (stop func()) {
	ms, ok := optional[members.Store](e.store)
	if !ok {
		return func() {}
	}
	mctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		members.Run(mctx, members.Config{
			Store:    ms,
			ID:       e.cfg.ID,
			Lease:    e.cfg.LeaseDuration,
			Snapshot: e.memberRow,
			Keep:     func() bool { return e.cfg.KeepLeaseOnExit },
			Logger:   e.cfg.Logger.With("id", e.cfg.ID), // it logs the key where a line is about one
			Priority: int64(e.cfg.Priority),
			Leading:  e.leading,
			Handover: func(_ string, term int64, to string) {
				// Scoped to the term: ignored if it has ended meanwhile.
				e.post(request{handoverTo: to, term: term, cooldown: e.cfg.LeaseDuration})
			},
		})
	})
	return func() {
		cancel()
		wg.Wait()
	}
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
	role := store.RoleFollower
	switch {
	case e.cfg.Observer:
		role = store.RoleObserver
	case e.IsLeader():
		role = store.RoleLeader
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
// drops out after two leases. It fails when the store keeps no members table (the
// stores of store/mysql, store/postgres and store/sqlite do) or the table is missing
// (create it with `casleader migrate`).
func (e *Elector) Members(ctx context.Context) ([]store.Member, error) {
	r, ok := optional[members.Reader](e.store)
	if !ok {
		return nil, fmt.Errorf("%w: the store %T keeps no members table: use the store of store/mysql, store/postgres or store/sqlite", ErrInvalidConfig, e.store)
	}
	ms, err := r.Members(ctx, e.cfg.Key, members.Window(e.cfg.LeaseDuration))
	if err != nil {
		return nil, fmt.Errorf("casleader: members of %q: %w", e.cfg.Key, err)
	}
	return ms, nil
}

// optional returns st, or the first store it wraps (through Unwrap() Store, as a
// user's decorator may have), that implements T.
func optional[T any](st Store) (T, bool) {
	for range 16 { // a bound, should wrappers form a cycle
		if t, ok := st.(T); ok {
			return t, true
		}
		u, ok := st.(interface{ Unwrap() Store })
		if !ok {
			break
		}
		st = u.Unwrap()
	}
	var zero T
	return zero, false
}
