package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/store"
)

// pgxTx reads through a pgx transaction in exec mode.
type pgxTx struct{ tx pgx.Tx }

func (t pgxTx) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Scanner {
	return t.tx.QueryRow(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...)
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
// The election's store ([store.Driver.Guard]) must take a pgx.Tx: a [Store] on a
// pool does, and so does any decorator that embeds it.
func Guard(ctx context.Context, f store.Fencer, tx pgx.Tx) error {
	if f == nil {
		return fmt.Errorf("%w: postgres: guard: no term (nil); pass the leader's term, casleader.TermFrom(ctx)", store.ErrInvalidArgument)
	}
	fence := f.Fence()
	if fence.Store == nil {
		if fence.Trust != nil {
			if err := fence.Trust(); err != nil {
				return err // not a leader's term at all
			}
		}
		return fmt.Errorf("%w: postgres: guard %q: the fence names no store", store.ErrInvalidArgument, fence.Key)
	}
	return fence.Run(func(key, id string, token int64, lease time.Duration) error {
		if tx == nil {
			return fence.Store.Guard(ctx, nil, key, id, token, lease)
		}
		return fence.Store.Guard(ctx, tx, key, id, token, lease)
	})
}
