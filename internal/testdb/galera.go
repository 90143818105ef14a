package testdb

import (
	"os"
	"strings"
	"testing"
)

// Environment variables of the replicated databases (.ci/galera starts the cluster).
const (
	// EnvGalera holds the DSNs (go-sql-driver format) of the nodes of one MariaDB
	// Galera cluster, comma-separated, at least two.
	EnvGalera = "CASLEADER_GALERA_DSNS"
	// EnvRequireGalera=1 turns a missing EnvGalera into a failure. .ci/run sets it
	// when it has started the cluster; CASLEADER_REQUIRE_DB alone does not, so that
	// a machine with one server per dialect can still run every other test.
	EnvRequireGalera = "CASLEADER_REQUIRE_GALERA"
)

// GaleraDSNs returns the DSNs of the Galera nodes (at least two), or skips t (a
// failure under CASLEADER_REQUIRE_GALERA=1).
func GaleraDSNs(t testing.TB) []string {
	t.Helper()
	var dsns []string
	for d := range strings.SplitSeq(os.Getenv(EnvGalera), ",") {
		if d = strings.TrimSpace(d); d != "" {
			dsns = append(dsns, d)
		}
	}
	if len(dsns) < 2 {
		msg := EnvGalera + " is not set to two or more comma-separated DSNs of one Galera cluster's nodes (start one with: export " + EnvGalera + "=\"$(bash .ci/galera)\")"
		if os.Getenv(EnvRequireGalera) == "1" {
			t.Fatalf("%s (%s=1 forbids skipping)", msg, EnvRequireGalera)
		}
		t.Skip(msg)
	}
	return dsns
}

// Environment variables of the PostgreSQL primary with a synchronous standby
// (.ci/pgsync starts it).
const (
	// EnvPgSync is a multi-host DSN, primary first, with
	// target_session_attrs=read-write: "postgres://u@h1:p1,h2:p2/db?...".
	EnvPgSync = "CASLEADER_PGSYNC_DSN"
	// EnvRequirePgSync=1 turns a missing EnvPgSync into a failure (.ci/run sets it).
	EnvRequirePgSync = "CASLEADER_REQUIRE_PGSYNC"
	// EnvPgSyncDir is where .ci/pgsync keeps the two data directories (default
	// /var/lib/casleader-pgsync); a failover test stops the primary there.
	EnvPgSyncDir = "CASLEADER_PGSYNC_DIR"
)

// PgSyncDSN returns the multi-host DSN of the primary + synchronous standby pair
// and the directory of its data directories, or skips t (a failure under
// CASLEADER_REQUIRE_PGSYNC=1).
func PgSyncDSN(t testing.TB) (dsn, dir string) {
	t.Helper()
	dsn = os.Getenv(EnvPgSync)
	if dsn == "" {
		msg := EnvPgSync + " is not set to the multi-host DSN of a primary + synchronous standby (start one with: export " + EnvPgSync + "=\"$(bash .ci/pgsync)\")"
		if os.Getenv(EnvRequirePgSync) == "1" {
			t.Fatalf("%s (%s=1 forbids skipping)", msg, EnvRequirePgSync)
		}
		t.Skip(msg)
	}
	dir = os.Getenv(EnvPgSyncDir)
	if dir == "" {
		dir = "/var/lib/casleader-pgsync"
	}
	return dsn, dir
}
