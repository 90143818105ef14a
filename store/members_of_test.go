package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// membersOfStore is the batched members read of the three SQL stores.
type membersOfStore interface {
	MembersOf(ctx context.Context, keys []string, within time.Duration) ([]store.Member, error)
}

var (
	_ membersOfStore = (*mysql.Store)(nil)
	_ membersOfStore = (*postgres.Store)(nil)
	_ membersOfStore = (*sqlite.Store)(nil)
)

func TestMembersOfReadsTheKeysAskedInOneCall(t *testing.T) {
	t.Parallel()
	for name, open := range membersCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, _ := open(t)
			ctx := t.Context()
			require.NoError(t, s.CreateTable(ctx))
			r := s.(membersOfStore)
			require.NoError(t, s.PutMembers(ctx, []store.Member{
				{Key: "k1", ID: "b", Role: store.RoleLeader, Priority: 2},
				{Key: "k1", ID: "a", Role: store.RoleFollower, Paused: true},
				{Key: "k2", ID: "a", Role: store.RoleObserver, Priority: -1},
				{Key: "k3", ID: "a", Role: store.RoleFollower},
			}))
			ms, err := r.MembersOf(ctx, []string{"k2", "k1", "none"}, time.Hour)
			require.NoError(t, err)
			for i := range ms {
				assert.Less(t, ms[i].Age, time.Minute, "age of %s/%s by the database clock", ms[i].Key, ms[i].ID)
				ms[i].Age = 0
			}
			assert.Equal(t, []store.Member{
				{Key: "k1", ID: "a", Role: store.RoleFollower, Paused: true},
				{Key: "k1", ID: "b", Role: store.RoleLeader, Priority: 2},
				{Key: "k2", ID: "a", Role: store.RoleObserver, Priority: -1},
			}, ms, "the rows of the keys asked, by key and ID; none of k3")

			time.Sleep(50 * time.Millisecond)
			require.NoError(t, s.PutMembers(ctx, []store.Member{{Key: "k2", ID: "c", Role: store.RoleFollower}}))
			ms, err = r.MembersOf(ctx, []string{"k1", "k2"}, 40*time.Millisecond)
			require.NoError(t, err)
			require.Len(t, ms, 1, "only the row written within the bound")
			assert.Equal(t, "c", ms[0].ID)

			_, err = r.MembersOf(ctx, []string{"k1", ""}, time.Hour)
			require.ErrorIs(t, err, store.ErrInvalidArgument, "an empty key is refused")
			_, err = r.MembersOf(ctx, []string{"k1"}, 0)
			require.ErrorIs(t, err, store.ErrInvalidArgument, "a bound must be positive")
		})
	}
}
