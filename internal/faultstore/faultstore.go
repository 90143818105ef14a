// Package faultstore is an election store decorator that injects faults into a real
// store (MariaDB, PostgreSQL, SQLite) the way a database or network misbehaves: an
// error before the statement reaches the table, a write that commits and then loses
// its reply, a slow round trip, a failure that lasts until cleared.
//
// The store's own error classification happens below the decorator, so injected
// errors are built to look like classified ones: [Error] wraps a driver error of
// the named kind with the sentinel of package store that the store's classifier
// would have added ([store.ErrNotWritable] for MySQL error 1290 or PostgreSQL
// SQLSTATE 25006, [store.ErrTransient] for a deadlock, and so on). The classifiers
// themselves are tested in package store, against the same driver errors.
package faultstore

import (
	"context"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// Operation names (those of package memstore, and the guard's); AnyOp matches them
// all.
const (
	OpObserve  = memstore.OpObserve
	OpInsert   = memstore.OpInsert
	OpElect    = memstore.OpElect
	OpRenew    = memstore.OpRenew
	OpRelease  = memstore.OpRelease
	OpHandover = memstore.OpHandover
	OpGuard    = "guard"
	AnyOp      = memstore.AnyOp
)

// Store decorates a [store.Driver] with fault hooks: those of the in-memory store
// ([memstore.Faults]), one implementation for both. The methods it does not
// decorate (the batched calls, members, wake-ups, setup) are the inner store's,
// through the embedded Driver. Its methods are safe for concurrent use.
type Store struct {
	memstore.Faults
	store.Driver
	inner store.Driver
}

// New decorates inner.
func New(inner store.Driver) *Store {
	return &Store{Driver: inner, inner: inner}
}

// before runs the hooks of op: the error to return now (nil: go on), and the one
// to return once the inner store's write is done.
func (s *Store) before(ctx context.Context, op string) (now, after error) {
	now, after = s.Before(ctx, op)
	if now != nil {
		return fmt.Errorf("faultstore: %s: %w", op, now), nil
	}
	return nil, after
}

func (s *Store) write(ctx context.Context, op string, do func() (bool, error)) (bool, error) {
	_, ok, err := s.writeTerm(ctx, op, func() (int64, bool, error) {
		ok, err := do()
		return 0, ok, err
	})
	return ok, err
}

// writeTerm is write for the writes that start a term and report it.
func (s *Store) writeTerm(ctx context.Context, op string, do func() (int64, bool, error)) (int64, bool, error) {
	now, after := s.before(ctx, op)
	if now != nil {
		return 0, false, now
	}
	term, ok, werr := do()
	if after != nil {
		return 0, false, after
	}
	return term, ok, werr
}

// Observe reads the row, with the faults of OpObserve.
func (s *Store) Observe(ctx context.Context, key string) (store.Record, bool, error) {
	if err, _ := s.before(ctx, OpObserve); err != nil {
		return store.Record{}, false, err
	}
	return s.inner.Observe(ctx, key)
}

// Insert creates the row, with the faults of OpInsert.
func (s *Store) Insert(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	return s.writeTerm(ctx, OpInsert, func() (int64, bool, error) { return s.inner.Insert(ctx, key, cand) })
}

// Elect sends an election, with the faults of OpElect.
func (s *Store) Elect(ctx context.Context, key string, cand store.Candidate, version int64) (int64, bool, error) {
	return s.writeTerm(ctx, OpElect, func() (int64, bool, error) {
		return s.inner.Elect(ctx, key, cand, version)
	})
}

// Renew sends a renewal, with the faults of OpRenew.
func (s *Store) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	return s.write(ctx, OpRenew, func() (bool, error) { return s.inner.Renew(ctx, key, id, version) })
}

// Release sends a release, with the faults of OpRelease.
func (s *Store) Release(ctx context.Context, key, id string, version int64) (bool, error) {
	return s.write(ctx, OpRelease, func() (bool, error) { return s.inner.Release(ctx, key, id, version) })
}

