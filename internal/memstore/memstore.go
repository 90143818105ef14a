// Package memstore is an in-memory election store for the library's unit tests: of
// the election logic, and of code that runs while leading, under testing/synctest
// and with faults injected. It has the methods and semantics of package store's SQL
// stores and passes the same conformance suite (internal/storetest), which is why it
// can be trusted.
//
// Its "database clock" is [time.Now], so inside a testing/synctest bubble leases
// expire in the bubble's fake time. Ages are computed from the stored tick_time at
// microsecond resolution, as the SQL stores do.
//
// Fault hooks ([Faults], which a decorator of a real store can use too) make the
// store misbehave the way a database or network does: [Faults.FailNext] (an error
// before the table is touched), [Faults.CommitThenFail] (the write commits, its
// reply is lost), [Faults.Fail] (every call fails until cleared) and
// [Faults.SetDelay] (a slow round trip that honours the context). [Store.Put]
// writes an arbitrary row, for instance an older version after a failover that
// lost writes.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// Operation names for the fault hooks. They are the operation names that the SQL
// stores put in their error messages.
const (
	OpObserve         = "observe"
	OpInsert          = "insert"
	OpElect           = "elect"
	OpElectReleased   = "elect released"
	OpRenew           = "renew"
	OpRelease         = "release"
	OpHandover        = "handover"
	OpRequestStepDown = "request step-down"
	OpCheck           = "check"
	OpCreateTable     = "create table"
	// AnyOp makes a hook apply to every operation.
	AnyOp = "*"
)

// Store is an in-memory election table. The zero value is not usable: call [New] or
// [NewWithoutTable]. All methods are safe for concurrent use.
type Store struct {
	*table
	skew time.Duration // this node's clock minus the true time (see Node)
}

// table is the state that every [Store.Node] of one store shares.
type table struct {
	name string

	Faults // the fault hooks, shared by every node

	mu      sync.Mutex
	created bool
	rows    map[string]*row
	members map[[2]string]member // by key and ID
	nodes   bool                 // Node was called: a multi-primary cluster, whose reads are not OneClock
}

type row struct {
	version, term    int64
	leader, handover string
	stepdown         bool
	tick             time.Time
	lease            time.Duration // the lease the row records (0: none)
	incarnation      string
	null             string // a column that Corrupt set to NULL
}

// elected is the row that an election of cand at now leaves in term.
func elected(cand store.Candidate, term int64, now time.Time) *row {
	return &row{version: term, term: term, leader: cand.ID, incarnation: cand.Incarnation, lease: cand.Lease.Truncate(time.Microsecond), tick: now}
}

// handedOver is the row that a handover of r to to at now leaves in term: led by
// to's incarnation when it is named, else handed and not claimed. The lease is
// kept.
func handedOver(r *row, to store.Candidate, term int64, now time.Time) *row {
	h := &row{version: term, term: term, leader: to.ID, incarnation: to.Incarnation, lease: r.lease, tick: now}
	if to.Incarnation == "" {
		h.handover = to.ID
	}
	return h
}

// takeable reports whether an election of cand at now takes r, as the SQL stores
// judge it: a released lease, a lease expired by the lease the row records (or
// cand's, when it records none), or a lease handed to cand and not yet claimed.
func takeable(r *row, cand store.Candidate, now time.Time) bool {
	if r.leader == "" && r.null != "leader_id" { // NULL = '' is not true in SQL
		return true
	}
	lease := cand.Lease
	if r.lease > 0 {
		lease = r.lease
	}
	if now.Sub(r.tick).Microseconds() >= lease.Microseconds() {
		return true
	}
	return handedTo(r, cand.ID)
}

// handedTo reports whether r's lease was handed over to id and not claimed yet
// (store.Record.Handed, naming id).
func handedTo(r *row, id string) bool {
	return r.leader == id && r.handover == id && !r.stepdown
}

// New returns a store whose table exists and is empty.
func New() *Store {
	s := NewWithoutTable(schema.DefaultTable)
	s.created = true
	return s
}

// errNoTable is what the in-memory "database" says about a table not created yet.
var errNoTable = errors.New("memstore: no such table")

// NewWithoutTable returns a store on a table that does not exist yet: every call
// but CreateTable fails with [store.ErrDeployment], like a database where nobody ran
// `casleader migrate`.
func NewWithoutTable(name string) *Store {
	return &Store{table: &table{
		name:    name,
		rows:    map[string]*row{},
		members: map[[2]string]member{},
	}}
}

