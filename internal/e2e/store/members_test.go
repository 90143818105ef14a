package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/members"
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

// membersStore is the members API of the three SQL stores.
type membersStore interface {
	CreateTable(ctx context.Context) error
	Table() string
	MembersTable() string
	PutMembers(ctx context.Context, ms []store.Member) error
	DeleteMembers(ctx context.Context, id string, keys []string) error
	Members(ctx context.Context, key string, within time.Duration) ([]store.Member, error)
	MembersOf(ctx context.Context, keys []string, within time.Duration) ([]store.Member, error)
	PruneMembers(ctx context.Context, olderThan time.Duration) (int64, error)
}

var (
	_ membersStore = (*mysql.Store)(nil)
	_ membersStore = (*postgres.Store)(nil)
	_ membersStore = (*sqlite.Store)(nil)
)

// membersCase opens one store per dialect on a fresh table and drops both tables
// at the end.
func membersCases(t *testing.T) map[string]func(t *testing.T) (membersStore, func(ctx context.Context, q string) error) {
	return map[string]func(t *testing.T) (membersStore, func(ctx context.Context, q string) error){
		"mysql": func(t *testing.T) (membersStore, func(ctx context.Context, q string) error) {
			db := mydb.MySQL(t)
			s, err := mysql.New(db, testdb.Name(t))
			require.NoError(t, err)
			return s, sqlExec(t, db, schema.MySQL, s.Table(), s.MembersTable())
		},
		"postgres": func(t *testing.T) (membersStore, func(ctx context.Context, q string) error) {
			db, err := sql.Open("pgx", testdb.PostgresDSN(t))
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			s, err := postgres.New(pgdb.Postgres(t), testdb.Name(t))
			require.NoError(t, err)
			return s, sqlExec(t, db, schema.Postgres, s.Table(), s.MembersTable())
		},
		"sqlite": func(t *testing.T) (membersStore, func(ctx context.Context, q string) error) {
			db := litedb.SQLite(t)
			s, err := sqlite.New(db, testdb.Name(t))
			require.NoError(t, err)
			return s, sqlExec(t, db, schema.SQLite, s.Table(), s.MembersTable())
		},
	}
}

// sqlExec registers the drop of both tables and returns a raw statement runner.
func sqlExec(t *testing.T, db *sql.DB, d schema.Dialect, tables ...string) func(ctx context.Context, q string) error {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, table := range tables {
			quoted, err := ident.Quote(d, table)
			require.NoError(t, err)
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+quoted); err != nil {
				t.Errorf("drop %s: %v", quoted, err)
			}
		}
	})
	return func(ctx context.Context, q string) error {
		_, err := db.ExecContext(ctx, q)
		return err
	}
}

func TestMembersTableRecordsWhoTakesPartAndExpiresTheSilent(t *testing.T) {
	t.Parallel()
	for name, open := range membersCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, exec := open(t)
			ctx := t.Context()
			require.NoError(t, s.CreateTable(ctx))
			require.NoError(t, s.CreateTable(ctx), "CreateTable is idempotent with the members table")

			const hour = time.Hour
			require.NoError(t, s.PutMembers(ctx, []store.Member{
				{Key: "k", ID: "a", Role: members.RoleLeader, Priority: 3},
				{Key: "k2", ID: "a", Role: members.RoleFollower},
			}))
			require.NoError(t, s.PutMembers(ctx, []store.Member{{Key: "k", ID: "b", Role: members.RoleFollower, Paused: true}}))
			require.NoError(t, s.PutMembers(ctx, []store.Member{{Key: "k", ID: "c", Role: members.RoleObserver, Priority: -1}}))

			ms, err := s.Members(ctx, "k", hour)
			require.NoError(t, err)
			require.Len(t, ms, 3)
			want := []store.Member{
				{Key: "k", ID: "a", Role: members.RoleLeader, Priority: 3},
				{Key: "k", ID: "b", Role: members.RoleFollower, Paused: true},
				{Key: "k", ID: "c", Role: members.RoleObserver, Priority: -1},
			}
			for i := range ms {
				assert.Less(t, ms[i].Age, time.Minute, "age of %s by the database clock", ms[i].ID)
				ms[i].Age = 0
			}
			assert.Equal(t, want, ms)

			// A second write of a row replaces it (the upsert), it does not add one.
			require.NoError(t, s.PutMembers(ctx, []store.Member{{Key: "k", ID: "a", Role: members.RoleFollower}}))
			ms, err = s.Members(ctx, "k", hour)
			require.NoError(t, err)
			require.Len(t, ms, 3)
			assert.Equal(t, members.RoleFollower, ms[0].Role)
			assert.Equal(t, int64(0), ms[0].Priority)

			// A clean stop deletes only its own rows of the keys named.
			require.NoError(t, s.DeleteMembers(ctx, "b", []string{"k"}))
			ms, err = s.Members(ctx, "k", hour)
			require.NoError(t, err)
			assert.Equal(t, []string{"a", "c"}, ids(ms))
			ms, err = s.Members(ctx, "k2", hour)
			require.NoError(t, err)
			assert.Equal(t, []string{"a"}, ids(ms))

			// Rows that stop being written drop out of the view by their age, and
			// the prune deletes them. a's rows were last written an hour ago (set
			// back by hand, so that no amount of load between two statements can
			// blur the bound of one minute).
			d := map[string]schema.Dialect{"mysql": schema.MySQL, "postgres": schema.Postgres, "sqlite": schema.SQLite}[name]
			quoted, err := ident.Quote(d, s.MembersTable())
			require.NoError(t, err)
			back := map[string]string{
				"mysql":    "seen_at - INTERVAL 1 HOUR",
				"postgres": "seen_at - interval '1 hour'",
				"sqlite":   "seen_at - 3600000000",
			}[name]
			require.NoError(t, exec(ctx, "UPDATE "+quoted+" SET seen_at = "+back+" WHERE member_id = 'a'"))
			require.NoError(t, s.PutMembers(ctx, []store.Member{{Key: "k", ID: "c", Role: members.RoleObserver}}))
			ms, err = s.Members(ctx, "k", time.Minute)
			require.NoError(t, err)
			assert.Equal(t, []string{"c"}, ids(ms), "a is older than the bound: only c is shown")
			n, err := s.PruneMembers(ctx, time.Minute)
			require.NoError(t, err)
			assert.Equal(t, int64(2), n, "a's rows of k and k2 are pruned")
			ms, err = s.Members(ctx, "k", hour)
			require.NoError(t, err)
			assert.Equal(t, []string{"c"}, ids(ms))
		})
	}
}

func TestMembersTableMissingIsADeploymentErrorThatSaysWhatToDo(t *testing.T) {
	t.Parallel()
	for name, open := range membersCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, exec := open(t)
			ctx := t.Context()
			require.NoError(t, s.CreateTable(ctx))
			d := map[string]schema.Dialect{"mysql": schema.MySQL, "postgres": schema.Postgres, "sqlite": schema.SQLite}[name]
			quoted, err := ident.Quote(d, s.MembersTable())
			require.NoError(t, err)
			require.NoError(t, exec(ctx, "DROP TABLE "+quoted))

			err = s.PutMembers(ctx, []store.Member{{Key: "k", ID: "a", Role: members.RoleLeader}})
			require.ErrorIs(t, err, store.ErrDeployment)
			assert.Contains(t, err.Error(), "casleader migrate")
			_, err = s.Members(ctx, "k", time.Hour)
			require.ErrorIs(t, err, store.ErrDeployment)
		})
	}
}

func ids(ms []store.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}
