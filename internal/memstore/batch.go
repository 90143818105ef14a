package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/store"
)

// Operation names of the batched methods, for the fault hooks.
const (
	OpObserveMany  = "observe many"
	OpInsertMany   = "insert many"
	OpElectMany    = "elect many"
	OpRenewMany    = "renew many"
	OpReleaseMany  = "release many"
	OpHandoverMany = "handover many"
)

func checkBatch(n int) error {
	if n > store.MaxBatch {
		return fmt.Errorf("%w: %d keys in one batch, the limit is %d", store.ErrInvalidArgument, n, store.MaxBatch)
	}
	return nil
}

func validKVs(id string, kvs []store.KeyVersion) error {
	if err := checkBatch(len(kvs)); err != nil {
		return err
	}
	if err := validateName("id", id); err != nil {
		return err
	}
	for _, kv := range kvs {
		if err := validateName("key", kv.Key); err != nil {
			return err
		}
	}
	return nil
}

// ObserveMany reads the rows of keys in one round trip; missing keys are absent.
func (s *Store) ObserveMany(ctx context.Context, keys []string) (map[string]store.Record, error) {
	if err := checkBatch(len(keys)); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := validateName("key", k); err != nil {
			return nil, err
		}
	}
	out := make(map[string]store.Record, len(keys))
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	err := s.do(ctx, OpObserveMany, key, func(now time.Time) (bool, error) {
		for _, k := range keys {
			r, ok := s.rows[k]
			if !ok {
				continue
			}
			rec, err := r.record(k, now)
			rec.OneClock = !s.nodes
			if err != nil {
				return false, fmt.Errorf("observe %s %q: %w", s.name, k, err)
			}
			out[k] = rec
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// batch runs apply per distinct key in one round trip and returns the keys it won.
// apply reports whether its write won and, for a write that starts a term, the term.
func (s *Store) batch(ctx context.Context, op, id string, kvs []store.KeyVersion, apply func(kv store.KeyVersion, now time.Time) (term int64, won bool)) ([]store.Won, error) {
	if err := validKVs(id, kvs); err != nil {
		return nil, err
	}
	for _, kv := range kvs {
		if err := s.checkVersion(op, kv.Key, kv.Version); err != nil {
			return nil, err
		}
	}
	if len(kvs) == 0 {
		return nil, nil
	}
	var won []store.Won
	sent := time.Now()
	err := s.do(ctx, op, kvs[0].Key, func(now time.Time) (bool, error) {
		seen := map[string]bool{}
		for _, kv := range kvs {
			if seen[kv.Key] {
				continue
			}
			seen[kv.Key] = true
			if term, ok := apply(kv, now); ok {
				won = append(won, store.Won{Key: kv.Key, Term: term, Since: sent})
			}
		}
		return len(won) > 0, nil
	})
	if err != nil {
		return nil, err
	}
	return won, nil
}

// InsertMany is Insert per key, in one round trip: it creates the missing rows among
// keys with id as first leader, each in a new term.
func (s *Store) InsertMany(ctx context.Context, cand store.Candidate, keys []string) ([]store.Won, error) {
	kvs := make([]store.KeyVersion, len(keys))
	for i, k := range keys {
		kvs[i] = store.KeyVersion{Key: k}
	}
	if err := rules.ValidateCandidate(cand); err != nil {
		return nil, err
	}
	return s.batch(ctx, OpInsertMany, cand.ID, kvs, func(kv store.KeyVersion, now time.Time) (int64, bool) {
		if _, ok := s.rows[kv.Key]; ok {
			return 0, false
		}
		term := newTerm(0, now)
		s.rows[kv.Key] = elected(cand, term, now)
		return term, true
	})
}

// ElectMany is Elect per key, in one round trip.
func (s *Store) ElectMany(ctx context.Context, cand store.Candidate, from []store.KeyVersion) ([]store.Won, error) {
	if err := rules.ValidateCandidate(cand); err != nil {
		return nil, err
	}
	return s.batch(ctx, OpElectMany, cand.ID, from, func(kv store.KeyVersion, now time.Time) (int64, bool) {
		r := s.rows[kv.Key]
		if r == nil || r.version != kv.Version || !takeable(r, cand, now) {
			return 0, false
		}
		term := newTerm(kv.Version, now)
		s.rows[kv.Key] = elected(cand, term, now)
		return term, true
	})
}

// RenewMany is Renew per key, in one round trip.
func (s *Store) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	return s.batch(ctx, OpRenewMany, id, held, func(kv store.KeyVersion, now time.Time) (int64, bool) {
		r := s.held(kv.Key, id, kv.Version)
		if r == nil {
			return 0, false
		}
		r.version, r.tick = kv.Version+1, now
		return 0, true
	})
}

// HandoverMany is Handover to to per key, in one round trip.
func (s *Store) HandoverMany(ctx context.Context, id string, to store.Candidate, held []store.KeyVersion) ([]store.Won, error) {
	if err := validateTarget(to); err != nil {
		return nil, err
	}
	return s.batch(ctx, OpHandoverMany, id, held, func(kv store.KeyVersion, now time.Time) (int64, bool) {
		r := s.held(kv.Key, id, kv.Version)
		if r == nil {
			return 0, false
		}
		term := newTerm(kv.Version, now)
		s.rows[kv.Key] = handedOver(r, to, term, now)
		return term, true
	})
}

// ReleaseMany is Release per key, in one round trip.
func (s *Store) ReleaseMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	return s.batch(ctx, OpReleaseMany, id, held, func(kv store.KeyVersion, now time.Time) (int64, bool) {
		r := s.held(kv.Key, id, kv.Version)
		if r == nil {
			return 0, false
		}
		*r = row{version: kv.Version + 1, term: r.term, lease: r.lease, tick: now}
		return 0, true
	})
}
