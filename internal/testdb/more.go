package testdb

import (
	"os"
	"testing"
)

// Environment variables of the optional servers and accounts, set by .ci/run.
const (
	// EnvPgBouncer is the DSN of PgBouncer in transaction pooling mode in front of the
	// PostgreSQL server of EnvPostgres.
	EnvPgBouncer = "CASLEADER_PGBOUNCER_DSN"
	// EnvMySQLApp is the DSN of a MySQL/MariaDB account without privileges on any
	// table (tests grant what they need on their own tables, to casleader_app).
	EnvMySQLApp = "CASLEADER_MYSQL_APP_DSN"
	// EnvPostgresApp is the DSN of a PostgreSQL role without privileges on any table.
	EnvPostgresApp = "CASLEADER_POSTGRES_APP_DSN"
)

// PgBouncerDSN returns the PgBouncer DSN, or skips t: PgBouncer is optional (.ci/run
// leaves the variable unset, with a warning, where it cannot start one), so even
// CASLEADER_REQUIRE_DB=1 does not turn this skip into a failure.
func PgBouncerDSN(t testing.TB) string {
	t.Helper()
	v := os.Getenv(EnvPgBouncer)
	if v == "" {
		t.Skipf("%s is not set: set it to a PgBouncer (pool_mode = transaction) in front of the PostgreSQL server to run this test", EnvPgBouncer)
	}
	return v
}

// MySQLAppDSN returns the DSN of the unprivileged MySQL/MariaDB account, or skips t
// (a failure under CASLEADER_REQUIRE_DB=1).
func MySQLAppDSN(t testing.TB) string {
	t.Helper()
	return appDSN(t, EnvMySQLApp)
}

// PostgresAppDSN returns the DSN of the unprivileged PostgreSQL role, or skips t
// (a failure under CASLEADER_REQUIRE_DB=1).
func PostgresAppDSN(t testing.TB) string {
	t.Helper()
	return appDSN(t, EnvPostgresApp)
}

func appDSN(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		Unavailable(t, env+" is not set: set it to an account without table privileges (.ci/run creates casleader_app) to run this test")
	}
	return v
}
