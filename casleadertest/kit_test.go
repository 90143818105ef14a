package casleadertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/casleadertest"
)

// A Lead function that writes without Act records nothing: the run proves
// nothing, and the report says so instead of passing it.
func TestRunWithoutActionsFails(t *testing.T) {
	t.Parallel()
	db := casleadertest.NewDB(t, casleadertest.SQLite)
	inv := newInvoices(t, db)
	direct := func(ctx context.Context, c *casleadertest.Candidate) {
		for night := int64(1); ctx.Err() == nil; night++ {
			_, _ = db.SQL.ExecContext(ctx, inv.insert, night, c.Token, c.ID) // not through c.Act
			time.Sleep(10 * time.Millisecond)
		}
	}
	rep := casleadertest.Cluster{DB: db, Lead: direct, Lease: 400 * time.Millisecond}.Run(t)
	require.False(t, rep.OK(), "a run without actions passed:\n%s", rep)
	assert.Contains(t, rep.String(), "VIOLATION untested: no action was recorded: the Lead function must perform its writes through Act, or the run proves nothing")
	assert.Contains(t, rep.String(), "VIOLATION untested: the pause-leader fault was requested and never applied")
	_, sent := inv.sentTwice(t)
	assert.Positive(t, sent, "the job did write, outside Act")
}

// Every requested kind is applied at least once, even when Trials is fewer than
// the kinds, and the report counts the faults by kind.
func TestEveryKindIsApplied(t *testing.T) {
	t.Parallel()
	db := casleadertest.NewDB(t, casleadertest.SQLite)
	inv := newInvoices(t, db)
	rep := casleadertest.Cluster{DB: db, Lead: inv.send, Lease: 400 * time.Millisecond, Trials: 1}.Run(t)
	require.True(t, rep.OK(), "%s", rep)
	for _, k := range []string{casleadertest.PauseLeader, casleadertest.KillLeader, casleadertest.RefuseLeader} {
		assert.Equal(t, 1, rep.FaultsByKind[k], "faults of kind %s:\n%s", k, rep)
	}
	assert.Contains(t, rep.String(), "faults: kill-leader=1 pause-leader=1 refuse-leader=1")
}
