package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/storetest"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
)

// TestGaleraGuard runs the guard with the fenced writer and the new leader on
// different nodes of a Galera cluster, where row locks do not cross nodes and only
// write-set certification does.
func TestGaleraGuard(t *testing.T) {
	dbs := mydb.Galera(t)
	ctx := context.Background()
	table := testdb.Name(t)
	a, err := mysql.New(dbs[0], table)
	require.NoError(t, err)
	b, err := mysql.New(dbs[1], table)
	require.NoError(t, err)
	require.NoError(t, a.CreateTable(ctx))
	actions := table + "_act"
	_, err = dbs[0].ExecContext(ctx, "CREATE TABLE "+actions+" (k VARCHAR(64) PRIMARY KEY, token BIGINT NOT NULL)")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = dbs[0].Exec("DROP TABLE IF EXISTS " + actions)
		_, _ = dbs[0].Exec("DROP TABLE IF EXISTS " + table)
	})

	// elect makes id the leader of key through st, retrying what a concurrent
	// write on another node makes transient (certification conflicts) and a row
	// not yet applied on st's node (a lost compare-and-set from a stale version).
	elect := func(st *mysql.Store, key, id string) int64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			rec, found, err := st.Observe(ctx, key)
			if err == nil && found {
				term, won, err := st.Elect(ctx, key, store.Candidate{ID: id, Lease: time.Microsecond}, rec.Version)
				if err == nil && won {
					return term
				}
				if err != nil && !errors.Is(err, store.ErrTransient) {
					t.Fatalf("elect %s on its node: %v", id, err)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("%s did not win %q within 30s", id, key)
		return 0
	}

	// A guarded transaction open on node 1 passes the guard and makes its fenced
	// write; then a takeover wins on node 2; then the transaction commits. Without
	// cross-node fencing the commit lands after the newer term was won.
	t.Run("TakeoverOnAnotherNodeFailsTheFencedCommit", func(t *testing.T) {
		const trials = 100
		landed := 0
		for i := range trials {
			key := fmt.Sprintf("k%d", i)
			term, inserted, err := a.Insert(ctx, key, store.Candidate{ID: "a"})
			require.NoError(t, err)
			require.True(t, inserted)

			tx, err := dbs[0].BeginTx(ctx, nil)
			require.NoError(t, err)
			require.NoError(t, a.Guard(ctx, tx, key, "a", term, time.Hour), "trial %d: the guard refused a live term", i)
			_, err = tx.ExecContext(ctx, "INSERT INTO "+actions+" (k, token) VALUES (?, ?)", key, term)
			require.NoError(t, err)

			newTerm := elect(b, key, "b")
			require.Greater(t, newTerm, term)

			if err := tx.Commit(); err == nil {
				landed++
				t.Logf("trial %d: the write fenced by term %d committed after term %d was won on another node", i, term, newTerm)
			} else {
				_ = tx.Rollback()
			}
		}
		require.Zero(t, landed, "fenced writes that committed after a newer term was won on another node, of %d trials", trials)
	})

	// The guard's writes leave the row as it was: the leader's renewal (a
	// compare-and-set on version) still wins after a guarded transaction
	// committed, and the row still reads as freshly renewed.
	t.Run("GuardedCommitLeavesTheLeadersRenewalValid", func(t *testing.T) {
		key := "renew"
		term, inserted, err := a.Insert(ctx, key, store.Candidate{ID: "a"})
		require.NoError(t, err)
		require.True(t, inserted)
		for i := range 3 {
			tx, err := dbs[0].BeginTx(ctx, nil)
			require.NoError(t, err)
			require.NoError(t, a.Guard(ctx, tx, key, "a", term, time.Hour))
			_, err = tx.ExecContext(ctx, "INSERT INTO "+actions+" (k, token) VALUES (?, ?)", fmt.Sprintf("renew%d", i), term)
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
			var fresh bool
			require.NoError(t, dbs[0].QueryRowContext(ctx, "SELECT tick_time = update_time FROM "+table+" WHERE elect_key = ?", key).Scan(&fresh))
			require.True(t, fresh, "the guard left update_time changed")
			swapped, err := a.Renew(ctx, key, "a", term+int64(i))
			require.NoError(t, err)
			require.True(t, swapped, "renewal %d after a guarded commit lost its compare-and-set", i)
		}
	})
}

// TestGaleraConformance runs the conformance suite on one node of a Galera cluster
// (the second: not the one the cluster was bootstrapped from).
func TestGaleraConformance(t *testing.T) {
	t.Parallel()
	db := mydb.Galera(t)[1]
	runBoth(t, sqlHarness{
		dialect: schema.MySQL,
		exec:    storetest.DBExec(db),
		open:    func(table string) (storetest.Store, error) { return mysql.New(db, table) },
	})
}
