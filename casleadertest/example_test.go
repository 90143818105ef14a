package casleadertest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/casleadertest"
)

// A job that sends the invoice of the next night not invoiced yet, while leading.
// Each send is a transaction that checks the elector's guard before it writes: the
// next leader waits for a send whose commit was held, and a send begun after the
// lease was lost is refused. The test runs it on three candidates under faults and
// fails on any violation. (No output: it runs as a test, see invoice_test.go.)
func ExampleCluster() {
	job := func(db *casleadertest.DB) func(ctx context.Context, c *casleadertest.Candidate) {
		return func(ctx context.Context, c *casleadertest.Candidate) {
			for ctx.Err() == nil {
				var night int64
				err := db.SQL.QueryRowContext(ctx, "SELECT COALESCE(MAX(night), 0) + 1 FROM invoices").Scan(&night)
				if err == nil {
					err = c.Act(ctx, func(ctx context.Context) error {
						tx, err := db.SQL.BeginTx(ctx, nil)
						if err != nil {
							return err
						}
						defer func() { _ = tx.Rollback() }()
						if err := c.Elector.Guard(ctx, tx, c.Token); err != nil {
							return err // not the leader in this term any more: do not send
						}
						if _, err := tx.ExecContext(ctx, "INSERT INTO invoices (night, token) VALUES (?, ?)", night, c.Token); err != nil {
							return err
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
	}
	test := func(t *testing.T) {
		db := casleadertest.NewDB(t, casleadertest.SQLite)
		if _, err := db.SQL.ExecContext(t.Context(), "CREATE TABLE invoices (night BIGINT NOT NULL, token BIGINT NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		rep := casleadertest.Cluster{DB: db, Lead: job(db), Lease: 500 * time.Millisecond, Trials: 4}.Run(t)
		if !rep.OK() {
			t.Fatalf("the job acted twice:\n%s", rep)
		}
	}
	_ = test // in the application's _test.go file: func TestNightlyInvoice(t *testing.T)
}

// The checker on a history where a paused leader (a, token 5) sent after the next
// leader (b, token 6) had begun: the report names the action and prints the
// interleaving.
func ExampleCheck() {
	const ms = int64(time.Millisecond)
	h := casleadertest.History{
		Beliefs: []casleadertest.Interval{
			{Cand: "a", Token: 5, Start: 0, End: 300 * ms},
			{Cand: "b", Token: 6, Start: 700 * ms, End: 2000 * ms},
		},
		Actions: []casleadertest.Action{
			{ID: 1, Token: 6, Cand: "b", Check: 710 * ms, Done: 720 * ms},
			{ID: 2, Token: 5, Cand: "a", Check: 1100 * ms, Done: 1110 * ms},
		},
	}
	rep := casleadertest.Check(h, casleadertest.Bounds{Lease: 500 * time.Millisecond, Renew: 300 * time.Millisecond, Poll: 100 * time.Millisecond})
	fmt.Println(rep.OK())
	for _, v := range rep.Violations {
		fmt.Printf("%s: %s\n%s", v.Property, v.Detail, v.Interleaving)
	}
	// Output:
	// false
	// token-order: action 2 of a with token 5 after action 1 of b with token 6
	//   at -710ms: a begins to lead, token 5
	//   at -410ms: a stops leading, token 5
	//   at -10ms: b begins to lead, token 6
	//   at 0s: b begins action 1, token 6
	//   at 10ms: b completed action 1, token 6
	//   at 390ms: a begins action 2, token 5
	//   at 400ms: a completed action 2, token 5
	//   at 1.29s: b stops leading, token 6
	// stale-action: action 2 of a with token 5 began 400ms after b began to lead with token 6
	//   at -700ms: a begins to lead, token 5
	//   at -400ms: a stops leading, token 5
	//   at 0s: b begins to lead, token 6
	//   at 400ms: a begins action 2, token 5
	//   at 410ms: a completed action 2, token 5
	//   at 1.3s: b stops leading, token 6
}
