package casleader_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// TestTermGuardFencesWithItsOwnToken: the term handle of the leader's callback
// guards the user's transaction with that term's token, and refuses once the
// term has ended.
func TestTermGuardFencesWithItsOwnToken(t *testing.T) {
	db := litedb.SQLite(t)
	st, err := sqlite.New(db, "casleader_term_guard")
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(t.Context()))
	terms := make(chan *casleader.Term, 1)
	guarded := make(chan error, 1)
	el, err := casleader.New(st, casleader.Config{
		Key: "k", ID: "a", LeaseDuration: gLease, RenewDeadline: gRenew, HeartbeatInterval: gBeat, PollInterval: gPoll,
		OnStartedLeading: func(ctx context.Context, _ int64) {
			term := casleader.TermFrom(ctx)
			tx, err := db.BeginTx(ctx, nil)
			if err == nil {
				err = term.Guard(ctx, tx)
				_ = tx.Rollback()
			}
			guarded <- err
			terms <- term
			<-ctx.Done()
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	require.NoError(t, <-guarded, "the guard of the current term holds")
	term := <-terms
	require.NoError(t, el.Resign(t.Context()))
	tx, err := db.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	err = term.Guard(t.Context(), tx)
	assert.ErrorIs(t, err, casleader.ErrNotLeader, "the guard of an ended term refuses")
}

// TestTermFencesAPgxTransaction: postgres.Guard takes the leader's term (or
// Elector.Fence) for a pgx transaction, with the same checks and errors as the
// term's own Guard: it holds in the term, refuses once the term has ended, and
// refuses a context that is not a leadership context.
func TestTermFencesAPgxTransaction(t *testing.T) {
	pool := pgdb.Postgres(t)
	st, err := postgres.New(pool, testdb.Name(t))
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(t.Context()))
	terms := make(chan *casleader.Term, 1)
	guarded := make(chan error, 2)
	el, err := casleader.New(st, casleader.Config{
		Key: "k", ID: "a", LeaseDuration: gLease, RenewDeadline: gRenew, HeartbeatInterval: gBeat, PollInterval: gPoll,
		OnStartedLeading: func(ctx context.Context, token int64) {
			term := casleader.TermFrom(ctx)
			for _, f := range []store.Fencer{term, casleader.TermFrom(ctx).Fence()} {
				tx, err := pool.Begin(ctx)
				if err == nil {
					err = postgres.Guard(ctx, f, tx)
					_ = tx.Rollback(ctx)
				}
				guarded <- err
			}
			terms <- term
			<-ctx.Done()
		},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	require.NoError(t, <-guarded, "the term's guard holds")
	require.NoError(t, <-guarded, "the term's fence holds")
	term := <-terms
	token := term.Token()
	require.NoError(t, el.Resign(t.Context()))

	tx, err := pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	assert.ErrorIs(t, postgres.Guard(t.Context(), term, tx), casleader.ErrNotLeader, "the guard of an ended term refuses")
	assert.ErrorIs(t, postgres.Guard(t.Context(), el.Fence(token), tx), casleader.ErrNotLeader, "the elector's fence of an ended term refuses")
	assert.ErrorIs(t, postgres.Guard(t.Context(), casleader.TermFrom(t.Context()), tx), casleader.ErrNotLeader, "no term outside a leadership context")
	assert.ErrorIs(t, postgres.Guard(t.Context(), nil, tx), store.ErrInvalidArgument, "a nil fencer is refused")
}
