package casleader_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/store/sqlite"
)

// TestTermGuardFencesWithItsOwnToken: the term handle of the leader's callback
// guards the user's transaction with that term's token, and refuses once the
// term has ended.
func TestTermGuardFencesWithItsOwnToken(t *testing.T) {
	db := testdb.SQLite(t)
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
