// Package term is the handle on one term of leadership that a leader's callback
// gets from its context: the term's fencing token, whether it still holds, a guard
// that fences the callback's own database transaction with that token, and a
// non-blocking resign. The single-key casleader.Elector and the keys of a
// Group hand out the same [Term] (casleader.Term is this type, and
// casleader.TermFrom is [From]), so leader code is written once for both.
//
// Everything a Term does is scoped to its term: once the term has ended, Resign
// does nothing and the guards refuse, even if the same candidate leads the same key
// again in a later term.
package term

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/casleader/casleader/store"
)

// ErrNotLeader is returned by a term's Resign and guards once the term has ended,
// and by a guard whose row shows a newer term, a released or expired lease (then
// the error also matches [store.ErrFenced]). It is casleader.ErrNotLeader.
var ErrNotLeader = errors.New("casleader: not the leader")

// Config describes a term to [New].
type Config struct {
	Key, ID string
	Token   int64         // the term's fencing token
	Lease   time.Duration // the election's lease duration
	// Trust is the cell that the executor publishes the key's leadership in; the
	// term holds while it shows Token and its deadline has not passed.
	Trust *Trust
	// Store is the election's store: its Guard runs [Term.Guard], and the
	// dialect packages' guards reach it through [Term.Fence].
	Store store.Driver
	// Resign asks the executor to end this term; it must not block. nil: the term
	// cannot be resigned through the handle (Resign returns an error).
	Resign func()
}

// Term is one term of leadership of one key. Its methods are safe for concurrent
// use and never block on the executor that runs the election.
type Term struct {
	c Config
}

// New returns the handle on the term that c describes.
func New(c Config) *Term { return &Term{c: c} }

type ctxKey struct{}

// With returns a context that carries t, for the leader's callback.
func With(ctx context.Context, t *Term) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// From returns the term of the leadership context ctx handed to a leader's
// callback (or a context derived from it), or nil when ctx is not one.
func From(ctx context.Context) *Term {
	t, _ := ctx.Value(ctxKey{}).(*Term)
	return t
}

// Of reports whether t is a term published through trust: the executor that owns
// trust uses it to recognise its own terms.
func (t *Term) Of(trust *Trust) bool { return t.c.Trust == trust }

// Key returns the election key of the term.
func (t *Term) Key() string { return t.c.Key }

// Token returns the term's fencing token, whether or not the term still holds.
func (t *Term) Token() int64 { return t.c.Token }

// IsLeader reports whether the candidate leads the key now, in this term. Like the
// executors' IsLeader it compares the monotonic clock with the trust deadline on
// every call.
func (t *Term) IsLeader() bool { return t.c.Token != 0 && t.c.Trust.Token() == t.c.Token }

// Resign asks for this term to end, "I am done, step down", and returns at once:
// it does not wait for the leader's callback, which may be its caller. The
// executor stops acting (the term's context is cancelled), waits for the callback
// to return (at most its DrainTimeout), releases the row and stays out of the
// key's election for one lease duration. Resign returns an error matching
// [ErrNotLeader] when this term has already ended; it can never end a later term.
func (t *Term) Resign() error {
	if !t.IsLeader() {
		return t.Ended("resign")
	}
	if t.c.Resign == nil {
		return fmt.Errorf("casleader: resign %q: this term handle cannot resign; resign through the elector or group that leads the key", t.c.Key)
	}
	t.c.Resign()
	return nil
}

// Ended returns the error, matching [ErrNotLeader], of operation op asked of this
// term after it ended.
func (t *Term) Ended(op string) error {
	return fmt.Errorf("%w: %s %q: term %d of %q has ended", ErrNotLeader, op, t.c.Key, t.c.Token, t.c.ID)
}

// Guard fences a write of the leader: it verifies, inside tx, that the term's
// token is still the term of the candidate's unexpired lease, and holds a shared
// lock on the election row until tx ends, so that no other candidate can win the
// election before tx has committed or rolled back. It returns nil when the token
// holds the lease; an error matching [ErrNotLeader] when the term has ended (checked
// locally first, without I/O) or the row says otherwise (then it also matches
// [store.ErrFenced]); any other error means the check could not be made. In every
// case but nil, roll tx back and do not write. See casleader.Elector.Guard for the
// rules of use (first in the transaction, short transactions, the same database).
func (t *Term) Guard(ctx context.Context, tx *sql.Tx) error {
	if err := t.current(); err != nil {
		return err
	}
	if t.c.Store == nil {
		return fmt.Errorf("casleader: guard %q: the term has no store", t.c.Key)
	}
	return guardError(t.c.Store.Guard(ctx, tx, t.c.Key, t.c.ID, t.c.Token, t.c.Lease))
}

// Fence returns this term's fence, for the guards of the dialect packages:
// postgres.Guard(ctx, term, tx) fences a pgx transaction as [Term.Guard] fences a
// database/sql one, with the same local check first and the same errors. On a nil
// term (a context that is not a leadership context) every guard returns an error
// matching [ErrNotLeader].
func (t *Term) Fence() store.Fence {
	if t == nil {
		return store.Fence{Trust: func() error {
			return fmt.Errorf("%w: guard: no term: the context is not a leadership context (use the one the leader's callback gets)", ErrNotLeader)
		}}
	}
	return store.Fence{
		Key: t.c.Key, ID: t.c.ID, Token: t.c.Token, Lease: t.c.Lease, Store: t.c.Store,
		Trust: t.current, Fenced: guardError,
	}
}

// current checks locally that the candidate leads now, in this term.
func (t *Term) current() error {
	if cur := t.c.Trust.Token(); cur == 0 || cur != t.c.Token {
		return fmt.Errorf("%w: guard %q: token %d is not the current term of %q (current: %d, 0 when not leading)",
			ErrNotLeader, t.c.Key, t.c.Token, t.c.ID, cur)
	}
	return nil
}

func guardError(err error) error {
	if errors.Is(err, store.ErrFenced) {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return err
}
