package sqlite

import (
	"context"
	"time"

	"github.com/casleader/casleader/store"
)

// The methods below are those of [store.Driver], which casleader.New and
// casleader.NewGroup take; each delegates to the engine that the dialect stores share.

var _ store.Driver = (*Store)(nil)

// Observe reads the row of key; found is false when it does not exist. The age
// is computed by the database clock in the same statement.
func (s *Store) Observe(ctx context.Context, key string) (rec store.Record, found bool, err error) {
	return s.core.Observe(ctx, key)
}

// Insert creates the row of key with cand as its leader, in a new term that it
// returns, only if the row does not exist.
func (s *Store) Insert(ctx context.Context, key string, cand store.Candidate) (term int64, inserted bool, err error) {
	return s.core.Insert(ctx, key, cand)
}

// Elect makes cand the leader of key in a new term that it returns, only if the
// row is at version and its lease is released, expired by the database clock or
// handed over to cand.ID.
func (s *Store) Elect(ctx context.Context, key string, cand store.Candidate, version int64) (term int64, won bool, err error) {
	return s.core.Elect(ctx, key, cand, version)
}

// ElectReleased makes cand the leader of key in a new term that it returns, only
// if the row's lease is released, or handed over to cand.ID and not claimed yet,
// whatever its version.
func (s *Store) ElectReleased(ctx context.Context, key string, cand store.Candidate) (term int64, won bool, err error) {
	return s.core.ElectReleased(ctx, key, cand)
}

// Renew bumps the version of key's row and resets its age, only if the row is at
// version and held by id.
func (s *Store) Renew(ctx context.Context, key, id string, version int64) (swapped bool, err error) {
	return s.core.Renew(ctx, key, id, version)
}

// Release gives id's lease on key up, only if the row is at version and held by
// id, and wakes the followers of key.
func (s *Store) Release(ctx context.Context, key, id string, version int64) (swapped bool, err error) {
	return s.core.Release(ctx, key, id, version)
}

// Handover passes id's lease on key to candidate to in a new term that it
// returns, only if the row is at version and held by id, and wakes the followers
// of key.
func (s *Store) Handover(ctx context.Context, key, id string, version int64, to store.Candidate) (term int64, ok bool, err error) {
	return s.core.Handover(ctx, key, id, version, to)
}

// RequestStepDown asks the leader of key to step down (and hand over to to, when
// not empty), only if the row is at version and has a leader.
func (s *Store) RequestStepDown(ctx context.Context, key string, version int64, to string) (swapped bool, err error) {
	return s.core.RequestStepDown(ctx, key, version, to)
}

// ObserveMany reads the rows of keys in one statement; keys without a row are
// absent from the map.
func (s *Store) ObserveMany(ctx context.Context, keys []string) (map[string]store.Record, error) {
	return s.core.ObserveMany(ctx, keys)
}

// InsertMany is [Store.Insert] for each of keys, in one statement.
func (s *Store) InsertMany(ctx context.Context, cand store.Candidate, keys []string) ([]store.Won, error) {
	return s.core.InsertMany(ctx, cand, keys)
}

// ElectMany is [Store.Elect] for each key and version of from, in one statement.
func (s *Store) ElectMany(ctx context.Context, cand store.Candidate, from []store.KeyVersion) ([]store.Won, error) {
	return s.core.ElectMany(ctx, cand, from)
}

// RenewMany is [Store.Renew] for each key and version of held, in one statement.
func (s *Store) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	return s.core.RenewMany(ctx, id, held)
}

// ReleaseMany is [Store.Release] for each key and version of held, in one
// statement.
func (s *Store) ReleaseMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	return s.core.ReleaseMany(ctx, id, held)
}

// HandoverMany is [Store.Handover] to to for each key and version of held, in one
// statement.
func (s *Store) HandoverMany(ctx context.Context, id string, to store.Candidate, held []store.KeyVersion) ([]store.Won, error) {
	return s.core.HandoverMany(ctx, id, to, held)
}

// Guard verifies, inside the caller's transaction tx on the election database,
// that id still holds the lease of key in term token, unexpired by the database
// clock for lease, and holds that fact until tx ends: a write fenced by it cannot
// commit after a newer leader has won. Any error means: roll tx back. tx is a
// *sql.Tx, or
// another type is refused. Most callers use casleader.Elector.Guard or the term's
// Guard instead.
func (s *Store) Guard(ctx context.Context, tx any, key, id string, token int64, lease time.Duration) error {
	return s.core.Guard(ctx, tx, key, id, token, lease)
}

// PutMembers writes the rows of ms to the members table, stamped with the
// database clock.
func (s *Store) PutMembers(ctx context.Context, ms []store.Member) error {
	return s.core.PutMembers(ctx, ms)
}

// DeleteMembers deletes the members rows of candidate id for keys.
func (s *Store) DeleteMembers(ctx context.Context, id string, keys []string) error {
	return s.core.DeleteMembers(ctx, id, keys)
}

// PruneMembers deletes the members rows not written for longer than olderThan by
// the database clock (candidates that died), and returns how many.
func (s *Store) PruneMembers(ctx context.Context, olderThan time.Duration) (int64, error) {
	return s.core.PruneMembers(ctx, olderThan)
}

// Members returns the members of the election key seen within the last within by
// the database clock, ordered by ID.
func (s *Store) Members(ctx context.Context, key string, within time.Duration) ([]store.Member, error) {
	return s.core.Members(ctx, key, within)
}

// MembersOf is [Store.Members] for many keys in one statement.
func (s *Store) MembersOf(ctx context.Context, keys []string, within time.Duration) ([]store.Member, error) {
	return s.core.MembersOf(ctx, keys, within)
}

// Subscribe calls wake whenever the lease of key may have been given up (see
// [store.Driver]), until unsubscribe is called. This store's own releases and
// handovers wake the subscribers in this process at once; those of other
// processes reach them through the store's listener, which runs while anybody
// subscribes.
func (s *Store) Subscribe(key, id string, wake func(version int64)) (unsubscribe func()) {
	return s.core.Subscribe(key, id, wake)
}

// Observed is told of every row of key a follower reads.
func (s *Store) Observed(key string, rec store.Record) { s.core.Observed(key, rec) }

// Leading is told when this process starts (true) and ends (false) leading key in
// term token.
func (s *Store) Leading(key string, token int64, leading bool) { s.core.Leading(key, token, leading) }

// CreateTable creates the election table and its members table if they are
// missing, and checks them. Every replica may call it at every start: concurrent
// calls all succeed, and on tables that exist and are right it needs no CREATE
// right (only a missing table does: then it says to run `casleader migrate` once
// as a user who may create tables).
func (s *Store) CreateTable(ctx context.Context) error { return s.core.CreateTable(ctx) }

// Check verifies, without writing, that the election table exists, has
// casleader's columns with types that hold what casleader writes and elect_key as
// its primary key, and that this user may read it. The store runs it once before
// its first statement; call it at start-up to fail early with what to fix.
func (s *Store) Check(ctx context.Context) error { return s.core.Check(ctx) }
