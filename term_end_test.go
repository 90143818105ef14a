package casleader_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// TestResignAfterADrainThatTimedOutLeavesTheLeaseToExpire: a leader's work that
// ignores its context is still running when DrainTimeout has passed. Releasing the
// row then would let a follower lead beside that work; the lease must instead be
// left to expire by itself, and the resign must say so.
func TestResignAfterADrainThatTimedOutLeavesTheLeaseToExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		stuck := make(chan struct{})
		workDone := make(chan struct{})
		c := cfg("a")
		c.OnStartedLeading = func(context.Context, int64) {
			defer close(workDone)
			<-stuck // ignores its context
		}
		a := newElector(t, st, c)
		stopA := running(t, a)
		synctest.Wait()
		require.True(t, a.IsLeader())
		b := newElector(t, st, cfg("b"))
		stopB := running(t, b)
		synctest.Wait()

		err := a.Resign(t.Context())
		require.ErrorIs(t, err, casleader.ErrNotDrained)
		assert.Contains(t, err.Error(), `"k"`, "the error names the key")
		assert.False(t, a.IsLeader(), "the leader stopped acting")
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		require.Equal(t, "a", rec.LeaderID, "the row must not be released while the work runs: %+v", rec)
		expires := time.Now().Add(lease - rec.Age)

		// Nobody leads before the lease has expired by the database clock.
		time.Sleep(time.Until(expires) - time.Millisecond)
		assert.False(t, b.IsLeader(), "b leads before the lease of the undrained term expired")
		assert.False(t, a.IsLeader())
		// Then a follower takes over as usual (its next read, jitter included).
		time.Sleep(poll + poll/10)
		assert.True(t, b.IsLeader(), "b takes over once the lease has expired")

		close(stuck)
		<-workDone
		require.NoError(t, stopB())
		require.NoError(t, stopA())
	})
}

// TestUndrainedWorkKeepsItsCandidateFromLeadingAgain: while the work of an ended
// term still runs, this candidate does not lead again beside it; once the work
// returns it campaigns as usual.
func TestUndrainedWorkKeepsItsCandidateFromLeadingAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		stuck := make(chan struct{})
		var starts atomic.Int32
		c := cfg("a")
		c.OnStartedLeading = func(context.Context, int64) {
			if starts.Add(1) == 1 {
				<-stuck // the first term's work ignores its context
			}
		}
		a := newElector(t, st, c)
		stop := running(t, a)
		synctest.Wait()
		require.True(t, a.IsLeader())
		require.ErrorIs(t, a.ResignFor(t.Context(), 0), casleader.ErrNotDrained)

		// No cool-down: only the running work keeps a out, for many leases.
		time.Sleep(5 * lease)
		assert.False(t, a.IsLeader(), "a leads again while the work of its earlier term still runs")
		assert.Equal(t, int32(1), starts.Load())

		close(stuck)
		time.Sleep(poll + poll/10)
		assert.True(t, a.IsLeader(), "a campaigns again once that work returned")
		assert.Equal(t, int32(2), starts.Load())
		require.NoError(t, stop())
	})
}

// TestListenerThatDoesNotReadDoesNotEatTheTrustWindow: a listener that takes no
// status while terms start must not keep the leader from renewing, and finds the
// current status when it reads at last.
func TestListenerThatDoesNotReadDoesNotEatTheTrustWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		el := newElector(t, st, cfg("a"))
		statuses := el.Listen(t.Context()) // not read until the end
		stop := running(t, el)
		synctest.Wait()
		require.True(t, el.IsLeader())
		token := el.Token()
		for range 3 * lease / heartbeat {
			time.Sleep(heartbeat)
			require.True(t, el.IsLeader(), "the leader lost its term while a listener did not read")
		}
		assert.Equal(t, token, el.Token())
		got := <-statuses
		assert.True(t, got.Leading, "the listener finds the current status")
		assert.Equal(t, token, got.Token)
		assert.Equal(t, "a", got.Leader)
		assert.Greater(t, got.Seq, uint64(0), "a change, not the status before Run")
		require.NoError(t, stop())
	})
}

