package store

import (
	"errors"
	"time"
)

// ErrFenced is returned by the guards of the stores when the fencing token no
// longer holds the lease: another candidate won a newer term, the lease was
// released or has expired by the database clock, or the row is missing or was
// rolled back. The caller must roll its transaction back and must not act as leader.
var ErrFenced = errors.New("store: fenced: the token does not hold the lease")

// Fence is a term to fence a write with: what a guard checks inside the caller's
// transaction. A leader's term gives it (casleader's Term.Fence and
// Elector.Fence), and the guards of the dialect packages take it, for instance
// postgres.Guard for a pgx transaction.
type Fence struct {
	// Key is the election key and ID the candidate that leads it.
	Key, ID string
	// Token is the term (fencing token) the write belongs to.
	Token int64
	// Lease is the lease duration the row's age is judged with.
	Lease time.Duration
	// Store is the election's store, whose Guard runs the guard's statements.
	Store Driver
	// Trust, when set, checks locally, without I/O, that the holder still leads in
	// Token: a non-nil error is returned as it is and nothing is sent.
	Trust func() error
	// Fenced, when set, wraps an error matching [ErrFenced] (the row says the token
	// does not hold the lease), for instance so that it also matches the holder's
	// own not-leader error.
	Fenced func(error) error
}

// Fencer gives the fence of a term. [Fence] is one itself.
type Fencer interface {
	Fence() Fence
}

// Fence returns f.
func (f Fence) Fence() Fence { return f }

// Run runs guard with f's key, ID, token and lease, after f's local trust check,
// and wraps an [ErrFenced] result as f asks. A guard of a dialect package calls it.
func (f Fence) Run(guard func(key, id string, token int64, lease time.Duration) error) error {
	if f.Trust != nil {
		if err := f.Trust(); err != nil {
			return err
		}
	}
	err := guard(f.Key, f.ID, f.Token, f.Lease)
	if f.Fenced != nil && errors.Is(err, ErrFenced) {
		return f.Fenced(err)
	}
	return err
}
