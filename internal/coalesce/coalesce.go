// Package coalesce lets the single-key electors of one process that run on one
// store share its statements: their renewals, reads, releases, handovers and
// members rows go out as the store's batched statements (one statement for up
// to store.MaxBatch keys), as a group's would, instead of one statement per
// elector. Each call keeps its own outcome: a batched compare-and-set is one
// compare-and-set per key (the conformance suite checks both forms alike), a
// batch never holds a key twice, and a caller whose context ends stops waiting
// (its write may still commit, as any write cancelled in flight).
//
// A call goes out at once while its queue is quiet: a lone elector sends the
// same single-key statements, with the same latency, as without this package.
// Under load a queue sends one batch per wait on average (a burst of four at
// once), and a call waits at most its handle's wait, which the elector derives
// from its heartbeat, so that a queued renewal costs a small, bounded part of
// the trust it is renewing (trust counts from before the wait). Elections are not
// shared (each carries its candidate's own incarnation): they go one statement
// each, a few at a time per store, so that electors starting together queue in
// the process rather than on the database's locks.
package coalesce

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casleader/casleader/store"
)

// Store is one elector's handle on a shared store: a store.Driver that sends
// its single-key calls through the queues of every handle on the same store
// that has joined ([Store.Join]), and straight to the store otherwise.
type Store struct {
	store.Driver
	wait        time.Duration // the longest an election call waits to join a batch
	membersWait time.Duration // the longest a members call waits
	hub         atomic.Pointer[hub]
}

// New returns a handle on st whose election calls wait at most wait to join a
// batch, and its members calls (written once a lease) at most membersWait.
func New(st store.Driver, wait, membersWait time.Duration) *Store {
	return &Store{Driver: st, wait: max(wait, time.Millisecond), membersWait: max(membersWait, time.Millisecond)}
}

var registry struct {
	mu   sync.Mutex
	hubs map[store.Driver]*hub
}

// Join shares s's calls with those of the other handles on the same store until
// leave is called. A store whose value cannot be compared (a struct holding a
// slice, say) is not shared: its calls go straight to it.
func (s *Store) Join() (leave func()) {
	h := acquire(s.Driver)
	if h == nil {
		return func() {}
	}
	s.hub.Store(h)
	return func() {
		s.hub.Store(nil)
		registry.mu.Lock()
		defer registry.mu.Unlock()
		if h.refs--; h.refs == 0 {
			delete(registry.hubs, h.st)
		}
	}
}

