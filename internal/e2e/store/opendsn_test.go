package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
)

// TestOpenTakesTheCommandsDSNForms: mysql.Open and postgres.Open take the DSN
// forms of `casleader --dsn` as well as their drivers' own, on the live servers.
func TestOpenTakesTheCommandsDSNForms(t *testing.T) {
	t.Parallel()
	testdb.MySQLDSN(t) // skips (or fails under CASLEADER_REQUIRE_DB) without the servers
	for _, s := range []string{
		"mysql://root@127.0.0.1:3306/test",
		"mariadb://root@127.0.0.1/test",
		"mysql://root@tcp(127.0.0.1:3306)/test",
		testdb.MySQLDSN(t), // go-sql-driver's own
	} {
		db, err := mysql.Open(s)
		require.NoError(t, err, s)
		assert.NoError(t, db.PingContext(t.Context()), s)
		db.Close()
	}
	pg := testdb.PostgresDSN(t)
	for _, s := range []string{pg, strings.Replace(pg, "postgres://", "postgresql://", 1), "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable"} {
		pool, err := postgres.Open(t.Context(), s)
		require.NoError(t, err, s)
		assert.NoError(t, pool.Ping(t.Context()), s)
		pool.Close()
	}
}

// TestOpenSaysDidYouMeanForAMisspeltScheme, and never echoes the password.
func TestOpenSaysDidYouMeanForAMisspeltScheme(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dsn, want string }{
		{"mysq://root:pa#ss@127.0.0.1:3306/test", "did you mean mysql://?"},
		{"mysqll://app:casleader@127.0.0.1/test", "did you mean mysql://?"},
		{"postgres://app:pa#ss@127.0.0.1/test", "open it with store/postgres"},
	} {
		_, err := mysql.Open(tc.dsn)
		require.ErrorIs(t, err, store.ErrInvalidArgument, tc.dsn)
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "pa#ss")
		assert.NotContains(t, err.Error(), ":casleader")
	}
	for _, tc := range []struct{ dsn, want string }{
		{"postgress://app:a@127.0.0.1/test", "did you mean postgres://?"},
		{"postgresq://app:pa#ss@127.0.0.1/test", "did you mean postgres"},
		{"mysql://app:pa#ss@127.0.0.1/test", "open it with store/mysql"},
	} {
		_, err := postgres.Open(t.Context(), tc.dsn)
		require.ErrorIs(t, err, store.ErrInvalidArgument, tc.dsn)
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "pa#ss")
		assert.NotContains(t, err.Error(), ":a@")
	}
}