// Handover sends a handover, with the faults of OpHandover.
func (s *Store) Handover(ctx context.Context, key, id string, version int64, to store.Candidate) (int64, bool, error) {
	return s.writeTerm(ctx, OpHandover, func() (int64, bool, error) { return s.inner.Handover(ctx, key, id, version, to) })
}

// HandoverMany sends a batched handover, with the faults of OpHandover.
func (s *Store) HandoverMany(ctx context.Context, id string, to store.Candidate, held []store.KeyVersion) ([]store.Won, error) {
	now, after := s.before(ctx, OpHandover)
	if now != nil {
		return nil, now
	}
	won, err := s.inner.HandoverMany(ctx, id, to, held)
	if after != nil {
		return nil, after
	}
	return won, err
}

// ElectReleased sends an election of a released row, with the faults of OpElect.
func (s *Store) ElectReleased(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	return s.writeTerm(ctx, OpElect, func() (int64, bool, error) { return s.inner.ElectReleased(ctx, key, cand) })
}

// Guard forwards to the inner store's guard (for a *sql.Tx or a pgx.Tx), with the
// faults of OpGuard.
func (s *Store) Guard(ctx context.Context, tx any, key, id string, token int64, lease time.Duration) error {
	if err, _ := s.before(ctx, OpGuard); err != nil {
		return err
	}
	return s.inner.Guard(ctx, tx, key, id, token, lease)
}

// Kind names a class of server error that [Error] builds.
type Kind string

// The kinds of injected server errors.
const (
	ReadOnly      Kind = "read-only"     // MySQL 1290 (--read-only), PostgreSQL 25006
	Deadlock      Kind = "deadlock"      // MySQL 1213, PostgreSQL 40P01
	Serialization Kind = "serialization" // PostgreSQL 40001 (MySQL has none: a deadlock stands in)
	NoPrivilege   Kind = "no-privilege"  // MySQL 1142, PostgreSQL 42501
	ConnReset     Kind = "conn-reset"    // the connection broke mid-statement
)

// Error returns an error like the one a store of dialect ("mysql" or "postgres")
// returns for a server error of kind k: the driver error, wrapped with the sentinel
// of package store that its classifier adds.
func Error(dialect string, k Kind) error {
	var driverErr error
	sentinel := store.ErrTransient
	switch k {
	case ReadOnly:
		sentinel = store.ErrNotWritable
		driverErr = pick(dialect, &mysql.MySQLError{Number: 1290, Message: "The MariaDB server is running with the --read-only option so it cannot execute this statement"},
			&pgconn.PgError{Code: "25006", Message: "cannot execute UPDATE in a read-only transaction"})
	case Deadlock:
		driverErr = pick(dialect, &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"},
			&pgconn.PgError{Code: "40P01", Message: "deadlock detected"})
	case Serialization:
		driverErr = pick(dialect, &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"},
			&pgconn.PgError{Code: "40001", Message: "could not serialize access due to concurrent update"})
	case NoPrivilege:
		sentinel = store.ErrDeployment
		driverErr = pick(dialect, &mysql.MySQLError{Number: 1142, Message: "UPDATE command denied to user 'app'@'localhost' for table 'casleader_election'"},
			&pgconn.PgError{Code: "42501", Message: "permission denied for table casleader_election"})
	case ConnReset:
		driverErr = mysql.ErrInvalidConn
		if dialect == "postgres" {
			driverErr = fmt.Errorf("read tcp 127.0.0.1:5432: connection reset by peer")
		}
	default:
		panic("faultstore: unknown kind " + string(k))
	}
	return fmt.Errorf("injected %s: %w: %w", k, sentinel, driverErr)
}

func pick(dialect string, my, pg error) error {
	if dialect == "postgres" {
		return pg
	}
	return my
}