// acquire returns the hub of st with one more reference, or nil when st cannot
// be a map key: its type is not comparable, or holds a value that is not (a
// struct whose interface field holds a slice panics when hashed).
func acquire(st store.Driver) (h *hub) {
	if !reflect.TypeOf(st).Comparable() {
		return nil
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	defer func() {
		if recover() != nil {
			h = nil
		}
	}()
	if registry.hubs == nil {
		registry.hubs = map[store.Driver]*hub{}
	}
	h = registry.hubs[st]
	if h == nil {
		h = newHub(st)
		registry.hubs[st] = h
	}
	h.refs++
	return h
}

// hub holds the queues of one shared store, one per statement shape.
type hub struct {
	st     store.Driver
	refs   int // handles joined, under registry.mu
	mu     sync.Mutex
	queue  map[shape]*queue
	pruned map[time.Duration]time.Time // the last prune sent, by age
	elect  chan struct{}               // a slot per election in flight (electSlots)
}

// electSlots is how many elections (one statement each: they are not shared) the
// handles of one store send at once. The others wait their turn, in order, under
// their own deadline: when a thousand electors start together, their inserts queue
// here rather than as a thousand writers on the database (SQLite's one write lock
// let a few through a second), and the batched renewals of those already leading
// keep their place.
const electSlots = 4

// shape names the statement a queue sends: its op and what every call of the
// batch must share.
type shape struct {
	op, id string
	to     store.Candidate
	d      time.Duration
}

func newHub(st store.Driver) *hub {
	return &hub{st: st, queue: map[shape]*queue{}, pruned: map[time.Duration]time.Time{}, elect: make(chan struct{}, electSlots)}
}

// get returns h's queue of shape k, made with one and many the first time.
func get(h *hub, k shape, wait time.Duration, one func(context.Context, any) (any, error), many func(context.Context, []any, []any, []error)) *queue {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queue[k]
	if q == nil {
		q = newQueue(wait, one, many)
		h.queue[k] = q
	}
	return q
}

// fanOut gives every call of a batch the same error.
func fanOut(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}

// keyVersions returns the inputs of a batch of compare-and-sets.
func keyVersions(ins []any) []store.KeyVersion {
	kvs := make([]store.KeyVersion, len(ins))
	for i, in := range ins {
		kvs[i] = in.(store.KeyVersion)
	}
	return kvs
}

// strs returns the inputs of a batch of keys.
func strs(ins []any) []string {
	keys := make([]string, len(ins))
	for i, in := range ins {
		keys[i] = in.(string)
	}
	return keys
}

// unique returns keys without repeats, in their order.
func unique(keys []string) []string {
	seen := make(map[string]bool, len(keys))
	return slices.DeleteFunc(keys, func(k string) bool {
		dup := seen[k]
		seen[k] = true
		return dup
	})
}

// wonOf sets each output of a batch of compare-and-sets on held: a termWon for
// each key of held, ok when the key is in won.
func wonOf(held []store.KeyVersion, won []store.Won, outs []any) {
	terms := make(map[string]int64, len(won))
	for _, w := range won {
		terms[w.Key] = w.Term
	}
	for i, kv := range held {
		t, ok := terms[kv.Key]
		outs[i] = termWon{t, ok}
	}
}

// termWon is the outcome of a compare-and-set; term is 0 for those that keep it.
type termWon struct {
	term int64
	ok   bool
}

// cas sends one compare-and-set of the key and version through the queue of
// shape k: single with one, batched with many.
func (s *Store) cas(ctx context.Context, h *hub, k shape, kv store.KeyVersion,
	one func(context.Context, store.KeyVersion) (int64, bool, error),
	many func(context.Context, []store.KeyVersion) ([]store.Won, error)) (int64, bool, error) {
	q := get(h, k, s.wait,
		func(ctx context.Context, in any) (any, error) {
			term, ok, err := one(ctx, in.(store.KeyVersion))
			return termWon{term, ok}, err
		},
		func(ctx context.Context, ins []any, outs []any, errs []error) {
			held := keyVersions(ins)
			won, err := many(ctx, held)
			fanOut(errs, err)
			wonOf(held, won, outs)
		})
	out, err := q.do(ctx, kv.Key, kv, s.wait)
	tw, _ := out.(termWon)
	return tw.term, tw.ok, err
}

// Insert is store.Driver.Insert, sent when one of the store's election slots is free.
func (s *Store) Insert(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	return s.election(ctx, func() (int64, bool, error) { return s.Driver.Insert(ctx, key, cand) })
}

// Elect is store.Driver.Elect, sent when one of the store's election slots is free.
func (s *Store) Elect(ctx context.Context, key string, cand store.Candidate, version int64) (int64, bool, error) {
	return s.election(ctx, func() (int64, bool, error) { return s.Driver.Elect(ctx, key, cand, version) })
}

// ElectReleased is store.Driver.ElectReleased, sent when one of the store's
// election slots is free.
func (s *Store) ElectReleased(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	return s.election(ctx, func() (int64, bool, error) { return s.Driver.ElectReleased(ctx, key, cand) })
}

// election sends send in one of the hub's election slots, or at once when s has
// not joined; when ctx ends first it is not sent.
func (s *Store) election(ctx context.Context, send func() (int64, bool, error)) (int64, bool, error) {
	h := s.hub.Load()
	if h == nil {
		return send()
	}
	select {
	case h.elect <- struct{}{}:
	case <-ctx.Done():
		return 0, false, fmt.Errorf("%w: %w", store.ErrTransient, ctx.Err())
	}
	defer func() { <-h.elect }()
	return send()
}

// Renew is store.Driver.Renew, sent in a batch with the renewals of the other
// handles for the same ID.
func (s *Store) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	return s.keep(ctx, "renew", key, id, version, store.Driver.Renew, store.Driver.RenewMany)
}

