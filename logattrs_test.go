package casleader_test

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/protocoltest"
	"github.com/casleader/casleader/store"
)

// lockedBuffer is a log sink that two electors' goroutines may write at once.
type lockedBuffer = protocoltest.SyncBuffer

// TestLogLinesNameKeyAndIDOnce: the renewal, the failed renewal and the failed read
// lines carry the elector's key and id attributes once each.
func TestLogLinesNameKeyAndIDOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
		st := memstore.New()
		ca, cb := cfg("a"), cfg("b")
		ca.Logger, cb.Logger = logger, logger
		stopA := running(t, newElector(t, st, ca))
		time.Sleep(time.Millisecond)
		stopB := running(t, newElector(t, st, cb))
		time.Sleep(2 * heartbeat)
		st.FailNext(memstore.OpRenew, store.ErrTransient)
		st.FailNext(memstore.OpObserve, store.ErrTransient)
		time.Sleep(2 * poll)
		require.NoError(t, stopB())
		require.NoError(t, stopA())

		seen := map[string]bool{}
		for _, line := range out.Lines() {
			for _, msg := range []string{"casleader: renewed", "casleader: renewal failed", "casleader: reading the election row"} {
				if strings.Contains(line, msg) {
					seen[msg] = true
				}
			}
			assert.Equal(t, 1, strings.Count(line, " key="), "key once in %s", line)
			assert.Equal(t, 1, strings.Count(line, " id="), "id once in %s", line)
		}
		assert.Len(t, seen, 3, "the renewal, failed renewal and failed read lines were logged: %v", seen)
	})
}
