package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/members"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// TestMembersTableOfAnEarlierVersionGetsTheIncarnationColumn: on a members table
// made before the incarnation column, the store writes and reads its rows without
// it (Incarnation ""); CreateTable adds the column, keeping the rows, and from
// then on the incarnation written is the one read.
func TestMembersTableOfAnEarlierVersionGetsTheIncarnationColumn(t *testing.T) {
	t.Parallel()
	for name, open := range membersCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, exec := open(t)
			ctx := t.Context()
			d := map[string]schema.Dialect{"mysql": schema.MySQL, "postgres": schema.Postgres, "sqlite": schema.SQLite}[name]
			require.NoError(t, exec(ctx, testdb.MembersDDLBeforeIncarnation(t, d, s.Table())))
			quoted, err := ident.Quote(d, s.MembersTable())
			require.NoError(t, err)

			require.NoError(t, s.PutMembers(ctx, []store.Member{{Key: "k", ID: "old", Role: members.RoleFollower, Incarnation: "old-1"}}),
				"a write to the table without the column")
			ms, err := s.MembersOf(ctx, []string{"k"}, time.Hour)
			require.NoError(t, err)
			assert.Equal(t, []string{""}, incarnations(ms), "no column, no incarnation")
			require.Error(t, exec(ctx, "SELECT incarnation FROM "+quoted), "the table has no incarnation column yet")

			require.NoError(t, s.CreateTable(ctx))
			require.NoError(t, exec(ctx, "SELECT incarnation FROM "+quoted), "CreateTable added the column")
			require.NoError(t, s.PutMembers(ctx, []store.Member{{Key: "k", ID: "new", Role: members.RoleLeader, Incarnation: "new-1"}}),
				"the same store, which found no column before, now writes it")
			ms, err = s.MembersOf(ctx, []string{"k"}, time.Hour)
			require.NoError(t, err)
			assert.Equal(t, []string{"new", "old"}, ids(ms), "the row written before the upgrade is kept")
			assert.Equal(t, []string{"new-1", ""}, incarnations(ms))
			ms, err = s.Members(ctx, "k", time.Hour)
			require.NoError(t, err)
			assert.Equal(t, []string{"new-1", ""}, incarnations(ms))
			require.NoError(t, s.CreateTable(ctx), "a second CreateTable has nothing to add")
		})
	}
}

// TestMembersTableReplacedByOneWithoutTheColumnIsReadAgain: a members table
// re-created without the incarnation column after the store read its columns
// (by an earlier version, say) fails one statement, which says so, and the
// store reads the columns again for the next.
func TestMembersTableReplacedByOneWithoutTheColumnIsReadAgain(t *testing.T) {
	t.Parallel()
	for name, open := range membersCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, exec := open(t)
			ctx := t.Context()
			d := map[string]schema.Dialect{"mysql": schema.MySQL, "postgres": schema.Postgres, "sqlite": schema.SQLite}[name]
			require.NoError(t, s.CreateTable(ctx))
			row := []store.Member{{Key: "k", ID: "a", Role: members.RoleLeader, Incarnation: "a-1"}}
			require.NoError(t, s.PutMembers(ctx, row))
			quoted, err := ident.Quote(d, s.MembersTable())
			require.NoError(t, err)
			require.NoError(t, exec(ctx, "DROP TABLE "+quoted))
			require.NoError(t, exec(ctx, testdb.MembersDDLBeforeIncarnation(t, d, s.Table())))

			err = s.PutMembers(ctx, row)
			require.ErrorIs(t, err, store.ErrDeployment)
			assert.Contains(t, err.Error(), "the next call reads its columns again")
			require.NoError(t, s.PutMembers(ctx, row), "written without the column")
			ms, err := s.MembersOf(ctx, []string{"k"}, time.Hour)
			require.NoError(t, err)
			assert.Equal(t, []string{""}, incarnations(ms))
		})
	}
}

func incarnations(ms []store.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Incarnation)
	}
	return out
}
