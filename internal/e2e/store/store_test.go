package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/internal/storetest"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// Every store implements the contract the conformance suite checks.
var (
	_ store.Driver = (*mysql.Store)(nil)
	_ store.Driver = (*postgres.Store)(nil)
	_ store.Driver = (*sqlite.Store)(nil)
	_ store.Driver = (*memstore.Store)(nil)
)

func TestMySQL(t *testing.T) {
	t.Parallel()
	db := mydb.MySQL(t)
	runBoth(t, sqlHarness{
		dialect: schema.MySQL,
		exec:    storetest.DBExec(db),
		open:    func(table string) (storetest.Store, error) { return mysql.New(db, table) },
	})
}

func TestPostgresPgxPool(t *testing.T) {
	t.Parallel()
	pool := pgdb.Postgres(t)
	runBoth(t, sqlHarness{
		dialect: schema.Postgres,
		exec:    poolExec(pool),
		open:    func(table string) (storetest.Store, error) { return postgres.New(pool, table) },
	})
}

func TestPostgresDatabaseSQL(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("pgx", testdb.PostgresDSN(t))
	require.NoError(t, err)
	db.SetMaxOpenConns(32)
	t.Cleanup(func() { db.Close() })
	runBoth(t, sqlHarness{
		dialect: schema.Postgres,
		exec:    storetest.DBExec(db),
		open:    func(table string) (storetest.Store, error) { return postgres.NewDB(db, table) },
	})
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	db := litedb.SQLite(t) // one file shared by all subtests, as candidates share one
	runBoth(t, sqlHarness{
		dialect: schema.SQLite,
		exec:    storetest.DBExec(db),
		open:    func(table string) (storetest.Store, error) { return sqlite.New(db, table) },
	})
}

func TestMemstore(t *testing.T) {
	t.Parallel()
	var stores sync.Map // table -> *memstore.Store
	runBoth(t, plain{
		Open: func(t *testing.T, table string) storetest.Store {
			s := memstore.NewWithoutTable(table)
			stores.Store(table, s)
			return s
		},
		Corrupt: func(t *testing.T, table, key, what string) {
			s, ok := stores.Load(table)
			require.True(t, ok, "no memstore for table %q", table)
			require.NoError(t, s.(*memstore.Store).Corrupt(key, what))
		},
		NoWakeups: true,
	})
}

// runBoth runs the conformance suite and the batched methods' suite on h.
func runBoth(t *testing.T, h interface{ harness() storetest.Harness }) {
	t.Helper()
	storetest.Run(t, h.harness())
	t.Run("Batch", func(t *testing.T) { storetest.RunBatch(t, h.harness()) })
}

// plain makes a storetest.Harness usable by runBoth.
type plain storetest.Harness

func (p plain) harness() storetest.Harness { return storetest.Harness(p) }

// sqlHarness adapts one SQL store to the conformance suite (storetest.SQL).
type sqlHarness struct {
	dialect schema.Dialect
	exec    func(ctx context.Context, query string, args ...any) (rowsAffected int64, err error)
	open    func(table string) (storetest.Store, error)
}

func (h sqlHarness) harness() storetest.Harness {
	return storetest.SQL{Dialect: h.dialect, Exec: h.exec, Open: h.open}.Harness()
}

func poolExec(pool *pgxpool.Pool) func(ctx context.Context, query string, args ...any) (int64, error) {
	return func(ctx context.Context, query string, args ...any) (int64, error) {
		// QueryExecModeExec: no named prepared statement, which PgBouncer in
		// transaction pooling mode would lose between two server connections.
		tag, err := pool.Exec(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...)
		return tag.RowsAffected(), err
	}
}

