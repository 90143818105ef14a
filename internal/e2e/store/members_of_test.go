package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/members"
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
				{Key: "k1", ID: "b", Role: members.RoleLeader, Priority: 2},
				{Key: "k1", ID: "a", Role: members.RoleFollower, Paused: true},
				{Key: "k2", ID: "a", Role: members.RoleObserver, Priority: -1},
				{Key: "k3", ID: "a", Role: members.RoleFollower},
			}))
			ms, err := r.MembersOf(ctx, []string{"k2", "k1", "none"}, time.Hour)
			require.NoError(t, err)
			for i := range ms {
				assert.Less(t, ms[i].Age, time.Minute, "age of %s/%s by the database clock", ms[i].Key, ms[i].ID)
				ms[i].Age = 0
			}
			assert.Equal(t, []store.Member{
				{Key: "k1", ID: "a", Role: members.RoleFollower, Paused: true},
				{Key: "k1", ID: "b", Role: members.RoleLeader, Priority: 2},
				{Key: "k2", ID: "a", Role: members.RoleObserver, Priority: -1},
			}, ms, "the rows of the keys asked, by key and ID; none of k3")

			// Rows older than the bound are left out. The bound is half the time
			// since the old rows were written; should the write and the read of
			// the fresh row take longer than that (a loaded machine), the check
			// says nothing and is made again with a gap twice as long.
			for gap := 100 * time.Millisecond; ; gap *= 2 {
				require.Less(t, gap, time.Minute, "the database never answered within half the gap")
				require.NoError(t, s.PutMembers(ctx, []store.Member{{Key: "k1", ID: "b", Role: members.RoleLeader, Priority: 2}}))
				time.Sleep(gap)
				sent := time.Now()
				require.NoError(t, s.PutMembers(ctx, []store.Member{{Key: "k2", ID: "c", Role: members.RoleFollower}}))
				ms, err = r.MembersOf(ctx, []string{"k1", "k2"}, gap/2)
				require.NoError(t, err)
				if time.Since(sent) >= gap/2 {
					continue
				}
				assert.Equal(t, []string{"c"}, memberIDs(ms), "only the row written within the bound")
				break
			}

			_, err = r.MembersOf(ctx, []string{"k1", ""}, time.Hour)
			require.ErrorIs(t, err, store.ErrInvalidArgument, "an empty key is refused")
			_, err = r.MembersOf(ctx, []string{"k1"}, 0)
			require.ErrorIs(t, err, store.ErrInvalidArgument, "a bound must be positive")
		})
	}
}

func memberIDs(ms []store.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}
