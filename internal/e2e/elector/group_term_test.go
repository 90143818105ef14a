package casleader_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store"
)

// leaderTerm is a term handed to a leader's callback, with its context.
type leaderTerm struct {
	ctx  context.Context
	term *casleader.Term
}

// termWrite runs the term's guard, an insert and commit in one transaction of the
// user.
func termWrite(ctx context.Context, db guardDB, term *casleader.Term, actions string) error {
	tx, err := db.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.rollback()
	if err := tx.guardTerm(ctx, term); err != nil {
		return err
	}
	if err := tx.exec(ctx, fmt.Sprintf("INSERT INTO %s (token) VALUES (%d)", actions, term.Token())); err != nil {
		return err
	}
	return tx.commit()
}

// TestGroupKeyGuard: the term handle of a group key's callback fences the user's
// transaction like the Elector's: a write guarded by it commits while the key is
// led, and is refused once another candidate has taken the key over (by the
// database itself when the takeover happened behind the leader's back).
func TestGroupKeyGuard(t *testing.T) {
	for _, d := range guardDBs() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			start := func(t *testing.T, db guardDB) <-chan leaderTerm {
				terms := make(chan leaderTerm, 4)
				g, err := casleader.NewGroup(db.st, casleader.GroupConfig{
					ID: "a", Keys: []string{"j", "k"},
					LeaseDuration: gLease, RenewDeadline: gRenew, HeartbeatInterval: gBeat, PollInterval: gPoll,
					OnStartedLeading: func(ctx context.Context, key string, _ int64) {
						if key == "k" {
							terms <- leaderTerm{ctx, casleader.TermFrom(ctx)}
						}
						<-ctx.Done()
					},
				})
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- g.Run(ctx) }()
				t.Cleanup(func() {
					cancel()
					assert.NoError(t, <-done)
				})
				return terms
			}
			first := func(t *testing.T, terms <-chan leaderTerm) leaderTerm {
				t.Helper()
				select {
				case lt := <-terms:
					require.NotNil(t, lt.term, "the group key's context carries its term")
					return lt
				case <-time.After(30 * time.Second):
					t.Fatal("the group did not lead k")
					return leaderTerm{}
				}
			}

			t.Run("CommitsWhileLedAndIsRefusedAfterATakeover", func(t *testing.T) {
				t.Parallel()
				db, _, actions := openGuardDB(t, d.open)
				ctx := t.Context()
				a := first(t, start(t, db))
				assert.Equal(t, "k", a.term.Key())
				require.True(t, a.term.IsLeader())
				require.NoError(t, termWrite(ctx, db, a.term, actions), "a write guarded by the led key's term commits")

				b := startGuarded(t, db.st, "b", false)
				require.NoError(t, a.term.Resign(), "the term's Resign does not block")
				select {
				case <-a.ctx.Done():
				case <-time.After(gRenew):
					t.Fatal("the key's leadership context outlived its term")
				}
				tb := b.token(t)
				assert.Greater(t, tb, a.term.Token())
				assert.False(t, a.term.IsLeader())
				err := termWrite(ctx, db, a.term, actions)
				require.ErrorIs(t, err, casleader.ErrNotLeader, "the group key's former term")
				require.ErrorIs(t, a.term.Resign(), casleader.ErrNotLeader, "an ended term cannot resign")
				require.NoError(t, guardedWrite(ctx, db, b.Elector, tb, actions))
			})

			t.Run("TakeoverBehindTheLeadersBackIsFencedByTheDatabase", func(t *testing.T) {
				t.Parallel()
				db, quoted, actions := openGuardDB(t, d.open)
				ctx := t.Context()
				a := first(t, start(t, db))
				require.NoError(t, db.exec(ctx, fmt.Sprintf("UPDATE %s SET leader_id = 'x', term = term + 10, version = version + 10 WHERE elect_key = 'k'", quoted)))
				err := termWrite(ctx, db, a.term, actions)
				if !a.term.IsLeader() {
					t.Skip("the key stepped down before the guard ran; the database path was not exercised")
				}
				require.ErrorIs(t, err, casleader.ErrNotLeader)
				require.ErrorIs(t, err, store.ErrFenced, "the database refused the token")
			})
		})
	}
}