func TestPasswordRedactAndRedactError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, dsn, password string
	}{
		{"MySQL", "app:s3cr3t@tcp(db.example:3306)/elect?parseTime=true", "s3cr3t"},
		{"MySQLUnixSocket", "app:s3cr3t@unix(/run/mysqld/mysqld.sock)/elect", "s3cr3t"},
		{"MySQLDefaultAddress", "app:s3cr3t@/elect", "s3cr3t"},
		{"MySQLPasswordWithAtColonAndSlash", "app:p@ss:w/rd@tcp(db:3306)/elect", "p@ss:w/rd"},
		{"MySQLPasswordWithParenthesis", "app:pa(ss)@tcp(db:3306)/elect", "pa(ss)"},
		{"URL", "postgres://app:s3cr3t@db.example:5432/elect?sslmode=disable", "s3cr3t"},
		{"URLPostgresql", "postgresql://app:s3cr3t@db.example/elect", "s3cr3t"},
		{"URLPercentEncoded", "postgres://app:p%40ss%2Fw%3Ard@db.example/elect", "p@ss/w:rd"},
		{"URLPasswordInQuery", "postgres://app@db.example/elect?sslmode=disable&password=s3%20cr3t", "s3 cr3t"},
		{"URLWithoutUserPasswordInQuery", "postgresql://db.example/elect?user=app&password=s3cr3t", "s3cr3t"},
		{"URLPasswordWithUnencodedAt", "postgres://app:p@ss@db.example/elect", "p@ss"},
		{"URLBadEscape", "postgres://app:s3cr3t%zz@db.example/elect", "s3cr3t%zz"},
		{"URLMySQLScheme", "mysql://app:s3cr3t@db.example:3306/elect", "s3cr3t"},
		{"KeyValue", "host=db.example user=app password=s3cr3t dbname=elect", "s3cr3t"},
		{"KeyValueFirst", "password=s3cr3t host=db.example user=app", "s3cr3t"},
		{"KeyValueQuoted", "host=db user=app password='two words' dbname=elect", "two words"},
		{"KeyValueQuotedWithEscapes", `host=db user=app password='it\'s \\ here' dbname=elect`, `it's \ here`},
		{"KeyValueSpacesAroundEquals", "host=db user=app password = s3cr3t dbname=elect", "s3cr3t"},
		{"KeyValueUnterminatedQuote", "host=db user=app password='s3 cr3t", "s3 cr3t"},
		{"MySQLPasswordWithSchemeLikeText", "app:x://y@tcp(db:3306)/elect", "x://y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.password, secret.Password(tc.dsn), "Password")

			red := secret.Redact(tc.dsn)
			assertNoPassword(t, red, tc.dsn, tc.password)
			assert.Contains(t, red, "xxxxx")
			assert.Contains(t, red, "app", "Redact keeps the rest of the DSN")

			cause := errors.New("dial failed")
			err := secret.RedactError(fmt.Errorf("connect %s: %w", tc.dsn, cause), tc.dsn)
			assertNoPassword(t, err.Error(), tc.dsn, tc.password)
			assert.ErrorIs(t, err, cause, "RedactError keeps the chain")
		})
	}
	t.Run("NoPassword", func(t *testing.T) {
		for _, dsn := range []string{
			"root@tcp(127.0.0.1:3306)/test",
			"postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
			"host=db user=app dbname=elect",
			"",
		} {
			assert.Empty(t, secret.Password(dsn), dsn)
			assert.Equal(t, dsn, secret.Redact(dsn))
			err := errors.New("boom " + dsn)
			assert.Same(t, err, secret.RedactError(err, dsn))
		}
		assert.NoError(t, secret.RedactError(nil, "app:s3cr3t@/elect"))
	})
}

// assertNoPassword checks that s holds the password in none of the forms it can take
// in dsn: as written (perhaps percent-encoded or quoted) and decoded.
func assertNoPassword(t *testing.T, s, dsn, password string) {
	t.Helper()
	assert.NotContains(t, s, password)
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, raw, _ := strings.Cut(u.User.String(), ":"); raw != "" {
			assert.NotContains(t, s, raw, "percent-encoded password")
		}
	}
	if raw := url.QueryEscape(password); raw != password {
		assert.NotContains(t, s, raw, "query-escaped password")
	}
	for _, word := range strings.Fields(password) {
		assert.NotContains(t, s, word, "part of the password")
	}
}

// retype returns the DDL of dialect d for table with the columns named in types
// given other types.
func retype(t *testing.T, d schema.Dialect, table string, types map[string]string) string {
	t.Helper()
	ddl, err := schema.DDL(d, table)
	require.NoError(t, err)
	lines := strings.Split(ddl, "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if typ, ok := types[f[0]]; ok {
			lines[i] = "    " + f[0] + " " + typ
			if strings.HasSuffix(strings.TrimSpace(l), ",") {
				lines[i] += ","
			}
			delete(types, f[0])
		}
	}
	require.Empty(t, types, "columns not found in the DDL")
	return strings.Join(lines, "\n")
}

