// Package heartbeat is the leader's renewal loop.
//
// One renewal is one round trip: a compare-and-set that bumps the row's version and
// rewrites tick_time with the database clock. Each statement's timeout is what is left
// of the trust deadline, so a hung request can never stretch leadership. A renewal
// that errors may or may not have committed; it is retried from the same version with
// jittered backoff, and if it had committed the retry loses its compare-and-set, which
// the caller settles with one read. The loop ends when a renewal loses, when the trust
// deadline passes, when the context ends, or on a deployment error.
package heartbeat

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/store"
)

// Loop is the renewal loop of one leader's term: what [Loop.Run] renews and how
// often.
type Loop struct {
	// Store sends one renewal: a compare-and-set from version for leader id.
	Store interface {
		Renew(ctx context.Context, key, id string, version int64) (swapped bool, err error)
	}
	Key      string
	ID       string
	Interval time.Duration // time between the send times of two renewals
	// Logger receives the loop's lines, which carry no key or id of their own: the
	// caller's logger names them (the elector's has key and id). nil means discard.
	Logger *slog.Logger
	// Renewed is called after each successful renewal with the new version and the
	// renewal's send time, and returns the new trust deadline (a time already
	// passed ends the loop: Expired). nil keeps the deadline.
	Renewed func(version int64, sent time.Time) time.Time
}

// Outcome says why [Loop.Run] returned.
type Outcome uint8

// The outcomes.
const (
	Stopped Outcome = iota + 1 // the context ended
	Lost                       // a renewal lost its compare-and-set: settle with one read
	Expired                    // the trust deadline passed without a successful renewal
	Failed                     // a deployment error: the error says what to fix
)

func (o Outcome) String() string {
	return [...]string{"invalid", "stopped", "lost", "expired", "failed"}[min(int(o), 4)]
}

// Run renews the lease from version, one renewal every l.Interval after last (the
// send time of the last successful write), until the trust deadline passes or
// another outcome ends it (see [Loop.Renewed]). It returns the outcome, the last
// version this leader wrote or adopted, and the last renewal error, if any
// (Failed: the deployment error).
func (l *Loop) Run(ctx context.Context, version int64, last, deadline time.Time) (Outcome, int64, error) {
	log := l.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	next := last.Add(l.Interval)
	var lastErr error
	failures := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		now := time.Now()
		if !now.Before(deadline) {
			return Expired, version, lastErr
		}
		wake := next
		if deadline.Before(wake) {
			wake = deadline
		}
		if wait := wake.Sub(now); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return Stopped, version, nil
			case <-timer.C:
			}
			continue
		}
		if ctx.Err() != nil {
			return Stopped, version, nil
		}
		sent, took, ok, err := l.renew(ctx, version, deadline)
		switch {
		case err == nil && ok:
			version++
			if l.Renewed != nil {
				deadline = l.Renewed(version, sent)
			}
			next = sent.Add(l.Interval)
			failures, lastErr = 0, nil
			log.Debug("casleader: renewed", "version", version, "took", took)
		case err == nil:
			return Lost, version, nil
		case errors.Is(err, store.ErrDeployment):
			return Failed, version, err
		case ctx.Err() != nil:
			return Stopped, version, err
		default:
			failures++
			lastErr = err
			backoff := retry.Renewal(failures, l.Interval)
			log.Warn("casleader: renewal failed, retrying", "version", version,
				"error", err, "attempt", failures, "retry_in", backoff, "trust_left", time.Until(deadline))
			next = time.Now().Add(backoff)
		}
	}
}

// renew sends one renewal from version and returns its send time, how long it took
// and its outcome.
func (l *Loop) renew(ctx context.Context, version int64, deadline time.Time) (
	sent time.Time, took time.Duration, ok bool, err error) {
	sent = time.Now()
	// The statement is not interrupted by ctx (a resign, a pause, Run's end): an
	// interrupted renewal may still commit, and the release that follows would
	// then lose its compare-and-set. It is bounded by the trust deadline instead.
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	ok, err = l.Store.Renew(rctx, l.Key, l.ID, version)
	cancel()
	return sent, time.Since(sent), ok, err
}
