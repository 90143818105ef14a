package casleader

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/casleader/casleader/store"
)

// Term is one term of leadership of an [Elector]: the handle that the leader's
// callback gets from its context with [TermFrom]. Everything it does is scoped to
// that term: once the term has ended, its Resign does nothing and its guards
// refuse, even if the same elector leads again in a later term. Its methods are
// safe for concurrent use and never block on the elector.
type Term struct {
	e     *Elector
	token int64
}

type termKey struct{}

// TermFrom returns the term of the leadership context ctx handed to
// OnStartedLeading (or a context derived from it), or nil when ctx is not one.
//
//	OnStartedLeading: func(ctx context.Context, token int64) {
//		term := casleader.TermFrom(ctx)
//		if err := doTheWork(ctx, term); err != nil {
//			term.Resign() // step down; this callback then returns
//			return
//		}
//	}
func TermFrom(ctx context.Context) *Term {
	t, _ := ctx.Value(termKey{}).(*Term)
	return t
}

// Token returns the term's fencing token, whether or not the term still holds.
func (t *Term) Token() int64 { return t.token }

// IsLeader reports whether the elector leads now, in this term.
func (t *Term) IsLeader() bool { return t.e.Token() == t.token }

// Resign asks the elector to end this term, "I am done, step down", and returns
// at once: it does not wait for the leader's callback, which may be its caller.
// The elector stops acting (the term's context is cancelled), waits for
// OnStartedLeading to return (at most DrainTimeout), releases the row and stays
// out of elections for LeaseDuration, as [Elector.Resign] does. Resign returns an
// error matching [ErrNotLeader] when this term has already ended; it can never end
// a later term.
func (t *Term) Resign() error {
	if !t.IsLeader() {
		return t.ended("resign")
	}
	t.e.post(request{term: t.token, cooldown: t.e.cfg.LeaseDuration})
	return nil
}

// Guard is [Elector.Guard] with this term's token.
func (t *Term) Guard(ctx context.Context, tx *sql.Tx) error {
	return t.e.Guard(ctx, tx, t.token)
}

// Fence returns this term's fence, for the guards of the dialect packages:
// postgres.Guard(ctx, term, tx) fences a pgx transaction as [Term.Guard] fences a
// database/sql one. On a nil term (a context that is not a leadership context)
// every guard returns an error matching [ErrNotLeader].
func (t *Term) Fence() store.Fence {
	if t == nil {
		return store.Fence{Trust: func() error {
			return fmt.Errorf("%w: guard: no term: the context is not a leadership context (use the one OnStartedLeading gets)", ErrNotLeader)
		}}
	}
	return t.e.Fence(t.token)
}

func (t *Term) ended(op string) error {
	return fmt.Errorf("%w: %s %q: term %d of %q has ended", ErrNotLeader, op, t.e.cfg.Key, t.token, t.e.cfg.ID)
}
