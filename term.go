package casleader

import (
	"context"

	"github.com/casleader/casleader/internal/term"
	"github.com/casleader/casleader/store"
)

// Term is one term of leadership: the handle that the leader's callback gets from
// its context with [TermFrom], for an [Elector] and for a key of a Group
// alike (both hand out this one type). Everything it does is scoped to that term: once the
// term has ended, its Resign does nothing and its guards refuse, even if the same
// candidate leads again in a later term. Its methods are safe for concurrent use
// and never block on the elector.
//
// Its Resign asks the elector to end this term, "I am done, step down", and
// returns at once: the elector stops acting (the term's context is cancelled),
// waits for OnStartedLeading to return (at most DrainTimeout), releases the row and
// stays out of elections for LeaseDuration, as [Elector.Resign] does. Its Guard is
// [Elector.Guard] with the term's token, and its Fence is what the guards of the
// dialect packages take (postgres.Guard fences a pgx transaction with it).
type Term = term.Term

// TermFrom returns the term of the leadership context ctx handed to
// OnStartedLeading (or a context derived from it), or nil when ctx is not one.
// A group key's leadership context carries its term the same way.
//
//	OnStartedLeading: func(ctx context.Context, token int64) {
//		term := casleader.TermFrom(ctx)
//		if err := doTheWork(ctx, term); err != nil {
//			term.Resign() // step down; this callback then returns
//			return
//		}
//	}
func TermFrom(ctx context.Context) *Term { return term.From(ctx) }

// term returns the handle on the term of token of this elector.
func (e *Elector) term(token int64) *Term { return e.g.term(e.cfg.Key, token, e.sh) }

// term returns the handle on the term token of key, whose shared state is sh.
func (g *Group) term(key string, token int64, sh *shared) *Term {
	return term.New(term.Config{
		Key: key, ID: g.cfg.ID, Token: token, Lease: g.cfg.LeaseDuration,
		Trust: &sh.trust, Store: g.st,
		Resign: func() { g.resignTerm(key, token) },
	})
}

// Fence returns the fence of this elector's term token, for the guards of the
// dialect packages (postgres.Guard fences a pgx transaction with it): they run
// the same checks as [Elector.Guard], locally first and then in the row, and
// return the same errors.
func (e *Elector) Fence(token int64) store.Fence { return e.term(token).Fence() }
