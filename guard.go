package casleader

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/casleader/casleader/store"
)

// SQLGuarder is a store that can fence a database/sql transaction: the stores of
// packages store/mysql, store/postgres and store/sqlite.
type SQLGuarder interface {
	Guard(ctx context.Context, tx *sql.Tx, key, id string, token int64, lease time.Duration) error
}

// Guard fences a write of the leader: it verifies, inside tx, that token (as handed
// to OnStartedLeading) is still the term of this candidate's unexpired lease, and
// holds a shared lock on the election row until tx ends, so that no other candidate
// can win the election before tx has committed or rolled back. Use it for every
// write that must never be done by two leaders, or by a leader that has lost its
// lease while it was frozen (GC pause, SIGSTOP, a slow disk) between its
// [Elector.IsLeader] check and the write:
//
//	func(ctx context.Context, token int64) { // OnStartedLeading
//		tx, err := db.BeginTx(ctx, nil) // the database that holds the election table
//		...
//		defer tx.Rollback()
//		if err := el.Guard(ctx, tx, token); err != nil {
//			return // errors.Is(err, casleader.ErrNotLeader): stop acting
//		}
//		// the leader-only writes, in tx
//		err = tx.Commit()
//	}
//
// On a MariaDB Galera node, where locks do not cross nodes, the guard also writes
// the row (and leaves it as it was) so that a takeover on any node and tx
// conflict in certification: see the Galera section of docs/SAFETY.md.
//
// Check the guard first in the transaction, then write, then commit. Keep the
// transaction short: the lock also delays the leader's own renewals. tx must be on
// the database (and, for PostgreSQL and MySQL, the server) of the election table;
// a guard on one database does not fence writes to another.
//
// Guard returns nil when the token holds the lease. It returns an error matching
// [ErrNotLeader] when this elector does not lead in the term of token (checked
// locally first, without I/O) or when the row says otherwise (such an error also
// matches [store.ErrFenced]: a newer term, a released or expired lease by the
// database clock, a rolled-back row). Other errors (a classified database error:
// [store.ErrTransient], [store.ErrNotWritable], [store.ErrDeployment]) mean that
// the check could not be made. In every case but nil, roll tx back and do not write.
//
// The elector's store must implement [SQLGuarder] (the stores of the dialect
// packages do; a decorating store must forward the method). For a pgx transaction,
// use postgres.Guard (package store/postgres) with [Elector.Fence] or the [Term].
func (e *Elector) Guard(ctx context.Context, tx *sql.Tx, token int64) error {
	g, ok := e.store.(SQLGuarder)
	if !ok {
		return fmt.Errorf("casleader: guard %q: the store %T has no Guard method for *sql.Tx", e.cfg.Key, e.store)
	}
	if err := e.ownsToken(token); err != nil {
		return err
	}
	return guardError(g.Guard(ctx, tx, e.cfg.Key, e.cfg.ID, token, e.cfg.LeaseDuration))
}

// Fence returns the fence of this elector's term token, for the guards of the
// dialect packages (postgres.Guard fences a pgx transaction with it): they run
// the same checks as [Elector.Guard], locally first and then in the row, and
// return the same errors.
func (e *Elector) Fence(token int64) store.Fence {
	return store.Fence{
		Key:    e.cfg.Key,
		ID:     e.cfg.ID,
		Token:  token,
		Lease:  e.cfg.LeaseDuration,
		Store:  e.store,
		Trust:  func() error { return e.ownsToken(token) },
		Fenced: guardError,
	}
}

// ownsToken checks locally that this elector leads now, in the term of token.
func (e *Elector) ownsToken(token int64) error {
	if cur := e.Token(); cur == 0 || cur != token {
		return fmt.Errorf("%w: guard %q: token %d is not the current term of %q (current: %d, 0 when not leading)",
			ErrNotLeader, e.cfg.Key, token, e.cfg.ID, cur)
	}
	return nil
}

func guardError(err error) error {
	if errors.Is(err, store.ErrFenced) {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return err
}
