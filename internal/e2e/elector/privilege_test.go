package casleader_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
)

// Least privilege: an account with only SELECT, INSERT and UPDATE on the election
// table runs elections and guards; creating the table needs more. The accounts come
// from .ci/run (casleader_app, without any table privilege); each test grants rights
// on its own tables and revokes them when it ends.

// privDB is one server: an admin connection and the application account's.
type privDB struct {
	dialect schema.Dialect
	admin   func(ctx context.Context, q string) error
	// grant gives the application account privs on table; revoked at cleanup.
	grant func(t *testing.T, privs, table string)
	// app opens a guardDB on table as the application account.
	app func(t *testing.T, table string) guardDB
}

func privDBs() []struct {
	name string
	open func(t *testing.T) privDB
} {
	return []struct {
		name string
		open func(t *testing.T) privDB
	}{
		{"MariaDB", func(t *testing.T) privDB {
			appDSN := testdb.MySQLAppDSN(t)
			root := mydb.MySQL(t)
			exec := func(ctx context.Context, q string) error { _, err := root.ExecContext(ctx, q); return err }
			var dbName string
			require.NoError(t, root.QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&dbName))
			return privDB{
				dialect: schema.MySQL,
				admin:   exec,
				grant: func(t *testing.T, privs, table string) {
					// .ci/run creates casleader_app@'%', @localhost and @127.0.0.1: the
					// server picks the most specific that matches the client.
					granted := 0
					for _, host := range []string{"%", "localhost", "127.0.0.1"} {
						target := fmt.Sprintf("`%s`.`%s` TO 'casleader_app'@'%s'", dbName, table, host)
						if err := exec(t.Context(), "GRANT "+privs+" ON "+target); err != nil {
							t.Logf("grant to casleader_app@%s: %v", host, err)
							continue
						}
						granted++
						t.Cleanup(func() {
							_ = exec(context.Background(), fmt.Sprintf("REVOKE ALL PRIVILEGES ON `%s`.`%s` FROM 'casleader_app'@'%s'", dbName, table, host))
						})
					}
					require.NotZero(t, granted, "no casleader_app account to grant to (.ci/run creates them)")
				},
				app: func(t *testing.T, table string) guardDB {
					db, err := mysql.Open(appDSN)
					require.NoError(t, err)
					t.Cleanup(func() { db.Close() })
					st, err := mysql.New(db, table)
					require.NoError(t, err)
					return guardDB{dialect: schema.MySQL, st: st,
						begin: func(ctx context.Context) (userTx, error) {
							tx, err := db.BeginTx(ctx, nil)
							return sqlUserTx{tx}, err
						},
						exec: func(ctx context.Context, q string) error { _, err := db.ExecContext(ctx, q); return err },
					}
				},
			}
		}},
		{"PostgreSQL", func(t *testing.T) privDB {
			appDSN := testdb.PostgresAppDSN(t)
			pool := pgdb.Postgres(t)
			exec := func(ctx context.Context, q string) error { _, err := pool.Exec(ctx, q); return err }
			return privDB{
				dialect: schema.Postgres,
				admin:   exec,
				grant: func(t *testing.T, privs, table string) {
					require.NoError(t, exec(t.Context(), fmt.Sprintf(`GRANT %s ON %q TO casleader_app`, privs, table)))
					// DROP TABLE drops the grants with the table.
				},
				app: func(t *testing.T, table string) guardDB {
					db, err := sql.Open("pgx", appDSN)
					require.NoError(t, err)
					t.Cleanup(func() { db.Close() })
					st, err := postgres.NewDB(db, table)
					require.NoError(t, err)
					return guardDB{dialect: schema.Postgres, st: st,
						begin: func(ctx context.Context) (userTx, error) {
							tx, err := db.BeginTx(ctx, nil)
							return sqlUserTx{tx}, err
						},
						exec: func(ctx context.Context, q string) error { _, err := db.ExecContext(ctx, q); return err },
					}
				},
			}
		}},
	}
}

// createAsAdmin creates the election table and an actions table as the admin and
// drops them when t ends.
func createAsAdmin(t *testing.T, p privDB) (table, actions string) {
	t.Helper()
	table = testdb.Name(t)
	actions = table + "_actions"
	ctx := t.Context()
	t.Cleanup(func() {
		for _, name := range []string{table, actions, table + "_members"} {
			q, _ := ident.Quote(p.dialect, name)
			assert.NoError(t, p.admin(context.Background(), "DROP TABLE IF EXISTS "+q))
		}
	})
	require.NoError(t, schema.Apply(ctx, execer(p.admin), p.dialect, table))
	qa, _ := ident.Quote(p.dialect, actions)
	require.NoError(t, p.admin(ctx, "CREATE TABLE "+qa+" (token BIGINT NOT NULL)"))
	return table, actions
}

// oldMembersAsAdmin creates, as the admin, the election table and a members table
// as versions before its incarnation column made it, and drops them when t ends.
func oldMembersAsAdmin(t *testing.T, p privDB) (table string) {
	t.Helper()
	table = testdb.Name(t)
	t.Cleanup(func() {
		for _, name := range []string{table, table + "_members"} {
			q, _ := ident.Quote(p.dialect, name)
			assert.NoError(t, p.admin(context.Background(), "DROP TABLE IF EXISTS "+q))
		}
	})
	ddl, err := schema.DDL(p.dialect, table)
	require.NoError(t, err)
	require.NoError(t, p.admin(t.Context(), ddl))
	require.NoError(t, p.admin(t.Context(), testdb.MembersDDLBeforeIncarnation(t, p.dialect, table)))
	return table
}