// Release is store.Driver.Release, sent in a batch with the releases of the
// other handles for the same ID.
func (s *Store) Release(ctx context.Context, key, id string, version int64) (bool, error) {
	return s.keep(ctx, "release", key, id, version, store.Driver.Release, store.Driver.ReleaseMany)
}

// keep sends a compare-and-set of id's lease on key that keeps its term (op,
// one and many: a renewal or a release), in a batch with the other handles'.
func (s *Store) keep(ctx context.Context, op, key, id string, version int64,
	one func(store.Driver, context.Context, string, string, int64) (bool, error),
	many func(store.Driver, context.Context, string, []store.KeyVersion) ([]store.Won, error)) (bool, error) {
	h := s.hub.Load()
	if h == nil {
		return one(s.Driver, ctx, key, id, version)
	}
	_, ok, err := s.cas(ctx, h, shape{op: op, id: id}, store.KeyVersion{Key: key, Version: version},
		func(ctx context.Context, kv store.KeyVersion) (int64, bool, error) {
			ok, err := one(h.st, ctx, kv.Key, id, kv.Version)
			return 0, ok, err
		},
		func(ctx context.Context, held []store.KeyVersion) ([]store.Won, error) {
			return many(h.st, ctx, id, held)
		})
	return ok, err
}

// Handover is store.Driver.Handover, sent in a batch with the handovers of the
// other handles from the same ID to the same target.
func (s *Store) Handover(ctx context.Context, key, id string, version int64, to store.Candidate) (int64, bool, error) {
	h := s.hub.Load()
	if h == nil {
		return s.Driver.Handover(ctx, key, id, version, to)
	}
	return s.cas(ctx, h, shape{op: "handover", id: id, to: to}, store.KeyVersion{Key: key, Version: version},
		func(ctx context.Context, kv store.KeyVersion) (int64, bool, error) {
			return h.st.Handover(ctx, kv.Key, id, kv.Version, to)
		},
		func(ctx context.Context, held []store.KeyVersion) ([]store.Won, error) {
			return h.st.HandoverMany(ctx, id, to, held)
		})
}

// observed is the outcome of a read.
type observed struct {
	rec   store.Record
	found bool
}

// Observe is store.Driver.Observe, sent in a batch with the reads of the other
// handles. A batch that meets an invalid row is read again key by key, so that
// one key's bad row fails only that key's read.
func (s *Store) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	h := s.hub.Load()
	if h == nil {
		return s.Driver.Observe(ctx, key)
	}
	one := func(ctx context.Context, in any) (any, error) {
		rec, found, err := h.st.Observe(ctx, in.(string))
		return observed{rec, found}, err
	}
	q := get(h, shape{op: "observe"}, s.wait, one,
		func(ctx context.Context, ins []any, outs []any, errs []error) {
			recs, err := h.st.ObserveMany(ctx, unique(strs(ins)))
			if errors.Is(err, store.ErrInvalidRow) {
				for i, in := range ins {
					outs[i], errs[i] = one(ctx, in)
				}
				return
			}
			fanOut(errs, err)
			for i, in := range ins {
				rec, ok := recs[in.(string)]
				outs[i] = observed{rec, ok}
			}
		})
	out, err := q.do(ctx, "", key, s.wait) // reads of one key share a batch and its row
	o, _ := out.(observed)
	return o.rec, o.found, err
}

// members sends a members call through the queue of shape k: in goes into
// the batch, whose inputs many sends in one call. key is what no batch holds twice.
func (s *Store) members(ctx context.Context, h *hub, k shape, key string, in any,
	many func(ctx context.Context, ins []any, outs []any) error) (any, error) {
	batch := func(ctx context.Context, ins []any, outs []any, errs []error) { fanOut(errs, many(ctx, ins, outs)) }
	q := get(h, k, s.membersWait, func(ctx context.Context, in any) (any, error) {
		outs := make([]any, 1)
		err := many(ctx, []any{in}, outs)
		return outs[0], err
	}, batch)
	return q.do(ctx, key, in, s.membersWait)
}

