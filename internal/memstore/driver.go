package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/casleader/casleader/store"
)

var _ store.Driver = (*Store)(nil)

// member is a members row: what was written and when, by the node's clock.
type member struct {
	m       store.Member
	written time.Time
}

// Guard refuses every transaction: the in-memory store has no database to fence
// writes in.
func (s *Store) Guard(_ context.Context, tx any, key, _ string, _ int64, _ time.Duration) error {
	return fmt.Errorf("%w: memstore: guard %q: an in-memory store cannot fence a transaction (%T)", store.ErrInvalidArgument, key, tx)
}

// Subscribe returns a no-op: the in-memory store has no wake-ups (followers poll).
func (s *Store) Subscribe(string, string, func(int64)) (unsubscribe func()) { return func() {} }

// Observed does nothing.
func (s *Store) Observed(string, store.Record) {}

// Leading does nothing.
func (s *Store) Leading(string, int64, bool) {}

// PutMembers writes the rows of ms, stamped with the node's clock.
func (s *Store) PutMembers(_ context.Context, ms []store.Member) error {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range ms {
		m.Age = 0
		s.members[[2]string{m.Key, m.ID}] = member{m: m, written: now}
	}
	return nil
}

// DeleteMembers deletes the rows of id for keys.
func (s *Store) DeleteMembers(_ context.Context, id string, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.members, [2]string{k, id})
	}
	return nil
}

// PruneMembers deletes the rows not written for longer than olderThan.
func (s *Store) PruneMembers(_ context.Context, olderThan time.Duration) (int64, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k, m := range s.members {
		if now.Sub(m.written) > olderThan {
			delete(s.members, k)
			n++
		}
	}
	return n, nil
}

// Members returns the members of key written within the last within, by ID.
func (s *Store) Members(ctx context.Context, key string, within time.Duration) ([]store.Member, error) {
	return s.MembersOf(ctx, []string{key}, within)
}

// MembersOf returns the members of keys written within the last within, by key
// and ID.
func (s *Store) MembersOf(_ context.Context, keys []string, within time.Duration) ([]store.Member, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Member
	for _, m := range s.members {
		if age := now.Sub(m.written); slices.Contains(keys, m.m.Key) && age <= within {
			mm := m.m
			mm.Age = max(age, 0)
			out = append(out, mm)
		}
	}
	slices.SortFunc(out, func(a, b store.Member) int { return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}
