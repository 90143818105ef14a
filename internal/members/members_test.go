package members_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/members"
	"github.com/casleader/casleader/store"
)

type fake struct {
	mu      sync.Mutex
	fail    error
	puts    []time.Time
	deleted []string
	prunes  int
	// readTakes is how long MembersOf takes.
	readTakes time.Duration
}

func (f *fake) PutMembers(ctx context.Context, ms []store.Member) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts = append(f.puts, time.Now())
	return f.fail
}

func (f *fake) DeleteMembers(ctx context.Context, id string, keys []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, keys...)
	return f.fail
}

func (f *fake) PruneMembers(ctx context.Context, olderThan time.Duration) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prunes++
	return 0, f.fail
}

// MembersOf reads nothing (these tests run no preferred-leader rule), in
// f.readTakes.
func (f *fake) MembersOf(context.Context, []string, time.Duration) ([]store.Member, error) {
	time.Sleep(f.readTakes)
	return nil, nil
}

var _ members.Store = (*fake)(nil)

func snapshot() []store.Member {
	return []store.Member{{Key: "a", ID: "me", Role: members.RoleFollower}, {Key: "b", ID: "me", Role: members.RoleLeader}}
}

func TestRunWritesEveryLeaseAndDeletesOnCleanStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 10 * time.Second
		f := &fake{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(done)
			members.Run(ctx, members.Config{Store: f, ID: "me", Lease: lease, Snapshot: snapshot, Logger: slog.New(slog.DiscardHandler)})
		}()
		time.Sleep(150 * lease) // 150 periods
		synctest.Wait()
		cancel()
		<-done
		require.Len(t, f.puts, 151, "one write at once, then one per period")
		for i, p := range f.puts {
			assert.Equal(t, time.Duration(i)*lease, p.Sub(start), "write %d", i)
		}
		assert.Equal(t, []string{"a", "b"}, f.deleted, "a clean stop deletes the rows written")
		assert.GreaterOrEqual(t, f.prunes, 3, "one prune per 50 periods")
		assert.LessOrEqual(t, f.prunes, 4, "one prune per 50 periods")
	})
}

// TestBalancedGroupWritesEveryHalfLease: a balanced group's rounds follow its
// writes, which keep their half-lease period.
func TestBalancedGroupWritesEveryHalfLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 10 * time.Second
		f := &fake{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(done)
			members.Run(ctx, members.Config{Store: f, ID: "me", Lease: lease, Snapshot: snapshot, Logger: slog.New(slog.DiscardHandler),
				Anchor: func() string { return "" }, Balance: func(context.Context, []store.Member) error { return nil }})
		}()
		time.Sleep(5 * lease)
		synctest.Wait()
		cancel()
		<-done
		require.Len(t, f.puts, 11, "one write at once, then one per half lease")
		for i, p := range f.puts {
			assert.Equal(t, time.Duration(i)*lease/2, p.Sub(start), "write %d", i)
		}
	})
}

func TestRunKeepsTheRowsWhenAskedToActAsIfDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			members.Run(ctx, members.Config{Store: f, ID: "me", Lease: time.Second, Snapshot: snapshot,
				Keep: true, Logger: slog.New(slog.DiscardHandler)})
		}()
		time.Sleep(2 * time.Second)
		cancel()
		<-done
		assert.NotEmpty(t, f.puts)
		assert.Empty(t, f.deleted)
	})
}

func TestRunWarnsAtMostOncePerTenSecondsAndGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{fail: errors.New("members table missing")}
		var buf bytes.Buffer
		var mu sync.Mutex
		log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			members.Run(ctx, members.Config{Store: f, ID: "me", Lease: time.Second, Snapshot: snapshot, Logger: log})
		}()
		time.Sleep(60 * time.Second) // 60 failed writes
		synctest.Wait()
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		cancel()
		<-done
		assert.Len(t, f.puts, 61, "failures do not stop the writes")
		warns := strings.Count(out, "could not write")
		assert.GreaterOrEqual(t, warns, 6)
		assert.LessOrEqual(t, warns, 7, "one warning per 10 s over 60 s:\n%s", out)
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestSlowReadsDoNotSpaceTheWritesOut: the reads that follow each write (the
// preferred leader's and the balance's) taking most of a period do not delay the
// next write, which comes a period after the last began: readers count a row live
// for only a quarter lease more than the period.
func TestSlowReadsDoNotSpaceTheWritesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 10 * time.Second
		f := &fake{readTakes: lease / 5} // two reads per period: 4/5 of it
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		start := time.Now()
		go func() {
			defer close(done)
			members.Run(ctx, members.Config{Store: f, ID: "me", Lease: lease, Snapshot: snapshot, Logger: slog.New(slog.DiscardHandler),
				Leading: func() map[string]int64 { return map[string]int64{"b": 1} }, Handover: func(string, int64, string) {},
				Anchor: func() string { return "a" }, Balance: func(context.Context, []store.Member) error { return nil }})
		}()
		time.Sleep(5*lease + time.Millisecond)
		synctest.Wait()
		cancel()
		<-done
		require.Len(t, f.puts, 11, "one write at once, then one per period")
		for i, p := range f.puts {
			assert.Equal(t, time.Duration(i)*lease/2, p.Sub(start), "write %d", i)
		}
	})
}

// serverLike is a members table whose writes, like a database server's, execute
// when the server gets to them (release), even when the client has stopped
// waiting (its context ended).
type serverLike struct {
	fake
	release chan struct{}
	rows    map[string]bool
}

func (s *serverLike) PutMembers(ctx context.Context, ms []store.Member) error {
	applied := make(chan struct{})
	go func() {
		<-s.release
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range ms {
			s.rows[m.Key] = true
		}
		close(applied)
	}()
	select {
	case <-applied:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *serverLike) DeleteMembers(ctx context.Context, id string, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.rows, k)
	}
	return nil
}

// TestACleanStopDeletesAfterTheWriteInFlight: a stop during a write waits for
// it, so that its delete comes after the write at the server; a write cancelled
// in flight would execute after the delete and show the stopped candidate for
// two leases.
func TestACleanStopDeletesAfterTheWriteInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &serverLike{release: make(chan struct{}), rows: map[string]bool{}}
		stop := members.Start(t.Context(), members.Config{Store: s, ID: "me", Lease: 10 * time.Second, Snapshot: snapshot, Logger: slog.New(slog.DiscardHandler)})
		synctest.Wait() // the first write is in flight
		stopped := make(chan struct{})
		go func() {
			stop()
			close(stopped)
		}()
		synctest.Wait()
		close(s.release) // the server executes the write
		<-stopped
		synctest.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		assert.Empty(t, s.rows, "the clean stop's delete came after the write")
	})
}
