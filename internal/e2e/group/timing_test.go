package group_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// TestLeaseAloneScalesTheOtherDurations: a group given only LeaseDuration derives
// its renew deadline and heartbeat from it by the library's rule (2/3 and 1/5 of
// that), so a short lease alone is accepted and its keys stay led.
func TestLeaseAloneScalesTheOtherDurations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := casleader.NewGroup(memstore.New(), casleader.GroupConfig{ID: "a", Keys: []string{"k"}, LeaseDuration: 3 * time.Second})
		require.NoError(t, err, "a 3 s lease alone")
		stop := running(t, g)
		defer stop()
		time.Sleep(time.Second)
		require.True(t, g.IsLeader("k"))
		token := g.Token("k")
		for range 20 {
			time.Sleep(time.Second)
			require.True(t, g.IsLeader("k"), "the key stays led: renewals come well within the 2 s renew deadline")
		}
		require.Equal(t, token, g.Token("k"))
	})
}
