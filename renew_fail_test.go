package casleader_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/retry"
)

// warnings keeps the attributes of each WARN record whose message is msg.
type warnings struct {
	msg  string
	mu   sync.Mutex
	seen []map[string]any
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level != slog.LevelWarn || r.Message != w.msg {
		return nil
	}
	attrs := map[string]any{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.Any()
		return true
	})
	w.mu.Lock()
	w.seen = append(w.seen, attrs)
	w.mu.Unlock()
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) all() []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]map[string]any(nil), w.seen...)
}

// TestFailedRenewalsAreReportedOncePerRound: a group whose renewals of three keys
// fail, one batch per key, counts one failed round (not one per batch) and says so
// in one WARN line naming the three keys; the next rounds' failures within
// retry.LogEvery are counted in that line's successor, not logged one by one.
func TestFailedRenewalsAreReportedOncePerRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		logs := &warnings{msg: "casleader: renewal failed, retrying"}
		g, err := casleader.NewGroup(st, casleader.GroupConfig{ID: "a", Keys: []string{"k1", "k2", "k3"},
			LeaseDuration: 3 * time.Second, HeartbeatInterval: 200 * time.Millisecond, BatchSize: 1,
			Logger: slog.New(logs)})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		time.Sleep(time.Second)
		require.Equal(t, 3, g.Stats().Leading, "the group leads its three keys before the database goes away")

		before := st.Calls(memstore.OpRenew)
		reset := errors.New("connection reset by peer")
		st.Fail(memstore.OpRenew, reset)
		st.Fail(memstore.OpRenewMany, reset)
		time.Sleep(retry.LogEvery / 2) // every key's trust deadline passes meanwhile
		cancel()
		require.NoError(t, <-done)

		seen := logs.all()
		require.Len(t, seen, 1, "one WARN line within retry.LogEvery: %v", seen)
		assert.EqualValues(t, 1, seen[0]["attempt"], "the first failed round, whatever its number of batches")
		assert.EqualValues(t, 3, seen[0]["keys"], "the line names the keys of every failed batch of the round")
		assert.Greater(t, st.Calls(memstore.OpRenew)-before, 2*3, "failed rounds are retried: more than one round was sent")
	})
}
