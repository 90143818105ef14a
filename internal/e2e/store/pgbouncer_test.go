package store_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/storetest"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store/postgres"
)

// The conformance suite through PgBouncer in transaction pooling mode: every
// statement is a single autocommit statement without a named prepared statement,
// so consecutive statements may run on different server connections.

func TestPostgresPgxPoolThroughPgBouncer(t *testing.T) {
	t.Parallel()
	pool := pgdb.PostgresAt(t, testdb.PgBouncerDSN(t))
	storetest.Run(t, sqlHarness{
		dialect: schema.Postgres,
		exec:    poolExec(pool),
		open:    func(table string) (storetest.Store, error) { return postgres.New(pool, table) },
	}.harness())
}

func TestPostgresDatabaseSQLThroughPgBouncer(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("pgx", execModeDSN(testdb.PgBouncerDSN(t)))
	require.NoError(t, err)
	db.SetMaxOpenConns(32)
	t.Cleanup(func() { db.Close() })
	storetest.Run(t, sqlHarness{
		dialect: schema.Postgres,
		exec:    storetest.DBExec(db),
		open:    func(table string) (storetest.Store, error) { return postgres.NewDB(db, table) },
	}.harness())
}

// execModeDSN adds default_query_exec_mode=exec to a URL DSN: pgx's database/sql
// driver otherwise caches named prepared statements per connection, which PgBouncer
// before 1.21 cannot follow across server connections in transaction mode.
func execModeDSN(dsn string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "default_query_exec_mode=exec"
}
