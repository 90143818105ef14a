package casleader_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/faultstore"
	"github.com/casleader/casleader/store"
)

// Server errors injected between the elector and a real store (internal/faultstore):
// each kind is handled as DESIGN.md says. The classification of the real server
// errors is tested in package store.

var (
	_ store.Driver = (*faultstore.Store)(nil)
)

type faultDB struct {
	name    string
	dialect string
	open    func(t *testing.T, table string) guardDB
}

func faultDBs() []faultDB {
	dbs := guardDBs()
	return []faultDB{{"MariaDB", "mysql", dbs[0].open}, {"PostgreSQL", "postgres", dbs[2].open}}
}

// faultElector runs an elector with gLease timings on a fault store over db's store.
func faultElector(t *testing.T, db guardDB, id string) (*faultstore.Store, *guardedElector, <-chan error) {
	t.Helper()
	fs := faultstore.New(db.st)
	g := &guardedElector{tokens: make(chan int64, 16)}
	el, err := casleader.New(fs, casleader.Config{
		Key: "k", ID: id,
		LeaseDuration: gLease, RenewDeadline: gRenew, HeartbeatInterval: gBeat, PollInterval: gPoll,
		OnStartedLeading: func(ctx context.Context, token int64) {
			g.tokens <- token
			<-ctx.Done()
		},
	})
	require.NoError(t, err)
	g.Elector = el
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		done <- el.Run(ctx)
	}()
	g.stop = func() { cancel(); <-finished }
	t.Cleanup(g.stop)
	return fs, g, done
}

// stillLeading samples el for d and fails if it ever stops leading in term tok.
func stillLeading(t *testing.T, el *casleader.Elector, tok int64, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		require.Equal(t, tok, el.Token(), "the leader stepped down")
	}
}

func TestServerErrorsAreHandledByKind(t *testing.T) {
	for _, d := range faultDBs() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()

			t.Run("NotWritableIsNotALostRaceTheLeaderRetriesUntilItsDeadline", func(t *testing.T) {
				t.Parallel()
				db, _, _ := openGuardDB(t, d.open)
				fs, a, done := faultElector(t, db, "a")
				tok := a.token(t)
				observes := fs.Calls(faultstore.OpObserve)
				fs.Fail(faultstore.OpRenew, faultstore.Error(d.dialect, faultstore.ReadOnly))
				// A lost race would make the leader read the row at once; a read-only
				// server is retried: no read, leadership kept until the deadline.
				stillLeading(t, a.Elector, tok, gRenew/3)
				assert.Equal(t, observes, fs.Calls(faultstore.OpObserve), "a read-only server was taken for a lost race")
				require.Eventually(t, func() bool { return !a.IsLeader() }, 30*time.Second, 5*time.Millisecond, "the leader kept trusting a lease it could not renew")
				assert.Greater(t, fs.Calls(faultstore.OpRenew), 2, "renewals are retried")
				// Not fatal: once the server is writable again the candidate leads again.
				fs.Fail(faultstore.OpRenew, nil)
				select {
				case err := <-done:
					t.Fatalf("Run returned on a read-only server: %v", err)
				default:
				}
				a.token(t)
			})

			t.Run("DeadlocksAndSerializationFailuresAreRetriedWithinTheDeadline", func(t *testing.T) {
				t.Parallel()
				db, _, _ := openGuardDB(t, d.open)
				fs, a, _ := faultElector(t, db, "a")
				tok := a.token(t)
				for _, k := range []faultstore.Kind{faultstore.Deadlock, faultstore.Serialization, faultstore.Deadlock} {
					fs.FailNext(faultstore.OpRenew, faultstore.Error(d.dialect, k))
				}
				stillLeading(t, a.Elector, tok, 4*gBeat)
				require.Eventually(t, func() bool { return fs.Calls(faultstore.OpRenew) > 4 }, 30*time.Second, 5*time.Millisecond)
				stillLeading(t, a.Elector, tok, 2*gBeat)
			})

			t.Run("RenewalThatCommittedAndLostItsReplyIsSettledByOneRead", func(t *testing.T) {
				t.Parallel()
				db, _, _ := openGuardDB(t, d.open)
				fs, a, _ := faultElector(t, db, "a")
				tok := a.token(t)
				fs.CommitThenFail(faultstore.OpRenew, faultstore.Error(d.dialect, faultstore.ConnReset))
				require.Eventually(t, func() bool { return fs.Calls(faultstore.OpObserve) > 0 && fs.Calls(faultstore.OpRenew) > 3 }, 30*time.Second, 5*time.Millisecond)
				stillLeading(t, a.Elector, tok, 2*gBeat)
			})

			t.Run("ElectionThatCommittedAndLostItsReplyIsAdopted", func(t *testing.T) {
				t.Parallel()
				db, _, _ := openGuardDB(t, d.open)
				fs := faultstore.New(db.st)
				fs.CommitThenFail(faultstore.OpInsert, faultstore.Error(d.dialect, faultstore.ConnReset))
				el, err := casleader.New(fs, casleader.Config{Key: "k", ID: "a",
					LeaseDuration: gLease, RenewDeadline: gRenew, HeartbeatInterval: gBeat, PollInterval: gPoll})
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- el.Run(ctx) }()
				defer func() { cancel(); <-done }()
				require.Eventually(t, el.IsLeader, 30*time.Second, 5*time.Millisecond)
				assert.Zero(t, fs.Calls(faultstore.OpElect), "the row it created is adopted, not elected again")
				rec, found, err := db.st.Observe(ctx, "k")
				require.NoError(t, err)
				require.True(t, found)
				assert.Equal(t, rec.Term, el.Token(), "the token is the term the lost insert started")
			})

			t.Run("MissingPrivilegeStopsRunWithAnErrorThatSaysWhatToGrant", func(t *testing.T) {
				t.Parallel()
				db, _, _ := openGuardDB(t, d.open)
				fs, a, done := faultElector(t, db, "a")
				a.token(t)
				fs.Fail(faultstore.OpRenew, faultstore.Error(d.dialect, faultstore.NoPrivilege))
				select {
				case err := <-done:
					require.ErrorIs(t, err, store.ErrDeployment)
					assert.False(t, a.IsLeader())
				case <-time.After(30 * time.Second):
					t.Fatal("Run did not stop on a deployment error")
				}
			})

			t.Run("GuardErrorsAreNotFencing", func(t *testing.T) {
				t.Parallel()
				db, _, actions := openGuardDB(t, d.open)
				fs, a, _ := faultElector(t, db, "a")
				tok := a.token(t)
				fs.FailNext(faultstore.OpGuard, faultstore.Error(d.dialect, faultstore.Deadlock))
				err := guardedWrite(t.Context(), db, a.Elector, tok, actions)
				require.ErrorIs(t, err, store.ErrTransient)
				assert.NotErrorIs(t, err, casleader.ErrNotLeader, "a failed check is not a lost lease")
				require.NoError(t, guardedWrite(t.Context(), db, a.Elector, tok, actions), "the retry passes")
			})
		})
	}
}
