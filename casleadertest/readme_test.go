package casleadertest_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/casleadertest"
)

// The README ("Test your leader code") quotes this file from "readme:begin" to
// "readme:end", and docs/testing.md from "testing.md:begin" to "testing.md:end";
// TestREADMEQuotesTheTestedCode keeps the quotes and the code the same.

// readme:begin
// send is the nightly job: while leading, it sends the invoice of the next night
// not invoiced yet, with the guard in the send's transaction.
func (inv *invoices) send(ctx context.Context, c *casleadertest.Candidate) {
	for ctx.Err() == nil {
		var night int64
		err := inv.db.SQL.QueryRowContext(ctx, inv.next).Scan(&night) // SELECT COALESCE(MAX(night), 0) + 1 FROM invoices
		if err == nil {
			err = c.Act(ctx, func(ctx context.Context) error {
				tx, err := inv.db.SQL.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				if err := c.Elector.Guard(ctx, tx, c.Token); err != nil {
					return err // another term began: do not send
				}
				if _, err := tx.ExecContext(ctx, inv.insert, night, c.Token, c.ID); err != nil {
					return err // INSERT INTO invoices (night, token, sender) VALUES (?, ?, ?)
				}
				return tx.Commit()
			})
		}
		if errors.Is(err, casleader.ErrNotLeader) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNightlyInvoiceIsSentOnce(t *testing.T) {
	for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres, casleadertest.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := casleadertest.NewDB(t, d)
			inv := newInvoices(t, db) // creates the invoices table
			rep := casleadertest.Cluster{DB: db, Lead: inv.send, Lease: 400 * time.Millisecond}.Run(t)
			if !rep.OK() {
				t.Fatalf("the nightly invoice job acted twice:\n%s", rep)
			}
		})
	}
}

// readme:end

// testing.md:begin
// sendWithoutGuard is send without the guard: the insert on its own, with the
// leadership's context, as most Go code does.
func (inv *invoices) sendWithoutGuard(ctx context.Context, c *casleadertest.Candidate) {
	for ctx.Err() == nil {
		var night int64
		err := inv.db.SQL.QueryRowContext(ctx, inv.next).Scan(&night)
		if err == nil {
			err = c.Act(ctx, func(ctx context.Context) error {
				_, err := inv.db.SQL.ExecContext(ctx, inv.insert, night, c.Token, c.ID)
				return err
			})
		}
		if errors.Is(err, casleader.ErrNotLeader) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNightlyInvoiceWithoutTheGuardIsCaught(t *testing.T) {
	for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres, casleadertest.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := casleadertest.NewDB(t, d)
			inv := newInvoices(t, db)
			rep := casleadertest.Cluster{DB: db, Lead: inv.sendWithoutGuard, Lease: 400 * time.Millisecond}.Run(t)
			if rep.OK() {
				t.Fatalf("the kit did not catch the job without the guard:\n%s", rep)
			}
			t.Logf("caught:\n%s", rep)
		})
	}
}

// testing.md:end

// The README and docs/testing.md quote the code above as it is, so that what a
// user copies is what runs here.
func TestREADMEQuotesTheTestedCode(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	require.NoError(t, err)
	for _, q := range []struct{ doc, marker string }{
		{"../README.md", "readme"},
		{"../docs/testing.md", "testing.md"},
	} {
		doc, err := os.ReadFile(q.doc)
		require.NoError(t, err)
		_, after, ok := strings.Cut(string(src), "// "+q.marker+":begin\n")
		require.True(t, ok, "readme_test.go lost its %s:begin line", q.marker)
		quoted, _, ok := strings.Cut(after, "// "+q.marker+":end\n")
		require.True(t, ok, "readme_test.go lost its %s:end line", q.marker)
		assert.Contains(t, string(doc), "```go\n"+quoted+"```\n",
			"%s must quote readme_test.go from %s:begin to %s:end, as it is; copy it again:\n%s", q.doc, q.marker, q.marker, quoted)
	}
}

// Both jobs of the README are run under the pause that the guard alone survives,
// and the report says what the README says it does: the job without the guard
// sent a night's invoice after the next leader had sent it.
func TestREADMEJobsUnderPauses(t *testing.T) {
	for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres, casleadertest.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := casleadertest.NewDB(t, d)
			inv := newInvoices(t, db)
			pauses := casleadertest.Cluster{DB: db, Lead: inv.send, Lease: 400 * time.Millisecond, Trials: 2, Kinds: []string{casleadertest.PauseLeader}}
			rep := pauses.Run(t)
			require.True(t, rep.OK(), "the guarded job under pauses:\n%s", rep)
			assert.Equal(t, 2, rep.FaultsByKind[casleadertest.PauseLeader], "pauses applied:\n%s", rep)
			twice, sent := inv.sentTwice(t)
			assert.Empty(t, twice, "invoices sent twice")
			assert.Positive(t, sent, "no invoice was sent")

			unguarded := newInvoices(t, casleadertest.NewDB(t, d))
			pauses.DB, pauses.Lead = unguarded.db, unguarded.sendWithoutGuard
			rep = pauses.Run(t)
			require.False(t, rep.OK(), "the job without the guard was not caught:\n%s", rep)
			assert.True(t, hasViolation(rep, "stale-action"), "no stale action reported:\n%s", rep)
			twice, _ = unguarded.sentTwice(t)
			assert.NotEmpty(t, twice, "the stale action the kit reports is real: an invoice was sent twice")
		})
	}
}
