package metrics_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/store/sqlite"
)

func TestMembersGaugeCountsTheLiveCandidates(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "election.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	st, err := sqlite.New(db, "")
	require.NoError(t, err)
	require.NoError(t, st.CreateTable(t.Context()))

	var ps []*observed
	for _, id := range []string{"a", "b", "c"} {
		c := cfg(id)
		// A 2 s lease: the view shows rows written within two leases, and the
		// machine may be loaded.
		c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval = 2*time.Second, 1200*time.Millisecond, 100*time.Millisecond, 500*time.Millisecond
		p := newObserved(t, st, c)
		p.run(t)
		ps = append(ps, p)
	}
	require.Eventually(t, func() bool {
		s := find(t, ps[0].reg, "casleader_members", "key", "k")
		return s != nil && s.GetGauge().GetValue() == 3
	}, 20*time.Second, 20*time.Millisecond,
		"the gauge counts the three candidates, read from the members view")
	ms, err := ps[1].el.Members(t.Context())
	require.NoError(t, err)
	assert.Len(t, ms, 3)
}