// PutMembers is store.Driver.PutMembers; a call with one row is sent in a batch
// with the other handles' rows.
func (s *Store) PutMembers(ctx context.Context, ms []store.Member) error {
	h := s.hub.Load()
	if h == nil || len(ms) != 1 {
		return s.Driver.PutMembers(ctx, ms)
	}
	_, err := s.members(ctx, h, shape{op: "put members"}, ms[0].Key+"\x00"+ms[0].ID, ms[0],
		func(ctx context.Context, ins []any, _ []any) error {
			rows := make([]store.Member, len(ins))
			for i, in := range ins {
				rows[i] = in.(store.Member)
			}
			return h.st.PutMembers(ctx, rows)
		})
	return err
}

// DeleteMembers is store.Driver.DeleteMembers; a call for one key is sent in a
// batch with the other handles' of the same ID.
func (s *Store) DeleteMembers(ctx context.Context, id string, keys []string) error {
	h := s.hub.Load()
	if h == nil || len(keys) != 1 {
		return s.Driver.DeleteMembers(ctx, id, keys)
	}
	_, err := s.members(ctx, h, shape{op: "delete members", id: id}, keys[0], keys[0],
		func(ctx context.Context, ins []any, _ []any) error { return h.st.DeleteMembers(ctx, id, strs(ins)) })
	return err
}

// PruneMembers is store.Driver.PruneMembers. Handles share it: the prunes that
// wait together are one statement, each told how many rows it deleted, and a
// prune asked within a tenth of olderThan (a lease, for the members' PruneAge)
// after the last one of the store deletes nothing new and is not sent.
func (s *Store) PruneMembers(ctx context.Context, olderThan time.Duration) (int64, error) {
	h := s.hub.Load()
	if h == nil {
		return s.Driver.PruneMembers(ctx, olderThan)
	}
	if !h.pruneDue(olderThan, time.Now()) {
		return 0, nil
	}
	out, err := s.members(ctx, h, shape{op: "prune members", d: olderThan}, "", nil,
		func(ctx context.Context, _ []any, outs []any) error {
			n, err := h.st.PruneMembers(ctx, olderThan)
			for i := range outs {
				outs[i] = n
			}
			return err
		})
	n, _ := out.(int64)
	return n, err
}

// pruneDue reports whether a prune of rows older than olderThan is due at now,
// and if so counts it as sent.
func (h *hub) pruneDue(olderThan time.Duration, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if last, ok := h.pruned[olderThan]; ok && now.Sub(last) < olderThan/10 {
		return false
	}
	h.pruned[olderThan] = now
	return true
}

// Members is store.Driver.Members, sent in a batch with the other handles'
// reads of members within the same window.
func (s *Store) Members(ctx context.Context, key string, within time.Duration) ([]store.Member, error) {
	if s.hub.Load() == nil {
		return s.Driver.Members(ctx, key, within)
	}
	return s.MembersOf(ctx, []string{key}, within)
}

// MembersOf is store.Driver.MembersOf; a call for one key is sent in a batch
// with the other handles' reads within the same window.
func (s *Store) MembersOf(ctx context.Context, keys []string, within time.Duration) ([]store.Member, error) {
	h := s.hub.Load()
	if h == nil || len(keys) != 1 {
		return s.Driver.MembersOf(ctx, keys, within)
	}
	out, err := s.members(ctx, h, shape{op: "members", d: within}, "", keys[0],
		func(ctx context.Context, ins []any, outs []any) error {
			ms, err := h.st.MembersOf(ctx, unique(strs(ins)), within)
			byKey := map[string][]store.Member{}
			for _, m := range ms {
				byKey[m.Key] = append(byKey[m.Key], m)
			}
			for i, in := range ins {
				outs[i] = byKey[in.(string)]
			}
			return err
		})
	ms, _ := out.([]store.Member)
	return ms, err
}
