package postgres

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/testdb"
)

func TestShouldPingOnlyConnectionsIdleForpingIdle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		idle time.Duration
		want bool
	}{
		{0, false},
		{2 * time.Second, false}, // a heartbeat interval: pgxpool's default pings here
		{pingIdle - time.Nanosecond, false},
		{pingIdle, true},
		{time.Hour, true},
	} {
		assert.Equal(t, tc.want, shouldPing(t.Context(), pgxpool.ShouldPingParams{IdleDuration: tc.idle}), "idle %v", tc.idle)
	}
}

// TestOpenDoesNotPingAtHeartbeatIntervals runs statements as far apart as a
// heartbeat (further than pgxpool's default one second) on a pool configured as
// Open configures it, and counts the pings the pool decides to send: none, where
// pgxpool's default would have pinged before every statement.
func TestOpenDoesNotPingAtHeartbeatIntervals(t *testing.T) {
	t.Parallel()
	cfg, err := openConfig(testdb.PostgresDSN(t))
	require.NoError(t, err)
	require.NotNil(t, cfg.ShouldPing)
	open := cfg.ShouldPing
	var acquires, pings, defaultPings atomic.Int64
	cfg.ShouldPing = func(ctx context.Context, p pgxpool.ShouldPingParams) bool {
		acquires.Add(1)
		if p.IdleDuration > time.Second { // pgxpool's default rule
			defaultPings.Add(1)
		}
		ping := open(ctx, p)
		if ping {
			pings.Add(1)
		}
		return ping
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	const statements, gap = 4, 1200 * time.Millisecond
	for i := range statements {
		if i > 0 {
			time.Sleep(gap)
		}
		_, err := pool.Exec(t.Context(), "SELECT 1")
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, acquires.Load(), int64(statements))
	assert.GreaterOrEqual(t, defaultPings.Load(), int64(statements-1), "pgxpool's default would ping every statement after the first")
	assert.Zero(t, pings.Load(), "no statement may cost a second round trip")
}
