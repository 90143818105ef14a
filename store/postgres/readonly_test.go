package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/postgres"
)

// TestEveryHostReadOnlyIsNotWritable: on the multi-host DSN of a primary + standby
// pair (target_session_attrs=read-write), sessions that are read-only on every
// host, as during a failover before the standby is promoted, cannot connect: pgx
// finds no writable host. The store reports that as not writable (retried by the
// elector until a primary is back), not as an unclassified error nor a deployment
// error, for its first statement's table check as for reads and writes, through
// pgxpool and database/sql alike.
func TestEveryHostReadOnlyIsNotWritable(t *testing.T) {
	dsn, _ := testdb.PgSyncDSN(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	require.NotNil(t, cfg.ConnConfig.ValidateConnect, "%s has target_session_attrs=read-write", testdb.EnvPgSync)
	require.NotEmpty(t, cfg.ConnConfig.Fallbacks, "%s lists two hosts", testdb.EnvPgSync)
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	db := stdlib.OpenDB(*cfg.ConnConfig)
	t.Cleanup(func() { db.Close() })

	table := testdb.Name(t)
	viaPool, err := postgres.New(pool, table)
	require.NoError(t, err)
	viaDB, err := postgres.NewDB(db, table)
	require.NoError(t, err)
	for name, st := range map[string]*postgres.Store{"pgxpool": viaPool, "database/sql": viaDB} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			_, _, observeErr := st.Observe(ctx, "k")
			for op, err := range map[string]error{
				"check":   st.Check(ctx),
				"observe": observeErr,
				"insert":  errOf3(st.Insert(ctx, "k", store.Candidate{ID: "a"})),
				"renew":   errOf2(st.Renew(ctx, "k", "a", 1)),
			} {
				require.Error(t, err, op)
				assert.ErrorIs(t, err, store.ErrNotWritable, "%s: %v", op, err)
				assert.NotErrorIs(t, err, store.ErrDeployment, op)
				assert.Contains(t, err.Error(), "no host of the DSN accepts writes", op)
			}
		})
	}
}

func errOf2(_ bool, err error) error          { return err }
func errOf3(_ int64, _ bool, err error) error { return err }