// Node returns another server of the same table whose clock runs skew ahead of s's
// (behind, when negative), as the nodes of a multi-primary cluster (Galera) may:
// its writes stamp tick_time with its own clock and its reads and elections judge
// ages by it. Rows, faults and counters are shared with s.
func (s *Store) Node(skew time.Duration) *Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes = true
	return &Store{table: s.table, skew: s.skew + skew}
}

// now is this node's database clock.
func (s *Store) now() time.Time { return time.Now().Add(s.skew) }

// Table returns the table's name.
func (s *Store) Table() string { return s.name }

// Put writes rec as the row of rec.Key, whatever the row held, with a tick_time
// rec.Age before now. It bypasses every check: use it to set up rows that no
// compare-and-set would produce, such as an older version after a failover.
func (s *Store) Put(rec store.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[rec.Key] = &row{
		version:  rec.Version,
		term:     rec.Term,
		leader:   rec.LeaderID,
		handover: rec.HandoverTo,
		stepdown: rec.StepDown,
		tick:     s.now().Add(-rec.Age),

		lease:       rec.Lease,
		incarnation: rec.Incarnation,
	}
}

// Corrupt overwrites the row of key with a value casleader never writes: "null_leader"
// (leader_id NULL), "future_tick" (tick_time an hour after now), "negative_version"
// (version -1), "rolled_back" (version and term 1, tick_time an hour ago),
// "far_future_tick" (tick_time in the year 3000), "top_version" (version and term at
// the BIGINT maximum), "near_version_limit" (version and term
// [rules.VersionLimit]-2) or "skewed_tick" (tick_time two seconds after now, as a
// server whose clock runs ahead writes it), the corruptions of store/storetest.
func (s *Store) Corrupt(key, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[key]
	if !ok {
		return fmt.Errorf("memstore: corrupt %q: no such row", key)
	}
	switch what {
	case "null_leader":
		r.leader, r.null = "", "leader_id"
	case "future_tick":
		r.tick = time.Now().Add(time.Hour)
	case "negative_version":
		r.version = -1
	case "rolled_back":
		r.version, r.term, r.tick = 1, 1, time.Now().Add(-time.Hour)
	case "far_future_tick":
		r.tick = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	case "skewed_tick":
		r.tick = s.now().Add(2 * time.Second)
	case "top_version":
		r.version, r.term = 1<<63-1, 1<<63-1
	case "near_version_limit":
		r.version, r.term = rules.VersionLimit-2, rules.VersionLimit-2
	default:
		return fmt.Errorf("memstore: unknown corruption %q", what)
	}
	return nil
}

// Observe reads the row of key and the clock. found is false when the row does not exist.
func (s *Store) Observe(ctx context.Context, key string) (rec store.Record, found bool, err error) {
	if err := validateNames(key); err != nil {
		return store.Record{}, false, err
	}
	err = s.do(ctx, OpObserve, key, func(now time.Time) (bool, error) {
		r, ok := s.rows[key]
		if !ok {
			return false, nil
		}
		rec, err = r.record(key, now)
		rec.OneClock = !s.nodes
		if err != nil {
			return false, fmt.Errorf("observe %s %q: %w", s.name, key, err)
		}
		found = true
		return false, nil
	})
	if err != nil {
		return store.Record{}, false, err
	}
	return rec, found, nil
}

// Insert creates the row of key with id as its first leader and returns its term
// (see [Store.Elect]). It never overwrites: inserted is false when the row exists.
func (s *Store) Insert(ctx context.Context, key string, cand store.Candidate) (term int64, inserted bool, err error) {
	if err := validCandidate(key, cand); err != nil {
		return 0, false, err
	}
	return s.writeTerm(ctx, OpInsert, key, func(now time.Time) int64 {
		if _, ok := s.rows[key]; ok {
			return 0
		}
		term := newTerm(0, now)
		s.rows[key] = elected(cand, term, now)
		return term
	})
}

// Elect makes cand the leader of key if the row is at version and cand may take it
// (see takeable). Version and term become the new term: the greater of version+1
// and the clock in microseconds since the Unix epoch.
func (s *Store) Elect(ctx context.Context, key string, cand store.Candidate, version int64) (term int64, won bool, err error) {
	if err := validCandidate(key, cand); err != nil {
		return 0, false, err
	}
	if err := s.checkVersion(OpElect, key, version); err != nil {
		return 0, false, err
	}
	return s.writeTerm(ctx, OpElect, key, func(now time.Time) int64 {
		r := s.rows[key]
		if r == nil || r.version != version || !takeable(r, cand, now) {
			return 0
		}
		term := newTerm(version, now)
		s.rows[key] = elected(cand, term, now)
		return term
	})
}