// TestBlockedWorkDoesNotMakeRunHang: a leader's work that never returns is logged
// and left behind; Run returns at most DrainTimeout after its context ended (plus
// the drain of the last term), and says it left the work running.
func TestBlockedWorkDoesNotMakeRunHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		blocked := make(chan struct{})
		c := cfg("a")
		c.OnStartedLeading = func(context.Context, int64) { <-blocked }
		el := newElector(t, st, c)
		drain := el.Config().DrainTimeout
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- el.Run(ctx) }()
		synctest.Wait()
		require.True(t, el.IsLeader())
		cancel()
		// At most: the term's drain, then Run's own wait.
		limit := time.NewTimer(2*drain + time.Millisecond)
		select {
		case err := <-done:
			assert.ErrorIs(t, err, casleader.ErrNotDrained, "Run says that it left the leader's work running")
		case <-limit.C:
			t.Errorf("Run did not return within %v of its context's end while OnStartedLeading blocked", 2*drain)
			close(blocked)
			<-done
			return
		}
		close(blocked)
		synctest.Wait() // the work left behind returns
	})
}

// TestPanickingCallbackCrashesTheProcessAndSaysWhere runs itself as a child whose
// OnStartedLeading panics: the child must crash (never lead on in an unknown state)
// after logging which callback panicked, for which key and term.
func TestPanickingCallbackCrashesTheProcessAndSaysWhere(t *testing.T) {
	if os.Getenv("CASLEADER_TEST_PANIC_CHILD") == "1" {
		c := cfg("a")
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		c.OnStartedLeading = func(context.Context, int64) { panic("boom in the leader's work") }
		el, err := casleader.New(memstore.New(), c)
		if err != nil {
			t.Fatal(err)
		}
		_ = el.Run(context.Background())
		t.Fatal("Run returned after a callback panicked")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPanickingCallbackCrashesTheProcessAndSaysWhere$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CASLEADER_TEST_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child must crash; output:\n%s", out)
	assert.NotZero(t, exit.ExitCode())
	text := string(out)
	assert.Contains(t, text, "boom in the leader's work", "the panic value is reported")
	assert.Contains(t, text, "callback panicked", "the elector logs the panic before the crash")
	assert.Contains(t, text, "callback=OnStartedLeading")
	assert.Contains(t, text, "key=k")
	assert.Regexp(t, `term=[1-9][0-9]*`, text, "the log names the term")
}

// TestResignFromTheLeaderCallbackDoesNotWaitForItself: the leader's own callback
// decides it is done. Term.Resign must not wait DrainTimeout for the callback that
// is calling it; the lease is released as soon as the callback has returned.
func TestResignFromTheLeaderCallbackDoesNotWaitForItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &orderStore{Store: memstore.New()}
		var el *casleader.Elector
		resigned := make(chan time.Time, 1)
		c := cfg("a")
		c.OnStartedLeading = func(ctx context.Context, token int64) {
			term := casleader.TermFrom(ctx)
			if !assert.NotNil(t, term, "the leadership context carries its term") {
				return
			}
			assert.Equal(t, token, term.Token())
			assert.True(t, term.IsLeader())
			time.Sleep(heartbeat) // some work
			assert.NoError(t, term.Resign())
			resigned <- time.Now()
			<-ctx.Done()
			assert.False(t, term.IsLeader())
			st.log("work returned")
		}
		el = newElector(t, st, c)
		stop := running(t, el)
		at := <-resigned
		synctest.Wait()
		assert.False(t, el.IsLeader())
		assert.Equal(t, []string{"work returned", "release ok"}, st.events)
		assert.Less(t, time.Since(at), el.Config().DrainTimeout, "the resign waited for its own caller")
		// The resign keeps a out for one lease, as Resign does.
		time.Sleep(lease / 2)
		assert.False(t, el.IsLeader())
		require.NoError(t, stop())
	})
}

