package casleadertest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/casleadertest"
)

// invoices is the application of the example: a nightly job that sends each
// night's invoice, and the table that records what was sent.
type invoices struct {
	db    *casleadertest.DB
	table string
	// prepare is how long rendering an invoice takes, between the decision which
	// night to invoice and the send. The rendering does not watch the leadership,
	// and paces the job (without it, the job waits 10 ms between two sends).
	prepare time.Duration
	// next selects the next night to invoice; insert records a sent invoice
	// (night, token, sender), with the dialect's placeholders.
	next, insert string
}

// invoicesOn returns the job on db's invoices table, which renders each invoice
// for prepare.
func invoicesOn(db *casleadertest.DB, prepare time.Duration) *invoices {
	inv := &invoices{db: db, table: db.Table + "_invoices", prepare: prepare}
	inv.next = "SELECT COALESCE(MAX(night), 0) + 1 FROM " + inv.table
	inv.insert = "INSERT INTO " + inv.table + " (night, token, sender) VALUES (?, ?, ?)"
	if db.Dialect == casleadertest.Postgres {
		inv.insert = "INSERT INTO " + inv.table + " (night, token, sender) VALUES ($1, $2, $3)"
	}
	return inv
}

func newInvoices(t *testing.T, db *casleadertest.DB) *invoices {
	inv := invoicesOn(db, 0)
	_, err := db.SQL.ExecContext(t.Context(), "CREATE TABLE "+inv.table+" (night BIGINT NOT NULL, token BIGINT NOT NULL, sender VARCHAR(64) NOT NULL)")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.SQL.ExecContext(ctx, "DROP TABLE "+inv.table)
	})
	return inv
}

// job returns the nightly job: while leading, it sends the invoice of the next
// night not invoiced yet (a night lasts 10 ms here, or inv.prepare). A round (the
// decision, the rendering, the send) runs to its end once begun: its context is
// not the leadership's. So only a guard in the send's own transaction keeps a
// leader whose send was held past its lease from sending an invoice again.
// guarded says whether it checks one.
func (inv *invoices) job(guarded bool) func(ctx context.Context, c *casleadertest.Candidate) {
	return func(ctx context.Context, c *casleadertest.Candidate) {
		for ctx.Err() == nil {
			var night int64
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err := inv.db.SQL.QueryRowContext(rctx, inv.next).Scan(&night)
			cancel()
			rendered := err == nil && inv.prepare > 0
			if err == nil {
				time.Sleep(inv.prepare) // render the invoice
				err = c.Act(ctx, func(ctx context.Context) error {
					ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
					defer cancel()
					tx, err := inv.db.SQL.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer func() { _ = tx.Rollback() }()
					if guarded {
						if err := c.Elector.Guard(ctx, tx, c.Token); err != nil {
							return err
						}
					}
					if _, err := tx.ExecContext(ctx, inv.insert, night, c.Token, c.ID); err != nil {
						return err
					}
					return tx.Commit()
				})
			}
			if errors.Is(err, casleader.ErrNotLeader) || errors.Is(err, casleadertest.ErrKilled) {
				return
			}
			if rendered {
				continue // the rendering paced the job
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// sentTwice returns the nights whose invoice was sent more than once, and how many
// invoices were sent.
func (inv *invoices) sentTwice(t *testing.T) (twice []string, sent int) {
	rows, err := inv.db.SQL.QueryContext(t.Context(), "SELECT night, COUNT(*) FROM "+inv.table+" GROUP BY night ORDER BY night")
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var night, n int
		require.NoError(t, rows.Scan(&night, &n))
		sent += n
		if n > 1 {
			twice = append(twice, fmt.Sprintf("night %d: %d invoices", night, n))
		}
	}
	require.NoError(t, rows.Err())
	return twice, sent
}

var dialects = []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres, casleadertest.SQLite}

// A transaction that writes without the guard, whose round runs to its end once
// begun (context.WithoutCancel): its commit, held past the lease, lands after the
// next leader sent the night's invoice. On MariaDB and PostgreSQL the kit catches
// it. (On SQLite every transaction of the kit's pool begins with the file's write
// lock, so a held commit holds the election off as the guard would: the unguarded
// insert without a transaction is caught there, see TestNightlyInvoiceWithoutTheGuardIsCaught.)
func TestNightlyInvoiceInATransactionWithoutTheGuardIsCaught(t *testing.T) {
	for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := casleadertest.NewDB(t, d)
			inv := newInvoices(t, db)
			rep := casleadertest.Cluster{DB: db, Lead: inv.job(false), Lease: 400 * time.Millisecond, Trials: 2, Kinds: []string{casleadertest.PauseLeader}}.Run(t)
			require.False(t, rep.OK(), "the checker found nothing wrong in the unguarded job:\n%s", rep)
			t.Logf("caught:\n%s", rep)
			assert.True(t, hasViolation(rep, "stale-action"), "no stale action reported:\n%s", rep)
			assert.Contains(t, rep.String(), "begins action", "the report prints the interleaving")
			twice, _ := inv.sentTwice(t)
			assert.NotEmpty(t, twice, "the violations the checker reports are real: an invoice was sent twice")
			assert.False(t, strings.Contains(rep.String(), "VIOLATION liveness"), "the leader came back in time:\n%s", rep)
		})
	}
}

// hasViolation reports whether rep has a violation of property.
func hasViolation(rep casleadertest.Report, property string) bool {
	for _, v := range rep.Violations {
		if v.Property == property {
			return true
		}
	}
	return false
}

// The job under database restarts: the kit stops the server under the running
// candidates, keeps it down for a lease and starts it again, twice. The electors
// come back by themselves, a leader is back within the bound after each restart,
// and no night is sent twice. On a server of the test's own: with the DSN
// variables set (the kit never restarts a server it did not start), it skips.
func TestNightlyInvoiceSurvivesDatabaseRestarts(t *testing.T) {
	for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := casleadertest.NewRestartableDB(t, d)
			inv := newInvoices(t, db)
			const lease, restarts = time.Second, 2
			rep := casleadertest.Cluster{DB: db, Lead: inv.job(true), Lease: lease, Down: lease, Trials: restarts,
				Kinds: []string{casleadertest.RestartDatabase}}.Run(t)
			t.Logf("under %d restarts:\n%s", restarts, rep)
			require.True(t, rep.OK(), "the nightly invoice job under database restarts:\n%s", rep)
			assert.Equal(t, restarts, rep.FaultsByKind[casleadertest.RestartDatabase], "restarts")
			assert.Len(t, rep.Liveness, restarts, "a leader came back after each restart")
			twice, sent := inv.sentTwice(t)
			assert.Empty(t, twice, "invoices sent twice")
			assert.Positive(t, sent, "no invoice was sent")
			// The server was down for longer than the renew deadline, so the leader
			// of before the first restart lost its term: invoices of a later term
			// were sent after a restart.
			assert.GreaterOrEqual(t, inv.terms(t), 2, "invoices were sent in a term begun after a restart")
		})
	}
}

// terms returns how many terms sent invoices.
func (inv *invoices) terms(t *testing.T) int {
	var n int
	require.NoError(t, inv.db.SQL.QueryRowContext(t.Context(), "SELECT COUNT(DISTINCT token) FROM "+inv.table).Scan(&n))
	return n
}