// ElectReleased makes id the leader of key if its lease is released, or handed over
// to cand.ID and not claimed yet, whatever the row's version (as the SQL stores'
// ElectReleased: a row with an invalid version is not won). Version and term
// become the new term, which it returns.
func (s *Store) ElectReleased(ctx context.Context, key string, cand store.Candidate) (term int64, won bool, err error) {
	if err := validCandidate(key, cand); err != nil {
		return 0, false, err
	}
	return s.writeTerm(ctx, OpElectReleased, key, func(now time.Time) int64 {
		r := s.rows[key]
		if r == nil || (r.leader != "" && !handedTo(r, cand.ID)) || r.null == "leader_id" || r.version < 1 || rules.CheckVersion(r.version) != nil {
			return 0
		}
		term := newTerm(r.version, now)
		s.rows[key] = elected(cand, term, now)
		return term
	})
}

// newTerm is the term that a write from version starts at now, as the SQL stores
// compute it.
func newTerm(version int64, now time.Time) int64 {
	return max(version+1, now.UnixMicro())
}

// Renew sets the tick_time of key to now and its version to version+1, if the row
// is at version and held by id.
func (s *Store) Renew(ctx context.Context, key, id string, version int64) (swapped bool, err error) {
	if err := validateNames(key, id); err != nil {
		return false, err
	}
	if err := s.checkVersion(OpRenew, key, version); err != nil {
		return false, err
	}
	return s.write(ctx, OpRenew, key, func(now time.Time) bool {
		r := s.held(key, id, version)
		if r == nil {
			return false
		}
		r.version, r.tick = version+1, now
		return true
	})
}

// Release gives up id's lease on key, if the row is at version and held by id. The
// term is kept.
func (s *Store) Release(ctx context.Context, key, id string, version int64) (swapped bool, err error) {
	if err := validateNames(key, id); err != nil {
		return false, err
	}
	if err := s.checkVersion(OpRelease, key, version); err != nil {
		return false, err
	}
	return s.write(ctx, OpRelease, key, func(now time.Time) bool {
		r := s.held(key, id, version)
		if r == nil {
			return false
		}
		*r = row{version: version + 1, term: r.term, lease: r.lease, tick: now}
		return true
	})
}

// Handover passes id's lease on key to to, with a fresh tick_time and a new term
// (as [Store.Elect] chooses it), if the row is at version and held by id: to
// to's incarnation when it is named, else handed and not claimed (see
// store.Driver.Handover).
func (s *Store) Handover(ctx context.Context, key, id string, version int64, to store.Candidate) (term int64, ok bool, err error) {
	if err := validateNames(key, id); err != nil {
		return 0, false, err
	}
	if err := validateTarget(to); err != nil {
		return 0, false, err
	}
	if err := s.checkVersion(OpHandover, key, version); err != nil {
		return 0, false, err
	}
	return s.writeTerm(ctx, OpHandover, key, func(now time.Time) int64 {
		r := s.held(key, id, version)
		if r == nil {
			return 0
		}
		term := newTerm(version, now)
		s.rows[key] = handedOver(r, to, term, now)
		return term
	})
}

// RequestStepDown asks the leader of key to step down (handing over to to, when not
// empty), if the row is at version and has a leader. Lease, leader and term stay.
func (s *Store) RequestStepDown(ctx context.Context, key string, version int64, to string) (swapped bool, err error) {
	if err := validateNames(key); err != nil {
		return false, err
	}
	if to != "" {
		if err := validateName("handover target", to); err != nil {
			return false, err
		}
	}
	if err := s.checkVersion(OpRequestStepDown, key, version); err != nil {
		return false, err
	}
	return s.write(ctx, OpRequestStepDown, key, func(time.Time) bool {
		r := s.rows[key]
		if r == nil || r.version != version || r.leader == "" {
			return false
		}
		r.version, r.handover, r.stepdown = version+1, to, true
		return true
	})
}

// Check reports a missing table like the SQL stores do. It writes nothing.
func (s *Store) Check(ctx context.Context) error {
	return s.do(ctx, OpCheck, "", func(time.Time) (bool, error) { return false, nil })
}

// CreateTable creates the table if it does not exist. It is idempotent.
func (s *Store) CreateTable(ctx context.Context) error {
	return s.do(ctx, OpCreateTable, "", func(time.Time) (bool, error) { return false, nil })
}

