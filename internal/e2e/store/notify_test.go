package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/postgres"
)

// TestPostgresReleaseAndHandoverNotifyOnlyWhenTheyWin checks the notification that
// package internal/notify listens for: sent by the winning release or handover statement
// itself, on sqlstore.NotifyChannel with sqlstore.NotifyPayload, never by a write that
// lost, and never by other writes.
func TestPostgresReleaseAndHandoverNotifyOnlyWhenTheyWin(t *testing.T) {
	t.Parallel()
	dsn := testdb.PostgresDSN(t)
	pool := pgdb.Postgres(t)
	table := testdb.Name(t)
	s, err := postgres.New(pool, table)
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, s.CreateTable(ctx))
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table) })

	l, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer l.Close(context.Background())
	_, err = l.Exec(ctx, `LISTEN `+pgx.Identifier{sqlstore.NotifyChannel}.Sanitize())
	require.NoError(t, err)
	// next returns the next notification for this test's table within wait; other
	// tests notify the same channel for their own tables. Notifications that must
	// not come are waited for briefly; those that must, generously.
	next := func(wait time.Duration) (string, bool) {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		for {
			n, err := l.WaitForNotification(wctx)
			if err != nil {
				return "", false
			}
			assert.Equal(t, sqlstore.NotifyChannel, n.Channel)
			if strings.HasPrefix(n.Payload, table+" ") {
				return n.Payload, true
			}
		}
	}

	const quiet, settle = 300 * time.Millisecond, 10 * time.Second
	key := "it's a key\nwith a newline"
	v, ok, err := s.Insert(ctx, key, store.Candidate{ID: "a"})
	require.True(t, ok)
	require.NoError(t, err)
	ok, err = s.Renew(ctx, key, "a", v)
	require.True(t, ok)
	require.NoError(t, err)
	_, got := next(quiet)
	assert.False(t, got, "insert and renew do not notify")

	ok, err = s.Release(ctx, key, "a", v) // stale version: loses
	require.NoError(t, err)
	require.False(t, ok)
	_, got = next(quiet)
	assert.False(t, got, "a losing release does not notify")

	ok, err = s.Release(ctx, key, "a", v+1)
	require.NoError(t, err)
	require.True(t, ok, "rows affected counts the SELECT's row")
	p, got := next(settle)
	require.True(t, got, "a winning release notifies")
	assert.Equal(t, sqlstore.NotifyPayload(table, v+2, key), p, "with the released version")

	term, ok, err := s.Elect(ctx, key, store.Candidate{ID: "b", Lease: time.Hour}, v+2)
	require.NoError(t, err)
	require.True(t, ok)
	_, got = next(quiet)
	assert.False(t, got, "an election does not notify")
	_, ok, err = s.Handover(ctx, key, "b", term-1, store.Candidate{ID: "c"}) // stale version: loses
	require.NoError(t, err)
	require.False(t, ok)
	_, got = next(quiet)
	assert.False(t, got, "a losing handover does not notify")
	_, ok, err = s.Handover(ctx, key, "b", term, store.Candidate{ID: "c"})
	require.NoError(t, err)
	require.True(t, ok)
	p, got = next(settle)
	require.True(t, got, "a winning handover notifies")
	assert.Equal(t, sqlstore.HandoverPayload(table, "c", key), p, "handed over: it names the target, which reads the row and adopts it")

	// The batched release notifies once per released key.
	ins, err := s.InsertMany(ctx, store.Candidate{ID: "m"}, []string{"x", "y"})
	require.NoError(t, err)
	require.Len(t, ins, 2)
	held := make([]store.KeyVersion, len(ins))
	for i, w := range ins {
		held[i] = store.KeyVersion{Key: w.Key, Version: w.Term}
	}
	rel, err := s.ReleaseMany(ctx, "m", held)
	require.NoError(t, err)
	assert.Len(t, rel, 2)
	var payloads []string
	for range 2 {
		p, got := next(settle)
		require.True(t, got, "ReleaseMany notifies each key")
		payloads = append(payloads, p)
	}
	assert.ElementsMatch(t, []string{sqlstore.NotifyPayload(table, 0, "x"), sqlstore.NotifyPayload(table, 0, "y")}, payloads)

	// The batched handover notifies once per key handed over, naming the target.
	ins, err = s.InsertMany(ctx, store.Candidate{ID: "m"}, []string{"v", "w"})
	require.NoError(t, err)
	require.Len(t, ins, 2)
	for i, w := range ins {
		held[i] = store.KeyVersion{Key: w.Key, Version: w.Term}
	}
	handed, err := s.HandoverMany(ctx, "m", store.Candidate{ID: "it's c"}, held)
	require.NoError(t, err)
	assert.Len(t, handed, 2)
	payloads = payloads[:0]
	for range 2 {
		p, got := next(settle)
		require.True(t, got, "HandoverMany notifies each key")
		payloads = append(payloads, p)
	}
	assert.ElementsMatch(t, []string{sqlstore.HandoverPayload(table, "it's c", "v"), sqlstore.HandoverPayload(table, "it's c", "w")}, payloads)
}
