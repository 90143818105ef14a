package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/casleader/casleader/store"
)

// Faults are the fault hooks of an election store: [Store] has them, and a
// decorator of another store (a real database's) can have them too by calling
// [Faults.Before] at the start of each of its calls. The zero value has no fault
// set. Its methods are safe for concurrent use.
type Faults struct {
	mu    sync.Mutex
	next  map[string][]fault // one-shot faults, in order, per operation
	fail  map[string]error   // persistent failures per operation
	delay map[string]time.Duration
	calls map[string]int
}

type fault struct {
	err    error
	commit bool // apply the write, then return err
}

// FailNext makes the next call of op (or of any operation, for [AnyOp]) return err
// without touching the table, as when a request never reaches the database. Calls
// queue: two FailNext make the next two calls fail.
func (f *Faults) FailNext(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		f.next = map[string][]fault{}
	}
	f.next[op] = append(f.next[op], fault{err: err})
}

// CommitThenFail makes the next call of op (or of any operation, for [AnyOp]) apply
// its write and then return err and swapped == false: an ambiguous commit, as when
// the connection drops before the reply.
func (f *Faults) CommitThenFail(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		f.next = map[string][]fault{}
	}
	f.next[op] = append(f.next[op], fault{err: err, commit: true})
}

// Fail makes every call of op (or of every operation, for [AnyOp]) return err without
// touching the table, until Fail(op, nil): a database that is unreachable or down.
// While it lasts, one-shot faults of op stay queued.
func (f *Faults) Fail(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		f.fail = map[string]error{}
	}
	if err == nil {
		delete(f.fail, op)
	} else {
		f.fail[op] = err
	}
}

// SetDelay makes every call of op (or of every operation, for [AnyOp]) wait d before
// it reaches the table; zero removes the delay. A call whose context ends during the
// wait returns an [store.ErrTransient] error and writes nothing.
func (f *Faults) SetDelay(op string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.delay == nil {
		f.delay = map[string]time.Duration{}
	}
	f.delay[op] = d
}

// Calls returns how many calls of op (or of all operations, for [AnyOp]) were made,
// including those that failed.
func (f *Faults) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if op != AnyOp {
		return f.calls[op]
	}
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

// Before runs the hooks for one call of op: it counts the call, waits the delay
// set for op, and returns what the call must do. A non-nil now is the error to
// return at once, without touching the table (a failure set with Fail or FailNext,
// or the context's end as an [store.ErrTransient] error). Otherwise the call goes
// on, and a non-nil after is the error to return once its write has been applied
// (CommitThenFail).
func (f *Faults) Before(ctx context.Context, op string) (now, after error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	delay := max(f.delay[op], f.delay[AnyOp])
	failure := f.fail[op]
	if failure == nil {
		failure = f.fail[AnyOp]
	}
	var next fault
	if failure == nil {
		next = f.pop(op)
	}
	f.mu.Unlock()

	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", store.ErrTransient, ctx.Err()), nil
	case failure != nil:
		return failure, nil
	case next.err != nil && !next.commit:
		return next.err, nil
	}
	return nil, next.err
}

// pop removes and returns the next one-shot fault for op. The caller holds f.mu.
func (f *Faults) pop(op string) fault {
	for _, k := range []string{op, AnyOp} {
		if q := f.next[k]; len(q) > 0 {
			f.next[k] = q[1:]
			return q[0]
		}
	}
	return fault{}
}
