// Package retry holds the one backoff rule and the one log rate limit shared by the
// loops that retry statements: the leader's renewals (heartbeat), the follower's
// reads (detector), and the election writes of the elector and of groups.
//
// A statement that keeps failing is retried after waits that double from a small
// base up to a cap (the heartbeat or poll interval), with jitter so that candidates
// do not retry in lockstep. Nothing that fails repeatedly is retried in a tight loop,
// and its log line is written at most once per [LogEvery].
package retry

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff returns the wait before retry number attempt (1-based): base doubled per
// attempt, capped at limit (at least base), with full jitter in the upper half.
func Backoff(attempt int, base, limit time.Duration) time.Duration {
	attempt = max(attempt, 1)
	d := min(base<<min(attempt-1, 30), max(limit, base))
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// Renewal returns the wait before retry number attempt (1-based) of a renewal, or
// of the read that settles one, on a heartbeat interval of interval: exponential
// from 10 ms, capped at interval/2, with full jitter in the upper half.
func Renewal(attempt int, interval time.Duration) time.Duration {
	limit := max(interval/2, time.Millisecond)
	return Backoff(attempt, min(10*time.Millisecond, limit), limit)
}

// LogEvery is the shortest time between two log lines of one [Limiter].
const LogEvery = 10 * time.Second

// Limiter lets a log line that can repeat through at most once per [LogEvery]. The
// zero value is ready to use; it is safe for concurrent use.
type Limiter struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// Allow reports whether a line may be written now, and how many were held back
// since the last one written.
func (l *Limiter) Allow() (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < LogEvery {
		l.suppressed++
		return false, 0
	}
	l.last, suppressed, l.suppressed = now, l.suppressed, 0
	return true, suppressed
}

// Reset makes the next line go through at once: call it when the failure has ended,
// so that the next one is reported.
func (l *Limiter) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last, l.suppressed = time.Time{}, 0
}

// Sleep waits d, or until ctx ends; it returns ctx's error in that case.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
