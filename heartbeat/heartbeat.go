// Package heartbeat sends the leader's writes of the engine that runs every
// casleader election: the renewals of the leases it holds, and the release or
// handover that ends a term. Each is a compare-and-set from the version the
// leader holds, which bumps the row's version and rewrites tick_time with the
// database clock; a leader trusts a won renewal from its send time ([store.Won].Since), never from its reply.
//
// One lease is renewed by one single-key statement, several by one batched
// statement with a compare-and-set per key: whatever the number of keys, one
// statement per round trip. The engine (casleader.Elector for one key,
// casleader.Group for many) decides when to send them and what the replies mean
// (package cas); package detector sends the followers' reads and elections.
package heartbeat

import (
	"context"
	"time"

	"github.com/casleader/casleader/store"
)

// Renew renews the leases of held for the candidate id, each from its version,
// and returns those that won. A lease that lost its compare-and-set is missing
// from the reply; an error means the outcome of every key is unknown (the write
// may have committed).
func Renew(ctx context.Context, st store.Driver, id string, held []store.KeyVersion) ([]store.Won, error) {
	if len(held) != 1 {
		return st.RenewMany(ctx, id, held)
	}
	sent := time.Now()
	ok, err := st.Renew(ctx, held[0].Key, id, held[0].Version)
	return won(held[0].Key, sent, ok, err)
}

// Release gives up the leases of held for the candidate id, each from its
// version: it releases them or, when to names a candidate, hands them to it. It
// returns the keys given up, a handover's with the term it starts.
func Release(ctx context.Context, st store.Driver, id string, to store.Candidate, held []store.KeyVersion) ([]store.Won, error) {
	switch {
	case len(held) != 1 && to.ID == "":
		return st.ReleaseMany(ctx, id, held)
	case len(held) != 1:
		return st.HandoverMany(ctx, id, to, held)
	case to.ID == "":
		sent := time.Now()
		ok, err := st.Release(ctx, held[0].Key, id, held[0].Version)
		return won(held[0].Key, sent, ok, err)
	}
	term, ok, err := st.Handover(ctx, held[0].Key, id, held[0].Version, to)
	if err != nil || !ok {
		return nil, err
	}
	return []store.Won{{Key: held[0].Key, Term: term}}, nil
}

// won is the reply of a single-key write sent at sent, as a batched one's.
func won(key string, sent time.Time, ok bool, err error) ([]store.Won, error) {
	if err != nil || !ok {
		return nil, err
	}
	return []store.Won{{Key: key, Since: sent}}, nil
}
