// Package detector sends the followers' statements of the engine that runs every
// casleader election: the reads that detect a leader's silence (a lease that has
// expired by the database clock, or was released) and the elections that follow.
// An election is a compare-and-set from the version last read, which wins only
// if the lease has expired by the database clock when it executes: exactly one of
// any set of racers wins a given version.
//
// One key is read or elected by one single-key statement, several by one batched
// statement with a compare-and-set per key. The engine (casleader.Elector for one
// key, casleader.Group for many) decides when to read (when the observed lease
// can expire, at least every PollInterval, or when the store's wake-ups announce
// a release) and what the replies mean (package cas); package heartbeat sends
// the leader's writes.
package detector

import (
	"context"
	"time"

	"github.com/casleader/casleader/store"
)

// Read reads the rows of keys; a key without a row is missing from the reply.
func Read(ctx context.Context, st store.Driver, keys []string) (map[string]store.Record, error) {
	if len(keys) != 1 {
		return st.ObserveMany(ctx, keys)
	}
	rec, found, err := st.Observe(ctx, keys[0])
	if err != nil || !found {
		return nil, err
	}
	return map[string]store.Record{keys[0]: rec}, nil
}

// Elect elects cand in each key of from, from the version read, and returns the
// keys won with the terms they started.
func Elect(ctx context.Context, st store.Driver, cand store.Candidate, from []store.KeyVersion) ([]store.Won, error) {
	if len(from) != 1 {
		return st.ElectMany(ctx, cand, from)
	}
	sent := time.Now()
	term, ok, err := st.Elect(ctx, from[0].Key, cand, from[0].Version)
	return won(from[0].Key, term, sent, ok, err)
}

// Insert creates the missing rows of keys with cand leading, and returns the
// keys created with the terms they started.
func Insert(ctx context.Context, st store.Driver, cand store.Candidate, keys []string) ([]store.Won, error) {
	if len(keys) != 1 {
		return st.InsertMany(ctx, cand, keys)
	}
	sent := time.Now()
	term, ok, err := st.Insert(ctx, keys[0], cand)
	return won(keys[0], term, sent, ok, err)
}

// won is the reply of a single-key write sent at sent, as a batched one's.
func won(key string, term int64, sent time.Time, ok bool, err error) ([]store.Won, error) {
	if err != nil || !ok {
		return nil, err
	}
	return []store.Won{{Key: key, Term: term, Since: sent}}, nil
}