// held returns the row of key if it is at version and held by id, or nil.
// The caller holds s.mu.
func (s *Store) held(key, id string, version int64) *row {
	r := s.rows[key]
	if r == nil || r.version != version || r.leader != id {
		return nil
	}
	return r
}

// writeTerm runs a write that starts a term through do; apply returns the term, or
// 0 when the write lost.
func (s *Store) writeTerm(ctx context.Context, op, key string, apply func(now time.Time) int64) (int64, bool, error) {
	var term int64
	err := s.do(ctx, op, key, func(now time.Time) (bool, error) {
		term = apply(now)
		return term != 0, nil
	})
	if err != nil {
		return 0, false, err
	}
	return term, term != 0, nil
}

// write runs a compare-and-set through do.
func (s *Store) write(ctx context.Context, op, key string, apply func(now time.Time) bool) (bool, error) {
	var swapped bool
	err := s.do(ctx, op, key, func(now time.Time) (bool, error) {
		swapped = apply(now)
		return swapped, nil
	})
	if err != nil {
		return false, err
	}
	return swapped, nil
}

// do runs one round trip of op: the call is counted, delayed and failed as the hooks
// say, then apply runs under the lock with the clock's time. apply's error is
// returned as it is; the hooks' errors are wrapped with the operation, table and key.
func (s *Store) do(ctx context.Context, op, key string, apply func(now time.Time) (bool, error)) error {
	now, after := s.Before(ctx, op)
	if now != nil {
		return s.wrap(op, key, now)
	}
	s.mu.Lock()
	if op == OpCreateTable {
		s.created = true
	}
	if !s.created {
		s.mu.Unlock()
		return &store.MissingTableError{Table: s.name, Dialect: "memstore", Op: op, Key: key, Err: errNoTable}
	}
	_, err := apply(s.now())
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if after != nil {
		return s.wrap(op, key, after)
	}
	return nil
}

func (s *Store) wrap(op, key string, err error) error {
	return fmt.Errorf("%s %s %q: %w", op, s.name, key, err)
}

// record decodes r like the SQL stores decode a row, rejecting values casleader
// never writes.
func (r *row) record(key string, now time.Time) (store.Record, error) {
	if r.null != "" {
		return store.Record{}, fmt.Errorf("%w: column %s is NULL: fix or delete the row", store.ErrInvalidRow, r.null)
	}
	if r.version < 1 {
		return store.Record{}, fmt.Errorf("%w: version %d is not positive: fix or delete the row", store.ErrInvalidRow, r.version)
	}
	if r.version >= rules.VersionLimit {
		return store.Record{}, rules.CheckVersion(r.version) // past the limit: an error
	}
	if r.term < 0 || r.term > r.version {
		return store.Record{}, fmt.Errorf("%w: term %d is outside 0..version (%d): fix or delete the row", store.ErrInvalidRow, r.term, r.version)
	}
	age := time.Duration(now.Sub(r.tick).Microseconds()) * time.Microsecond
	if age < -rules.FutureTolerance {
		return store.Record{}, fmt.Errorf("%w: tick_time is %v in the future of the database clock (clock stepped back, or the row was written by another server): fix the row or wait", store.ErrInvalidRow, -age)
	}
	return store.Record{
		Key:        key,
		Version:    r.version,
		LeaderID:   r.leader,
		Term:       r.term,
		Age:        max(age, 0),
		Ahead:      max(-age, 0),
		HandoverTo: r.handover,
		StepDown:   r.stepdown,

		Lease:       r.lease,
		Incarnation: r.incarnation,
	}, nil
}

// validCandidate checks the key and the candidate of an election write, as the SQL
// stores do.
func validCandidate(key string, cand store.Candidate) error {
	if err := validateNames(key, cand.ID); err != nil {
		return err
	}
	return rules.ValidateCandidate(cand)
}

// checkVersion is package store's version limit, with the SQL stores' message.
func (s *Store) checkVersion(op, key string, version int64) error {
	if err := rules.CheckVersion(version); err != nil {
		return fmt.Errorf("%s %s %q: %w", op, s.name, key, err)
	}
	return nil
}

// validateName and validateNames are package store's argument checks.
func validateName(what, s string) error { return rules.ValidateName(what, s) }

func validateNames(key string, ids ...string) error { return rules.ValidateNames(key, ids...) }

func validateTarget(to store.Candidate) error { return rules.ValidateTarget(to) }
