package store

import (
	"context"
	"time"
)

// Driver is the one contract between the election engine (casleader.New,
// casleader.NewGroup) and a store: every method the engine calls. The stores of packages
// store/mysql, store/postgres and store/sqlite implement it, and the conformance
// suite checks them against it. Nothing is discovered by a type assertion: a
// decorator that embeds a Driver and overrides some methods keeps every other
// feature (members, handover, wake-ups) of the store it wraps.
//
// It is one interface of many methods, where the house style prefers small ones
// declared by their users, on purpose: a store's optional capabilities used to be
// small interfaces found by type assertions, and a decorator that did not forward
// one lost it silently. Declared here, a missing method is a compile error.
//
// A lost compare-and-set is an outcome (false), never an error. Errors are
// classified with [ErrNotWritable], [ErrTransient], [ErrDeployment] and
// [ErrInvalidRow]; a write that returned [ErrTransient] may have committed. Every
// method is safe for concurrent use.
type Driver interface {
	// Observe reads the row of key. found is false, with a zero Record, when the
	// row does not exist. Record.Age is computed by the database clock in the same
	// statement.
	Observe(ctx context.Context, key string) (rec Record, found bool, err error)
	// Insert creates the row of key with cand as its leader, in a new term that it
	// returns (also the row's version), only if the row does not exist.
	Insert(ctx context.Context, key string, cand Candidate) (term int64, inserted bool, err error)
	// Elect makes cand the leader of key in a new term that it returns (also the
	// row's new version), only if the row is still at version and its lease is
	// released, expired by the database clock (for the lease the row records), or
	// handed over to cand.ID.
	Elect(ctx context.Context, key string, cand Candidate, version int64) (term int64, won bool, err error)
	// ElectReleased is Elect without a version: it wins only a row whose lease is
	// released, or handed over to cand.ID and not claimed yet, whatever its
	// version. A follower woken without a version (a MySQL named lock), or a
	// handover's target woken by its wake-up, elects with it in one round trip
	// instead of a read and Elect.
	ElectReleased(ctx context.Context, key string, cand Candidate) (term int64, won bool, err error)
	// Renew bumps the version of key's row and resets its age, only if the row is
	// still at version and held by id. It keeps the term.
	Renew(ctx context.Context, key, id string, version int64) (swapped bool, err error)
	// Release gives id's lease on key up (leader_id becomes empty, the term is
	// kept), only if the row is still at version and held by id, and wakes the
	// followers of key (see Subscribe).
	Release(ctx context.Context, key, id string, version int64) (swapped bool, err error)
	// Handover passes id's lease on key to candidate to.ID, in a new term that it
	// returns (also the row's new version), only if the row is still at version and
	// held by id, and wakes the followers of key, to first (see Subscribe). The
	// handed term keeps the row's lease (to.Lease is not written). When
	// to.Incarnation names the target's running process, the row records it and
	// that process leads the term from its next read, with no write; otherwise
	// the lease is handed and not claimed ([Record.Handed]) and the target claims
	// it with an election, which only one process with its ID can win.
	Handover(ctx context.Context, key, id string, version int64, to Candidate) (term int64, ok bool, err error)
	// RequestStepDown asks the leader of key to step down (and hand over to to,
	// when not empty), only if the row is still at version and has a leader. It
	// leaves the lease alone: the leader sees the request at its next renewal.
	RequestStepDown(ctx context.Context, key string, version int64, to string) (swapped bool, err error)

	// ObserveMany reads the rows of keys in one call (at most [MaxBatch]); keys
	// without a row are absent from the map.
	ObserveMany(ctx context.Context, keys []string) (map[string]Record, error)
	// InsertMany is Insert for each of keys, in one call; it returns the keys
	// inserted with their terms.
	InsertMany(ctx context.Context, cand Candidate, keys []string) ([]Won, error)
	// ElectMany is Elect for each key and version of from, in one call; it returns
	// the keys won with their terms.
	ElectMany(ctx context.Context, cand Candidate, from []KeyVersion) ([]Won, error)
	// RenewMany is Renew for each key and version of held, in one call; it returns
	// the keys renewed (Won.Term is 0).
	RenewMany(ctx context.Context, id string, held []KeyVersion) ([]Won, error)
	// ReleaseMany is Release for each key and version of held, in one call; it
	// returns the keys released (Won.Term is 0) and wakes their followers.
	ReleaseMany(ctx context.Context, id string, held []KeyVersion) ([]Won, error)
	// HandoverMany is Handover to to for each key and version of held, in one
	// call; it returns the keys handed over with their new terms.
	HandoverMany(ctx context.Context, id string, to Candidate, held []KeyVersion) ([]Won, error)

	// Guard verifies inside the caller's transaction tx, with a shared lock on the
	// row of key held until tx ends, that id holds the lease of key in term token,
	// unexpired by the database clock for lease. It returns nil if so, an error
	// matching [ErrFenced] if not, and a classified database error if the check
	// could not be made; in every case but nil the caller rolls tx back. tx is a
	// *sql.Tx on the election database (a PostgreSQL store on a pgx pool also takes
	// a pgx.Tx); a store without a database returns an error for every tx.
	Guard(ctx context.Context, tx any, key, id string, token int64, lease time.Duration) error

	// PutMembers writes the rows of ms to the members table (a view for
	// operators and the preferred-leader rule; no election reads it), stamped with
	// the database clock.
	PutMembers(ctx context.Context, ms []Member) error
	// DeleteMembers deletes the members rows of candidate id for keys.
	DeleteMembers(ctx context.Context, id string, keys []string) error
	// PruneMembers deletes the members rows not written for longer than olderThan
	// by the database clock, and returns how many.
	PruneMembers(ctx context.Context, olderThan time.Duration) (int64, error)
	// Members returns the members of key seen within the last within by the
	// database clock, ordered by ID.
	Members(ctx context.Context, key string, within time.Duration) ([]Member, error)
	// MembersOf is Members for many keys in one call, ordered by key and ID.
	MembersOf(ctx context.Context, keys []string, within time.Duration) ([]Member, error)

	// Subscribe calls wake whenever the lease of key may have been given up, until
	// unsubscribe is called: with the row version at which it was released, 0 when
	// that is not known, -1 for a handover to candidate id (or to an unknown
	// target), -2 for a handover to another candidate than id (id "" never gets
	// -2). The store's own releases and handovers wake the subscribers in this
	// process at once; a store that can also carries those of other processes
	// (LISTEN/NOTIFY, named locks, a watched file), through one listener that runs
	// while anybody subscribes. Wake-ups are a speed-up: they may be spurious,
	// stale or lost. A store without any returns a no-op unsubscribe. wake must
	// not block.
	Subscribe(key, id string, wake func(version int64)) (unsubscribe func())
	// Observed is told of every row of key a follower reads, for a listener that
	// waits per term (MySQL's named locks). It must not block.
	Observed(key string, rec Record)
	// Leading is told when this process starts leading key in term token (true),
	// and when that term has ended (false): after the release or handover write
	// returned, or when the lease was lost. It must not block.
	Leading(key string, token int64, leading bool)

	// CreateTable creates the election table (and the members table) if missing,
	// and checks them. Every replica may call it at every start: concurrent calls
	// all succeed, and on tables that exist and are right it needs no right to
	// create tables.
	CreateTable(ctx context.Context) error
	// Check verifies, writing nothing, that the election table exists with
	// casleader's columns and that the store's user may read it.
	Check(ctx context.Context) error
}