// execer adapts an exec function to schema.Execer.
type execer func(ctx context.Context, q string) error

func (e execer) ExecContext(ctx context.Context, q string, _ ...any) (sql.Result, error) {
	return nil, e(ctx, q)
}

func TestLeastPrivilege(t *testing.T) {
	for _, srv := range privDBs() {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()

			t.Run("SelectInsertUpdateRunElectionsAndGuards", func(t *testing.T) {
				t.Parallel()
				p := srv.open(t)
				table, actions := createAsAdmin(t, p)
				p.grant(t, "SELECT, INSERT, UPDATE", table)
				p.grant(t, "SELECT, INSERT", actions) // the application's own table
				db := p.app(t, table)
				ctx := t.Context()
				require.NoError(t, db.st.(interface{ Check(context.Context) error }).Check(ctx), "Check needs SELECT only")

				a := startGuarded(t, db.st, "a", false)
				ta := a.token(t)
				qa, _ := ident.Quote(p.dialect, actions)
				require.NoError(t, guardedWrite(ctx, db, a.Elector, ta, qa), "the guard's row lock needs no more than UPDATE")
				b := startGuarded(t, db.st, "b", false)
				require.NoError(t, a.Resign(ctx), "release")
				tb := b.token(t)
				require.NoError(t, guardedWrite(ctx, db, b.Elector, tb, qa))
				require.ErrorIs(t, guardedWrite(ctx, db, a.Elector, ta, qa), casleader.ErrNotLeader)
				require.NoError(t, b.HandoverTo(ctx, "a"), "handover")
				assert.Greater(t, a.token(t), tb)
			})

			t.Run("CreateTableOnExistingTablesNeedsNoCreateRight", func(t *testing.T) {
				t.Parallel()
				p := srv.open(t)
				table, _ := createAsAdmin(t, p)
				p.grant(t, "SELECT, INSERT, UPDATE", table)
				p.grant(t, "SELECT, INSERT, UPDATE, DELETE", table+"_members")
				db := p.app(t, table)
				require.NoError(t, db.st.CreateTable(t.Context()), "every replica calls it at start-up")
			})

			t.Run("MembersTableOfAnEarlierVersionKeepsItsViewWithoutTheRightToAlterIt", func(t *testing.T) {
				t.Parallel()
				p := srv.open(t)
				table := oldMembersAsAdmin(t, p)
				p.grant(t, "SELECT, INSERT, UPDATE", table)
				p.grant(t, "SELECT, INSERT, UPDATE, DELETE", table+"_members")
				db := p.app(t, table)
				ctx := t.Context()
				require.NoError(t, db.st.CreateTable(ctx), "a members table without the incarnation column that this user may not alter is no failure")
				require.NoError(t, db.st.PutMembers(ctx, []store.Member{{Key: "k", ID: "a", Role: "leader", Incarnation: "a-1"}}))
				ms, err := db.st.MembersOf(ctx, []string{"k"}, time.Hour)
				require.NoError(t, err)
				require.Len(t, ms, 1)
				assert.Equal(t, "a", ms[0].ID)
				assert.Empty(t, ms[0].Incarnation, "no column, no incarnation")
				ms, err = db.st.Members(ctx, "k", time.Hour)
				require.NoError(t, err)
				require.Len(t, ms, 1)
				assert.Empty(t, ms[0].Incarnation)
				q, _ := ident.Quote(p.dialect, table+"_members")
				require.Error(t, p.admin(ctx, "SELECT incarnation FROM "+q), "the table was not altered")
			})

			t.Run("CreatingTheTableNeedsMore", func(t *testing.T) {
				t.Parallel()
				p := srv.open(t)
				table := testdb.Name(t)
				db := p.app(t, table)
				err := db.st.CreateTable(t.Context())
				require.Error(t, err, "the application account created a table")
				assert.ErrorIs(t, err, store.ErrDeployment)
				assert.Contains(t, err.Error(), "run `casleader migrate` once as a user with CREATE")
				q, _ := ident.Quote(p.dialect, table)
				_ = p.admin(context.Background(), "DROP TABLE IF EXISTS "+q)
			})

			t.Run("MissingUpdateStopsRunWithAnErrorThatSaysWhatToGrant", func(t *testing.T) {
				t.Parallel()
				p := srv.open(t)
				table, _ := createAsAdmin(t, p)
				p.grant(t, "SELECT, INSERT", table)
				db := p.app(t, table)
				el, err := casleader.New(db.st, casleader.Config{Key: "k", ID: "a",
					LeaseDuration: gLease, RenewDeadline: gRenew, HeartbeatInterval: gBeat, PollInterval: gPoll})
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				// It creates the row (INSERT) and leads, then its first renewal (UPDATE) is
				// refused: a deployment error that stops Run.
				err = el.Run(ctx)
				require.ErrorIs(t, err, store.ErrDeployment)
				assert.Contains(t, err.Error(), "grant SELECT, INSERT, UPDATE")
				assert.Contains(t, err.Error(), table)
				assert.False(t, el.IsLeader())
			})

			t.Run("NoPrivilegeAtAllStopsRunBeforeItReadsTheRow", func(t *testing.T) {
				t.Parallel()
				p := srv.open(t)
				table, _ := createAsAdmin(t, p)
				db := p.app(t, table)
				el, err := casleader.New(db.st, casleader.Config{Key: "k", ID: "a"})
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				err = el.Run(ctx)
				require.ErrorIs(t, err, store.ErrDeployment)
				assert.Contains(t, err.Error(), "grant SELECT, INSERT, UPDATE")
			})
		})
	}
}
