package term_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/term"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

func TestTermIsScopedToItsToken(t *testing.T) {
	var trust term.Trust
	resigned := 0
	tm := term.New(term.Config{Key: "k", ID: "a", Token: 7, Lease: time.Second, Trust: &trust, Resign: func() { resigned++ }})
	ctx := term.With(t.Context(), tm)
	require.Same(t, tm, term.From(ctx))
	assert.Nil(t, term.From(context.Background()))
	assert.True(t, tm.Of(&trust))
	assert.False(t, tm.Of(&term.Trust{}))

	trust.Set(7, time.Now().Add(time.Hour))
	assert.True(t, tm.IsLeader())
	require.NoError(t, tm.Resign())
	assert.Equal(t, 1, resigned)

	trust.Set(8, time.Now().Add(time.Hour)) // a later term of the same key
	assert.False(t, tm.IsLeader())
	err := tm.Resign()
	require.ErrorIs(t, err, term.ErrNotLeader)
	assert.Contains(t, err.Error(), `term 7 of "a" has ended`)
	assert.Equal(t, 1, resigned, "an ended term never resigns a later one")

	trust.Set(7, time.Now().Add(-time.Millisecond)) // its deadline has passed
	assert.False(t, tm.IsLeader())
}

func TestGuardRefusesWithoutIO(t *testing.T) {
	var trust term.Trust
	tm := term.New(term.Config{Key: "k", ID: "a", Token: 7, Trust: &trust, Store: &sqlite.Store{}})
	// Not leading: no transaction is needed to know (nor a usable store).
	err := tm.Guard(t.Context(), nil)
	require.ErrorIs(t, err, term.ErrNotLeader)
	assert.NotErrorIs(t, err, store.ErrFenced)

	trust.Set(7, time.Now().Add(time.Hour))
	noStore := term.New(term.Config{Key: "k", Token: 7, Trust: &trust})
	assert.ErrorContains(t, noStore.Guard(t.Context(), nil), "has no store")
	assert.ErrorContains(t, postgres.Guard(t.Context(), noStore, nil), "names no store")
	trust.Clear()
	// The fence runs the same local check first: no store is reached.
	pgTerm := term.New(term.Config{Key: "k", ID: "a", Token: 7, Trust: &trust, Store: &postgres.Store{}})
	err = postgres.Guard(t.Context(), pgTerm, nil)
	require.ErrorIs(t, err, term.ErrNotLeader)
	assert.NotErrorIs(t, err, store.ErrFenced)
	trust.Set(7, time.Now().Add(time.Hour))
	assert.ErrorContains(t, term.New(term.Config{Key: "k", Token: 7, Trust: &trust}).Resign(), "cannot resign")
}
