// Package detector is the follower's silence detection.
//
// A follower reads the row and the database's current time in one statement and
// learns how long the observed lease has left by the database clock. There is no need
// to read again before then, unless woken (a release or handover notification): the
// detector sleeps until the lease can expire, capped by the poll interval, with a
// little jitter so that a herd does not read in lockstep. It never compares a client
// clock with a stored time.
package detector

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
)

// Watch is one follower's watch of one election row: what [Watch.Run] reads and
// how often.
type Watch struct {
	// Store reads the row and the database's view of its age.
	Store interface {
		Observe(ctx context.Context, key string) (rec store.Record, found bool, err error)
	}
	Key     string
	Poll    time.Duration // longest time between two reads
	Timeout time.Duration // timeout of one read
	// Heartbeat is the leader's renewal interval: where the database has several
	// clocks (Galera), half of the reads of a lease that would wait more than a
	// heartbeat (Poll, or until the lease can expire) are timed to follow a renewal
	// instead ([timing.ReadAfterRenewal]), which keeps the follower's view of the term
	// fresh. Zero: no read is timed so.
	Heartbeat time.Duration
	// Logger receives the watch's lines, which carry no key of their own: the
	// caller's logger names it (the elector's has key and id). nil means discard.
	Logger *slog.Logger
	// Woken, when not nil, is called when a value on wake ends a sleep; if it
	// returns stop, Run returns at once an Observation with Woken set, without
	// reading the row. Otherwise the row is read after wait (at once when 0), or
	// when the read was due if that is sooner; a value on wake meanwhile calls
	// Woken again.
	Woken func() (stop bool, wait time.Duration)
}

// Observation is one read of the row.
type Observation struct {
	store.Record
	Found bool      // false when the row does not exist
	Sent  time.Time // when the read was sent (monotonic)
	// Woken: no read was made; Watch.Woken ended the watch. The other fields are
	// zero.
	Woken bool
}

// Run reads the row until decide says stop, and returns that observation. decide
// gets every observation and returns how long the lease it shows can still live
// (the detector sleeps that long, capped by Poll, plus jitter) or stop. A value on
// wake ends a sleep early. Transient errors and invalid rows are logged and retried
// with backoff; a deployment error (missing table or privilege) is returned, and so
// is the context's error.
func (w *Watch) Run(ctx context.Context, wake <-chan struct{},
	decide func(Observation) (wait time.Duration, stop bool)) (Observation, error) {
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	failures := 0
	var lim retry.Limiter // a row that stays invalid is reported once per retry.LogEvery
	for {
		if err := ctx.Err(); err != nil {
			return Observation{}, err
		}
		obs, err := w.read(ctx)
		var wait time.Duration
		switch {
		case err == nil:
			failures = 0
			var stop bool
			if wait, stop = decide(obs); stop {
				return obs, nil
			}
			if wait = min(wait, w.Poll); rand.N(2) == 0 {
				wait = timing.ReadAfterRenewal(obs.Record, obs.Found, w.Heartbeat, wait)
			}
			wait += jitter(w.Poll)
		case ctx.Err() != nil:
			return Observation{}, ctx.Err()
		case errors.Is(err, store.ErrDeployment):
			return Observation{}, err
		default:
			failures++
			wait = backoff(failures, w.Poll)
			level := slog.LevelWarn
			if errors.Is(err, store.ErrInvalidRow) {
				level = slog.LevelError
			}
			if ok, held := lim.Allow(); ok {
				log.Log(ctx, level, "casleader: reading the election row failed, retrying",
					"error", err, "attempt", failures, "retry_in", wait, "failures_not_logged", held)
			}
		}
		if stop, err := sleep(ctx, timer, wait, wake, w.Woken); stop || err != nil {
			return Observation{Woken: stop}, err
		}
	}
}

// sleep waits wait on timer, or less when a value on wake ends the sleep (see
// Watch.Woken). It returns stop when woken ends the watch, or the context's error.
func sleep(ctx context.Context, timer *time.Timer, wait time.Duration, wake <-chan struct{},
	woken func() (stop bool, wait time.Duration)) (stop bool, err error) {
	timer.Reset(wait)
	due := time.Now().Add(wait)
	for slept := false; !slept; {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timer.C:
			slept = true
		case <-wake:
			timer.Stop() // since Go 1.23 no stale tick can be received after Stop
			slept = true
			if woken == nil {
				break
			}
			stop, later := woken()
			if stop {
				return true, nil
			}
			// A read asked for a little later, and never later than it was due.
			if later = min(later, time.Until(due)); later > 0 {
				timer.Reset(later)
				slept = false
			}
		}
	}
	return false, nil
}

func (w *Watch) read(ctx context.Context) (Observation, error) {
	rctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	sent := time.Now()
	rec, found, err := w.Store.Observe(rctx, w.Key)
	return Observation{Record: rec, Found: found, Sent: sent}, err
}

// jitter spreads followers that would otherwise read in lockstep: up to 1/20 of
// the poll interval, at most 2 ms. It is added to every sleep, including the one that
// ends when the observed lease expires, so it is kept small: it adds directly to the
// crash-failover time (the first of n followers to wake wins, on average after
// 2 ms/(n+1)). A herd that wakes together costs the database one read and one losing
// compare-and-set per follower, once per term: single-row statements that neither
// deadlock nor fail serialization.
func jitter(poll time.Duration) time.Duration {
	return rand.N(min(poll/20, 2*time.Millisecond) + 1)
}

// backoff after failure number n: exponential from 50 ms, capped at the poll interval.
func backoff(n int, poll time.Duration) time.Duration {
	return retry.Backoff(n, 50*time.Millisecond, poll)
}
