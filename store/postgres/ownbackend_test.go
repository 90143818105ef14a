package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/testdb"
)

// TestListenerNeverListensThroughAPoolingProxy: the listener built into a store
// sends LISTEN only on a connection that reaches the backend it opened. Through
// PgBouncer in transaction mode a LISTEN stays on a pooled server connection, and
// the notifications it then receives between two clients' transactions made
// PgBouncer 1.18 exit ("server_proto: server in bad state"): every other client of
// that PgBouncer lost its connections.
func TestListenerNeverListensThroughAPoolingProxy(t *testing.T) {
	for name, dsn := range map[string]func(testing.TB) string{
		"Direct":    testdb.PostgresDSN,
		"PgBouncer": testdb.PgBouncerDSN,
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := pgx.ParseConfig(dsn(t))
			require.NoError(t, err)
			cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
			conn, err := pgx.ConnectConfig(t.Context(), cfg)
			require.NoError(t, err)
			defer closeConn(t.Context(), conn)
			err = ownBackend(t.Context(), conn)
			if name == "Direct" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, errSelfTest, "so that Run polls and tests again a minute later, without LISTEN")
			assert.Contains(t, err.Error(), "pooling proxy")
		})
	}
}
