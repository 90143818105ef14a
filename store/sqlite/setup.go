package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// The methods below are the store's set-up, inspection and guard operations,
// written out (each delegates to the shared engine) so that they show in go doc and
// on pkg.go.dev: methods promoted from the unexported embedded engine do not. The
// election operations (Observe, Elect, Renew, …, and their batched forms) are
// promoted from the engine and documented on the interfaces they implement,
// [github.com/casleader/casleader.Store] and [github.com/casleader/casleader/group].

// CreateTable creates the election table and its members table if they are
// missing, and checks them. Every replica may call it at every start: concurrent
// calls all succeed, and on tables that exist and are right it needs no CREATE
// right (only a missing table does: then it says to run `casleader migrate` once
// as a user who may create tables).
func (s *Store) CreateTable(ctx context.Context) error { return s.core.CreateTable(ctx) }

// CreateMembersTable creates the members table ([Store.MembersTable]) if it is
// missing, with the same rules as [Store.CreateTable].
func (s *Store) CreateMembersTable(ctx context.Context) error {
	return s.core.CreateMembersTable(ctx)
}

// Check verifies, without writing, that the election table exists, has
// casleader's columns with types that hold what casleader writes and elect_key as
// its primary key, and that this user may read it. The store runs it once before
// its first statement; call it at start-up to fail early with what to fix.
func (s *Store) Check(ctx context.Context) error { return s.core.Check(ctx) }

// Guard verifies, inside the caller's transaction tx on the election database,
// that id still holds the lease of key in term token, unexpired by the database
// clock for lease, and holds that fact until tx ends: a write fenced by it cannot
// commit after a newer leader has won. Any error means: roll tx back.
func (s *Store) Guard(ctx context.Context, tx *sql.Tx, key, id string, token int64, lease time.Duration) error {
	return s.core.Guard(ctx, tx, key, id, token, lease)
}

// Wakeups returns the store's wake-ups (releases and handovers, by this process
// and by others): the electors and groups on the store subscribe by themselves.
func (s *Store) Wakeups() *notify.Wakeups { return s.core.Wakeups() }

// Dialect returns the store's SQL dialect.
func (s *Store) Dialect() schema.Dialect { return s.core.Dialect() }

// Table returns the election table's name.
func (s *Store) Table() string { return s.core.Table() }

// MembersTable returns the name of the members table: the election table's name
// and "_members" (see [schema.MembersTable]).
func (s *Store) MembersTable() string { return s.core.MembersTable() }

// Members returns the members of the election key seen within the last within by
// the database clock, ordered by ID.
func (s *Store) Members(ctx context.Context, key string, within time.Duration) ([]store.Member, error) {
	return s.core.Members(ctx, key, within)
}

// PruneMembers deletes the members rows not written for longer than olderThan by
// the database clock (candidates that died), and returns how many.
func (s *Store) PruneMembers(ctx context.Context, olderThan time.Duration) (int64, error) {
	return s.core.PruneMembers(ctx, olderThan)
}