// TestResignAndHandoverRefuseTheLeadershipContext: the elector's Resign, ResignFor
// and HandoverTo wait for the leader's work, so given that work's own leadership
// context (or one derived from it) they do nothing and say what to call instead,
// at once: the term goes on, nothing is released. The work then hands over the
// way the error says, from a goroutine with a context of its own.
func TestResignAndHandoverRefuseTheLeadershipContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &orderStore{Store: memstore.New()}
		var el *casleader.Elector
		refused := make(chan []error, 1)
		handed := make(chan error, 1)
		c := cfg("a")
		c.OnStartedLeading = func(ctx context.Context, _ int64) {
			term := casleader.TermFrom(ctx)
			derived, cancel := context.WithTimeout(ctx, time.Hour)
			defer cancel()
			errs := []error{el.Resign(ctx), el.ResignFor(derived, time.Hour), el.HandoverTo(ctx, "b")}
			assert.True(t, term.IsLeader(), "a refused call ends nothing")
			refused <- errs
			go func() { handed <- el.HandoverTo(context.Background(), "b") }()
			<-ctx.Done()
			st.log("work returned")
		}
		el = newElector(t, st, c)
		stopA := running(t, el)
		time.Sleep(time.Millisecond)
		b := newElector(t, st, cfg("b"))
		stopB := running(t, b)
		errs := <-refused
		for i, err := range errs[:2] {
			require.Error(t, err, "call %d", i)
			assert.Contains(t, err.Error(), "leadership context", "call %d says what was wrong", i)
			assert.Contains(t, err.Error(), "TermFrom(ctx).Resign()", "call %d names the fix", i)
		}
		require.Error(t, errs[2])
		assert.Contains(t, errs[2].Error(), "from a goroutine with a context of its own", "the handover's error names the fix")
		require.NoError(t, <-handed, "the handover from a goroutine of the work")
		assert.False(t, el.IsLeader())
		synctest.Wait()
		st.mu.Lock()
		assert.Equal(t, []string{"work returned"}, st.events, "the work returned; the lease was handed over, not released")
		st.mu.Unlock()
		time.Sleep(poll + poll/10) // b's next read, jitter included
		assert.True(t, b.IsLeader(), "b took the lease it was handed")
		require.NoError(t, stopA())
		require.NoError(t, stopB())
	})
}

// TestTermResignCannotEndALaterTerm: a handle kept from an earlier term resigns
// nothing once that term has ended, even while the same elector leads again.
func TestTermResignCannotEndALaterTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		terms := make(chan *casleader.Term, 2)
		c := cfg("a")
		c.OnStartedLeading = func(ctx context.Context, _ int64) {
			terms <- casleader.TermFrom(ctx)
			<-ctx.Done()
		}
		el := newElector(t, st, c)
		stop := running(t, el)
		first := <-terms
		// The first term ends: another candidate's term, which then expires.
		rec, _, err := st.Observe(t.Context(), "k")
		require.NoError(t, err)
		st.Put(store.Record{Key: "k", Version: rec.Version + 5, LeaderID: "b", Term: rec.Version + 5})
		second := <-terms
		require.NotEqual(t, first.Token(), second.Token())
		require.True(t, second.IsLeader())
		assert.False(t, first.IsLeader())

		assert.ErrorIs(t, first.Resign(), casleader.ErrNotLeader)
		for range 3 * lease / heartbeat {
			time.Sleep(heartbeat)
			require.True(t, el.IsLeader(), "a resign of an ended term ended a later one")
		}
		assert.Equal(t, second.Token(), el.Token())
		require.NoError(t, second.Resign())
		synctest.Wait()
		assert.False(t, el.IsLeader())
		require.NoError(t, stop())
	})
}
