package casleader_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/protocoltest"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/store"
	mysqlstore "github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
)

// secret is the password of every DSN below: it must appear in no log line and no
// error string.
const secret = "Wr0ng-s3cr3t-Pw"

type syncBuffer = protocoltest.SyncBuffer

// runLogged runs an elector on st for at most d with a debug JSON logger and
// returns what it logged and what Run returned.
func runLogged(t *testing.T, st store.Driver, d time.Duration) (string, error) {
	t.Helper()
	var buf syncBuffer
	el, err := casleader.New(st, casleader.Config{
		Key: "k", ID: "a",
		LeaseDuration: 400 * time.Millisecond, RenewDeadline: 250 * time.Millisecond,
		HeartbeatInterval: 60 * time.Millisecond, PollInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err = el.Run(ctx)
	return buf.String(), err
}

func noSecret(t *testing.T, what, s string) {
	t.Helper()
	assert.NotContains(t, s, secret, "%s holds the password", what)
	assert.NotContains(t, s, strings.ToLower(secret), "%s holds the password", what)
}

func TestNoPasswordInLogsOrErrors(t *testing.T) {
	t.Run("MariaDBWrongPassword", func(t *testing.T) {
		t.Parallel()
		cfg, err := mysql.ParseDSN(testdb.MySQLAppDSN(t))
		require.NoError(t, err)
		cfg.Passwd = secret
		dsn := cfg.FormatDSN()
		require.Contains(t, dsn, secret)
		db, err := mysqlstore.Open(dsn)
		require.NoError(t, err)
		defer db.Close()
		st, err := mysqlstore.New(db, "")
		require.NoError(t, err)
		logs, err := runLogged(t, st, 5*time.Second)
		require.ErrorIs(t, err, store.ErrDeployment, "access denied is a deployment error")
		noSecret(t, "the error", err.Error())
		noSecret(t, "the log", logs)
		assert.Contains(t, logs, "Access denied", "the log says why")
	})
	t.Run("MariaDBUnreachable", func(t *testing.T) {
		t.Parallel()
		db, err := mysqlstore.Open("app:" + secret + "@tcp(127.0.0.1:1)/test?timeout=100ms")
		require.NoError(t, err)
		defer db.Close()
		st, err := mysqlstore.New(db, "")
		require.NoError(t, err)
		logs, err := runLogged(t, st, time.Second)
		require.NoError(t, err)
		noSecret(t, "the log", logs)
		assert.Contains(t, logs, "connection refused")
	})
	t.Run("PostgreSQLUnreachable", func(t *testing.T) {
		t.Parallel()
		pool, err := postgres.Open(context.Background(), "postgres://app:"+secret+"@127.0.0.1:1/test?sslmode=disable&connect_timeout=1")
		require.NoError(t, err)
		defer pool.Close()
		st, err := postgres.New(pool, "")
		require.NoError(t, err)
		logs, err := runLogged(t, st, time.Second)
		require.NoError(t, err)
		noSecret(t, "the log", logs)
		assert.Contains(t, logs, "connect")
	})
	t.Run("MalformedDSNs", func(t *testing.T) {
		t.Parallel()
		for _, dsn := range []string{
			"postgres://app:" + secret + "@127.0.0.1:notaport/test",
			"postgres://app:pa#" + secret + "@127.0.0.1:notaport/test",
			"postgres://app:pa?" + secret + "@127.0.0.1:notaport/test",
			"host=127.0.0.1 port=notaport user=app password='" + secret + "'",
		} {
			_, err := postgres.Open(context.Background(), dsn)
			require.Error(t, err, dsn)
			noSecret(t, "the error", err.Error())
		}
		for _, dsn := range []string{
			"app:" + secret + "@tcp(127.0.0.1:3306/test",
			"app:" + secret + "@tcp(127.0.0.1:3306)/test?timeout=notaduration",
			"app://" + secret + "@tcp(127.0.0.1:3306)/test?timeout=notaduration",
		} {
			_, err := mysqlstore.Open(dsn)
			require.Error(t, err, dsn)
			noSecret(t, "the error", err.Error())
		}
	})
}
