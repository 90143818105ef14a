package casleader_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// logged returns a logger into a buffer and a function that returns its lines.
func logged() (*slog.Logger, func() []string) {
	var out lockedBuffer
	return slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})), out.Lines
}

// grep returns the lines that contain s.
func grep(lines []string, s string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// TestRunReportsWorkLeftRunning: when Run's context ends while the leader's work
// ignores its own, Run must not return nil as if all went well, and the log must
// not claim a release: the lease is left to expire.
func TestRunReportsWorkLeftRunning(t *testing.T) {
	for _, keep := range []bool{false, true} {
		name := map[bool]string{false: "Release", true: "KeepLeaseOnExit"}[keep]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				stuck := make(chan struct{})
				c := cfg("a")
				c.KeepLeaseOnExit = keep
				logger, lines := logged()
				c.Logger = logger
				c.OnStartedLeading = func(context.Context, int64) { <-stuck } // ignores its context
				defer close(stuck)
				el := newElector(t, st, c)
				stop := running(t, el)
				synctest.Wait()
				require.True(t, el.IsLeader())

				err := stop()
				require.ErrorIs(t, err, casleader.ErrNotDrained)
				assert.Contains(t, err.Error(), `"k"`, "the error names the key")
				assert.Contains(t, err.Error(), "expires by itself")
				rec, _, oerr := st.Observe(t.Context(), "k")
				require.NoError(t, oerr)
				assert.Equal(t, "a", rec.LeaderID, "the lease must not be released while the work runs")

				stopped := grep(lines(), "stopped leading")
				require.Len(t, stopped, 1)
				assert.NotContains(t, stopped[0], "reason=release", "the lease was not released")
				assert.Empty(t, grep(lines(), "lease released"))
			})
		})
	}
}

// TestResignFromTheCallbackWithAnotherContextNamesTheFix: the callback resigns
// with context.Background(), so the resign waits for its own caller. A longer
// DrainTimeout would only make it wait longer: the advice names the fix, the
// term's Resign, before DrainTimeout.
func TestResignFromTheCallbackWithAnotherContextNamesTheFix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var el *casleader.Elector
		resigned := make(chan error, 1)
		c := cfg("a")
		logger, lines := logged()
		c.Logger = logger
		c.OnStartedLeading = func(ctx context.Context, _ int64) {
			resigned <- el.Resign(context.Background())
		}
		el = newElector(t, st, c)
		stop := running(t, el)
		err := <-resigned
		require.ErrorIs(t, err, casleader.ErrNotDrained)
		require.NotEmpty(t, grep(lines(), "not releasing the lease"), "logged")
		text := err.Error()
		assert.Contains(t, text, "TermFrom(ctx).Resign()", "the advice names the fix")
		assert.Contains(t, text, "it never calls them", "and the rule")
		assert.Less(t, strings.Index(text, "TermFrom(ctx).Resign()"), strings.Index(text, "DrainTimeout only if"), "before raising DrainTimeout")
		require.NoError(t, stop())
	})
}

// TestCallsOutsideRunAreErrors: a stopped elector's Run, and a Resign with no Run,
// do nothing; they must say so instead of returning nil.
func TestCallsOutsideRunAreErrors(t *testing.T) {
	t.Run("RunAfterStop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := memstore.New()
			el := newElector(t, st, cfg("a"))
			require.NoError(t, el.Stop(t.Context()))
			err := el.Run(t.Context())
			require.ErrorIs(t, err, casleader.ErrRunState)
			assert.Contains(t, err.Error(), "New", "the error says to create a new elector")
			_, found, oerr := st.Observe(t.Context(), "k")
			require.NoError(t, oerr)
			assert.False(t, found, "a stopped elector wrote nothing")
		})
	})
	t.Run("ResignBeforeRun", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			el := newElector(t, memstore.New(), cfg("a"))
			err := el.Resign(t.Context())
			require.ErrorIs(t, err, casleader.ErrRunState)
			assert.Contains(t, err.Error(), "Pause", "the error names the way to stay out from the start")
			require.ErrorIs(t, el.ResignFor(t.Context(), time.Hour), casleader.ErrRunState)
			// Nothing was set: Run campaigns at once.
			stop := running(t, el)
			synctest.Wait()
			assert.True(t, el.IsLeader(), "a refused Resign must not leave a cool-down behind")
			require.NoError(t, stop())
		})
	})
}

// TestWarningsSayEachAttributeOnce: the "stepping down" warning of a renewal that
// never returned ends without error=<nil>, and the members table's warnings name
// the candidate once.
func TestWarningsSayEachAttributeOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		frozen := make(chan struct{})
		st := &failingMembers{Store: memstore.New(), frozen: frozen}
		c := cfg("a")
		logger, lines := logged()
		c.Logger = logger
		el := newElector(t, st, c)
		stop := running(t, el)
		time.Sleep(renewDL + time.Millisecond)
		require.False(t, el.IsLeader())
		close(frozen) // the renewal returns, after the deadline
		synctest.Wait()
		require.NoError(t, stop())

		down := grep(lines(), "stepping down")
		require.NotEmpty(t, down)
		for _, l := range down {
			assert.NotContains(t, l, "<nil>", "no empty error")
		}
		warns := grep(lines(), "members table")
		require.NotEmpty(t, warns)
		for _, l := range warns {
			assert.Equal(t, 1, strings.Count(l, " id="), "id once in %s", l)
			assert.LessOrEqual(t, strings.Count(l, " key="), 1, "key at most once in %s", l)
		}
	})
}

// failingMembers is an election store whose renewals wait until frozen is closed
// and then succeed, however late, and whose members table is missing.
type failingMembers struct {
	*memstore.Store
	frozen chan struct{}
}

func (f *failingMembers) Renew(ctx context.Context, key, id string, version int64) (bool, error) {
	<-f.frozen
	return f.Store.Renew(context.WithoutCancel(ctx), key, id, version)
}

var errNoMembers = errors.New("no members table")

func (*failingMembers) PutMembers(context.Context, []store.Member) error { return errNoMembers }
func (*failingMembers) DeleteMembers(context.Context, string, []string) error {
	return errNoMembers
}
func (*failingMembers) PruneMembers(context.Context, time.Duration) (int64, error) {
	return 0, errNoMembers
}
