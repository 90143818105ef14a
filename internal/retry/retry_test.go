package retry

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestBackoffDoublesUpToTheLimitWithJitter(t *testing.T) {
	t.Parallel()
	const base, limit = 10 * time.Millisecond, time.Second
	for attempt := 1; attempt <= 40; attempt++ {
		full := min(base<<min(attempt-1, 30), limit)
		for range 50 {
			d := Backoff(attempt, base, limit)
			if d < full/2 || d > full {
				t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, d, full/2, full)
			}
		}
	}
	if d := Backoff(0, base, limit); d < base/2 || d > base {
		t.Errorf("attempt 0: %v, want the first attempt's wait", d)
	}
	if d := Backoff(5, base, 0); d < base/2 || d > base {
		t.Errorf("a limit below base: %v, want base", d)
	}
}

func TestLimiterLetsOneLinePerIntervalThrough(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var l Limiter
		if ok, n := l.Allow(); !ok || n != 0 {
			t.Fatalf("first line: %v, %d", ok, n)
		}
		for range 5 {
			time.Sleep(LogEvery / 10)
			if ok, _ := l.Allow(); ok {
				t.Fatal("a second line within LogEvery went through")
			}
		}
		time.Sleep(LogEvery)
		if ok, n := l.Allow(); !ok || n != 5 {
			t.Fatalf("after LogEvery: %v, %d held back, want true, 5", ok, n)
		}
		l.Reset()
		if ok, n := l.Allow(); !ok || n != 0 {
			t.Fatalf("after Reset: %v, %d", ok, n)
		}
	})
}

func TestRenewalStaysWithinHalfTheInterval(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	for attempt := 1; attempt < 40; attempt++ {
		d := Renewal(attempt, interval)
		if d <= 0 || d > interval/2 {
			t.Fatalf("attempt %d: %v outside (0, %v]", attempt, d, interval/2)
		}
	}
	if d := Renewal(1, 0); d <= 0 || d > time.Millisecond {
		t.Errorf("no interval: %v, want at most 1ms", d)
	}
}