// withoutKey returns the DDL of table (the election table, or with members the
// members table) without its primary key: a hand-made table on which two rows
// could hold one key.
func withoutKey(t *testing.T, d schema.Dialect, table string, members bool) string {
	t.Helper()
	ddl, err := schema.DDL(d, table)
	if members {
		ddl, err = schema.MembersDDL(d, table)
	}
	require.NoError(t, err)
	out := regexp.MustCompile(`,\s*PRIMARY KEY \([a-z_, ]+\)| PRIMARY KEY`).ReplaceAllString(ddl, "")
	require.NotEqual(t, ddl, out, "no primary key in the DDL")
	return out
}

// TestWrongTableIsRefused: a table whose columns have other types or names than
// casleader's is refused by Check and by the first statement of every store, as a
// deployment error that names the column, the type found and the type needed, and
// nothing is written to it.
func TestWrongTableIsRefused(t *testing.T) {
	t.Parallel()
	type wrong struct {
		name    string
		ddl     func(t *testing.T, table string) string
		mention []string
	}
	cases := map[schema.Dialect][]wrong{
		schema.MySQL: {
			{"IntVersionAndTerm", func(t *testing.T, table string) string {
				return retype(t, schema.MySQL, table, map[string]string{"version": "INT NOT NULL", "term": "INT NOT NULL DEFAULT 0"})
			}, []string{"column version is int", "column term is int", "needs BIGINT", "MODIFY version BIGINT"}},
			{"OtherNames", func(_ *testing.T, table string) string {
				return "CREATE TABLE `" + table + "` (id BIGINT PRIMARY KEY, name VARCHAR(255))"
			}, []string{"has none of casleader's columns", "this is not a casleader table: wrong table name?"}},
			{"NoPrimaryKey", func(t *testing.T, table string) string { return withoutKey(t, schema.MySQL, table, false) },
				[]string{"has no primary key, not (elect_key)"}},
		},
		schema.Postgres: {
			{"BigintTick", func(t *testing.T, table string) string {
				return retype(t, schema.Postgres, table, map[string]string{"tick_time": "BIGINT NOT NULL DEFAULT 0"})
			}, []string{"column tick_time is bigint, needs TIMESTAMPTZ", "ALTER COLUMN tick_time TYPE TIMESTAMPTZ"}},
			{"BooleanStepdown", func(t *testing.T, table string) string {
				return retype(t, schema.Postgres, table, map[string]string{"stepdown": "BOOLEAN NOT NULL DEFAULT false"})
			}, []string{"column stepdown is boolean, needs SMALLINT"}},
			{"OtherNames", func(_ *testing.T, table string) string {
				return `CREATE TABLE "` + table + `" (id BIGINT PRIMARY KEY, name TEXT)`
			}, []string{"has none of casleader's columns", "this is not a casleader table: wrong table name?"}},
			{"NoPrimaryKey", func(t *testing.T, table string) string { return withoutKey(t, schema.Postgres, table, false) },
				[]string{"has no primary key, not (elect_key)"}},
		},
		schema.SQLite: {
			{"TextVersion", func(t *testing.T, table string) string {
				return retype(t, schema.SQLite, table, map[string]string{"version": "TEXT NOT NULL"})
			}, []string{"column version is TEXT, needs INTEGER"}},
			{"OtherNames", func(_ *testing.T, table string) string {
				return `CREATE TABLE "` + table + `" (id INTEGER PRIMARY KEY, name TEXT)`
			}, []string{"has none of casleader's columns", "this is not a casleader table: wrong table name?"}},
			{"NoPrimaryKey", func(t *testing.T, table string) string { return withoutKey(t, schema.SQLite, table, false) },
				[]string{"has no primary key, not (elect_key)"}},
		},
	}
	dbs := map[schema.Dialect]func(t *testing.T) sqlHarness{
		schema.MySQL: func(t *testing.T) sqlHarness {
			db := mydb.MySQL(t)
			return sqlHarness{dialect: schema.MySQL, exec: storetest.DBExec(db),
				open: func(table string) (storetest.Store, error) { return mysql.New(db, table) }}
		},
		schema.Postgres: func(t *testing.T) sqlHarness {
			pool := pgdb.Postgres(t)
			return sqlHarness{dialect: schema.Postgres, exec: poolExec(pool),
				open: func(table string) (storetest.Store, error) { return postgres.New(pool, table) }}
		},
		schema.SQLite: func(t *testing.T) sqlHarness {
			db := litedb.SQLite(t)
			return sqlHarness{dialect: schema.SQLite, exec: storetest.DBExec(db),
				open: func(table string) (storetest.Store, error) { return sqlite.New(db, table) }}
		},
	}
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			h := dbs[d](t)
			for _, tc := range cases[d] {
				t.Run(tc.name, func(t *testing.T) {
					ctx := t.Context()
					table := testdb.Name(t)
					s := h.harness().Open(t, table) // drops the table at the end
					_, err := h.exec(ctx, tc.ddl(t, table))
					require.NoError(t, err, "create the wrong table")

					refused := func(err error, what string) {
						t.Helper()
						require.ErrorIs(t, err, store.ErrDeployment, what)
						require.ErrorIs(t, err, schema.ErrWrongTable, what)
						for _, m := range tc.mention {
							assert.Contains(t, err.Error(), m, what)
						}
						if tc.name == "OtherNames" {
							assert.NotContains(t, err.Error(), "ALTER", "%s: an application's table is not to be altered", what)
						}
						assert.Equal(t, 1, strings.Count(err.Error(), "deployment error"), "%s: %v", what, err)
					}
					refused(s.Check(ctx), "Check")
					_, _, err = s.Observe(ctx, "k")
					refused(err, "Observe")
					_, _, err = s.Insert(ctx, "k", store.Candidate{ID: "a"})
					refused(err, "Insert")
					_, _, err = s.Elect(ctx, "k", store.Candidate{ID: "a", Lease: time.Second}, 1)
					refused(err, "Elect")
					refused(s.CreateTable(ctx), "CreateTable leaves an existing table alone and says what is wrong")
					refused(s.Check(ctx), "Check after CreateTable")

					quoted, err := ident.Quote(d, table)
					require.NoError(t, err)
					n, err := h.exec(ctx, "DELETE FROM "+quoted)
					require.NoError(t, err)
					assert.Zero(t, n, "a row was written to the wrong table")
				})
			}
		})
	}
}

