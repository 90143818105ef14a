package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/store"
)

// GuardPgx is the store's guard (see [Store.Guard]) for a pgx transaction
// (pgxpool.Pool.Begin, pgx.Conn.Begin). It uses SELECT … FOR SHARE and sends no
// named prepared statement, so it works through PgBouncer in transaction pooling
// mode. Most callers use [Guard] with their term instead.
func (s *Store) GuardPgx(ctx context.Context, tx pgx.Tx, key, id string, token int64, lease time.Duration) error {
	var q sqlstore.RowQuerier
	if tx != nil {
		q = pgxTx{tx}
	}
	return sqlstore.GuardRow(ctx, &s.core, q, key, id, token, lease)
}

// pgxTx reads through a pgx transaction in exec mode.
type pgxTx struct{ tx pgx.Tx }

func (t pgxTx) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Scanner {
	return t.tx.QueryRow(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...)
}

// PgxGuarder is a store that can fence a pgx transaction: [Store] is one, and a
// decorating store must forward the method.
type PgxGuarder interface {
	GuardPgx(ctx context.Context, tx pgx.Tx, key, id string, token int64, lease time.Duration) error
}

// Guard fences a write of the leader in a pgx transaction: it verifies, inside tx,
// that the term of f (a casleader.Term, or Elector.Fence(token)) still holds an
// unexpired lease, and holds a shared lock on the election row until tx ends, so
// that no other candidate can win the election before tx has committed or rolled
// back. It is casleader's Guard for pgx.Tx, with the same checks and errors: an
// error matching casleader.ErrNotLeader (and [store.ErrFenced] when the row said
// so) when the term does not hold, a classified database error when the check
// could not be made. In every case but nil, roll tx back and do not write.
//
//	tx, err := pool.Begin(ctx)
//	...
//	defer tx.Rollback(ctx)
//	if err := postgres.Guard(ctx, casleader.TermFrom(ctx), tx); err != nil {
//		return // not the leader any more: stop acting
//	}
//	// the leader-only writes, in tx
//	err = tx.Commit(ctx)
//
// The election's store must implement [PgxGuarder] (a [Store] does).
func Guard(ctx context.Context, f store.Fencer, tx pgx.Tx) error {
	if f == nil {
		return fmt.Errorf("%w: postgres: guard: no term (nil); pass the leader's term, casleader.TermFrom(ctx)", store.ErrInvalidArgument)
	}
	fence := f.Fence()
	g, ok := fence.Store.(PgxGuarder)
	if !ok {
		if fence.Store == nil && fence.Trust != nil {
			if err := fence.Trust(); err != nil {
				return err // not a leader's term at all
			}
		}
		return fmt.Errorf("postgres: guard %q: the store %T has no GuardPgx method for pgx.Tx", fence.Key, fence.Store)
	}
	return fence.Run(func(key, id string, token int64, lease time.Duration) error {
		return g.GuardPgx(ctx, tx, key, id, token, lease)
	})
}
