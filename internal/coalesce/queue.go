package coalesce

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/casleader/casleader/store"
)

// call is one caller's single-key call waiting in a queue.
type call struct {
	ctx  context.Context
	in   any
	key  string    // what no batch holds twice; "" for calls that never conflict (reads, a prune)
	due  time.Time // the latest instant it is sent, whether a token is free or not
	out  any
	err  error
	done chan struct{} // closed when out and err are set

	// Under the queue's mu:
	batch []*call       // set when this caller is to send batch
	run   chan struct{} // closed when batch is set
	gone  bool          // the caller stopped waiting before its call was sent
}

// queue gathers the calls of one kind (one statement shape: one op, one ID, ...)
// and sends them as batches: at once while its limiter has tokens, else when the
// oldest call is due, or when a batch is full. A batch never holds a key twice.
// Each batch is sent by the goroutine of one of its callers, the one that waits
// longest (by its context's deadline), so that no statement outlives the calls
// of those who sent it.
type queue struct {
	one  func(ctx context.Context, in any) (any, error)
	many func(ctx context.Context, ins []any, outs []any, errs []error)
	lim  *rate.Limiter

	mu      sync.Mutex
	pending []*call
	due     time.Time // the earliest due of pending
	timer   *time.Timer
	at      time.Time // when timer fires; zero when it is not set
}

// newQueue returns a queue that sends a batch of one with one, larger ones with
// many, at most one batch per wait on average under load (a burst of four at once).
func newQueue(wait time.Duration, one func(context.Context, any) (any, error), many func(context.Context, []any, []any, []error)) *queue {
	return &queue{one: one, many: many, lim: rate.NewLimiter(rate.Every(wait), 4)}
}

// do sends in (of key) in the next batch, at the latest after wait, and returns
// its outcome, or an [store.ErrTransient] error when ctx ends first (a write may
// then still commit, as with any statement cancelled in flight).
func (q *queue) do(ctx context.Context, key string, in any, wait time.Duration) (any, error) {
	now := time.Now()
	c := &call{ctx: ctx, in: in, key: key, due: now.Add(wait), done: make(chan struct{}), run: make(chan struct{})}
	q.mu.Lock()
	q.pending = append(q.pending, c)
	if len(q.pending) == 1 || c.due.Before(q.due) {
		q.due = c.due
	}
	q.schedule(now)
	q.mu.Unlock()
	select {
	case <-c.done:
		return c.out, c.err
	case <-c.run:
		q.send(c.batch)
		return c.out, c.err
	case <-ctx.Done():
	}
	q.mu.Lock()
	c.gone = c.batch == nil
	q.mu.Unlock()
	if !c.gone { // chosen to send its batch as ctx ended: the others wait for it
		q.send(c.batch)
		return c.out, c.err
	}
	return nil, fmt.Errorf("%w: %w", store.ErrTransient, ctx.Err())
}

// schedule sends a batch now if one is full, a token is free or a call is due,
// and sets the timer for the next instant one of these can change. q.mu is held.
func (q *queue) schedule(now time.Time) {
	for len(q.pending) > 0 {
		due := q.due
		tokens := q.lim.TokensAt(now)
		if len(q.pending) < store.MaxBatch && now.Before(due) && tokens < 1 {
			q.arm(now.Add(min(due.Sub(now), untilToken(q.lim, now))))
			return
		}
		q.lim.AllowN(now, 1) // takes the token when there is one: a due or full batch goes without
		if batch := q.take(); len(batch) > 0 {
			r := runner(batch)
			r.batch = batch
			close(r.run)
		}
	}
}

// untilToken returns how long from now until lim has a whole token: never zero,
// and at that instant the token is there. Computed in floating point alone, the
// time rounds down (a token of 0.9999999 is a few nanoseconds short, truncated
// to none), and a timer re-armed for now fires at once without time passing.
func untilToken(lim *rate.Limiter, now time.Time) time.Duration {
	short := 1 - lim.TokensAt(now)
	d := max(time.Duration(math.Ceil(short/float64(lim.Limit())*float64(time.Second))), 1)
	for lim.TokensAt(now.Add(d)) < 1 {
		d *= 2
	}
	return d
}

// arm sets the timer to fire at at, unless it fires earlier already.
func (q *queue) arm(at time.Time) {
	if !q.at.IsZero() && !at.Before(q.at) {
		return
	}
	q.at = at
	d := time.Until(at)
	if q.timer == nil {
		q.timer = time.AfterFunc(d, q.fire)
		return
	}
	q.timer.Reset(d)
}

func (q *queue) fire() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.at = time.Time{}
	q.schedule(time.Now())
}

// take removes from pending the next batch: the calls still wanted, at most one
// per key, at most store.MaxBatch. The others stay for the next batch. q.mu is held.
func (q *queue) take() []*call {
	var batch, rest []*call
	seen := map[string]bool{}
	for _, c := range q.pending {
		switch {
		case c.gone:
		case len(batch) == store.MaxBatch || (c.key != "" && seen[c.key]):
			rest = append(rest, c)
		default:
			if c.key != "" {
				seen[c.key] = true
			}
			batch = append(batch, c)
		}
	}
	q.pending = rest
	q.due = time.Time{}
	for _, c := range rest {
		if q.due.IsZero() || c.due.Before(q.due) {
			q.due = c.due
		}
	}
	return batch
}

// runner returns the call of batch whose caller will wait longest: the latest
// deadline, or none.
func runner(batch []*call) *call {
	r := batch[0]
	for _, c := range batch[1:] {
		rd, rok := r.ctx.Deadline()
		cd, cok := c.ctx.Deadline()
		if rok && (!cok || cd.After(rd)) {
			r = c
		}
	}
	return r
}

// send sends batch and hands each call its outcome. A batch of one is sent as
// the single-key call under its caller's context; a larger one as one batched
// call, under a context that ends when every caller has stopped waiting.
func (q *queue) send(batch []*call) {
	if len(batch) == 1 {
		c := batch[0]
		c.out, c.err = q.one(c.ctx, c.in)
		close(c.done)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waiting atomic.Int64
	waiting.Store(int64(len(batch)))
	ins := make([]any, len(batch))
	for i, c := range batch {
		ins[i] = c.in
		stop := context.AfterFunc(c.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	outs, errs := make([]any, len(batch)), make([]error, len(batch))
	q.many(ctx, ins, outs, errs)
	for i, c := range batch {
		c.out, c.err = outs[i], errs[i]
		close(c.done)
	}
}