var dialects = []schema.Dialect{schema.MySQL, schema.Postgres, schema.SQLite}

// TestMembersTableWithoutKeyIsRefused: CreateTable refuses a hand-made members
// table whose primary key is not (elect_key, member_id), naming it.
func TestMembersTableWithoutKeyIsRefused(t *testing.T) {
	t.Parallel()
	type db struct {
		dialect schema.Dialect
		exec    func(ctx context.Context, query string, args ...any) (int64, error)
		open    func(table string) (storetest.Store, error)
	}
	my, pool, lite := mydb.MySQL(t), pgdb.Postgres(t), litedb.SQLite(t)
	for _, h := range []db{
		{schema.MySQL, storetest.DBExec(my), func(table string) (storetest.Store, error) { return mysql.New(my, table) }},
		{schema.Postgres, poolExec(pool), func(table string) (storetest.Store, error) { return postgres.New(pool, table) }},
		{schema.SQLite, storetest.DBExec(lite), func(table string) (storetest.Store, error) { return sqlite.New(lite, table) }},
	} {
		t.Run(string(h.dialect), func(t *testing.T) {
			ctx := t.Context()
			table := testdb.Name(t)
			members := table + "_members"
			t.Cleanup(func() {
				for _, name := range []string{table, members} {
					q, _ := ident.Quote(h.dialect, name)
					_, err := h.exec(context.Background(), "DROP TABLE IF EXISTS "+q)
					assert.NoError(t, err)
				}
			})
			ddl, err := schema.DDL(h.dialect, table)
			require.NoError(t, err)
			_, err = h.exec(ctx, ddl)
			require.NoError(t, err)
			_, err = h.exec(ctx, withoutKey(t, h.dialect, table, true))
			require.NoError(t, err)
			s, err := h.open(table)
			require.NoError(t, err)
			err = s.Check(ctx)
			require.ErrorIs(t, err, schema.ErrWrongTable, "Check, so Run, refuses it too")
			assert.Contains(t, err.Error(), members)
			err = s.CreateTable(ctx)
			require.ErrorIs(t, err, store.ErrDeployment)
			require.ErrorIs(t, err, schema.ErrWrongTable)
			assert.Contains(t, err.Error(), members)
			assert.Contains(t, err.Error(), "not (elect_key, member_id)")
		})
	}
}
