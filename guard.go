package casleader

import (
	"context"
	"database/sql"
)

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
// The check runs through the store's Guard ([store.Driver]; a decorator that embeds
// the store keeps it). For a pgx transaction, use postgres.Guard (package
// store/postgres) with [Elector.Fence] or the [Term].
func (e *Elector) Guard(ctx context.Context, tx *sql.Tx, token int64) error {
	return e.term(token).Guard(ctx, tx)
}
