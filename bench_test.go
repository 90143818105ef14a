package casleader_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// BenchmarkIsLeader measures IsLeader while leading: it compares the monotonic clock
// with the trust deadline on every call (target: < 50 ns, 0 allocations).
func BenchmarkIsLeader(b *testing.B) {
	c := cfg("a")
	// A lease long enough that the benchmark runs inside one trust window.
	c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval = time.Hour, 50*time.Minute, time.Minute
	el, err := casleader.New(memstore.New(), c)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	go func() { _ = el.Run(ctx) }()
	for !el.IsLeader() {
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		if el.IsLeader() {
			n++
		}
	}
	b.StopTimer()
	if n != b.N {
		b.Fatalf("IsLeader was false %d times of %d", b.N-n, b.N)
	}
}

// BenchmarkToken measures Token while leading.
func BenchmarkToken(b *testing.B) {
	c := cfg("a")
	c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval = time.Hour, 50*time.Minute, time.Minute
	el, err := casleader.New(memstore.New(), c)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = el.Run(b.Context()) }()
	for !el.IsLeader() {
		time.Sleep(time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		if el.Token() == 0 {
			b.Fatal("Token is 0 while leading")
		}
	}
}

// TestIsLeaderDoesNotAllocate keeps the benchmark's 0-allocation result from
// regressing silently (allocation counts, unlike timings, are deterministic).
func TestIsLeaderDoesNotAllocate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		el, err := casleader.New(memstore.New(), cfg("a"))
		if err != nil {
			t.Fatal(err)
		}
		stop := running(t, el)
		time.Sleep(time.Millisecond)
		if !el.IsLeader() {
			t.Fatal("not leading")
		}
		if n := testing.AllocsPerRun(100, func() { _ = el.IsLeader() }); n != 0 {
			t.Errorf("IsLeader allocates %v times per call", n)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}
