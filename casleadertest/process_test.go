//go:build linux

package casleadertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/casleadertest"
	"github.com/casleader/casleader/schema"
)

// sendInvoices is the guarded nightly job as a candidate process runs it: its
// database (through the candidate's proxy) and tables come from c.DB.
func sendInvoices(ctx context.Context, c *casleadertest.Candidate) {
	inv := &invoices{db: c.DB, table: c.DB.Table + "_invoices"}
	inv.job(true)(ctx, c)
}

// The guarded job in candidate processes of their own, killed (SIGKILL), frozen
// (SIGSTOP past the lease) and cut off (a proxy that drops every byte): no
// violation, no invoice sent twice.
func TestNightlyInvoiceUnderProcessFaults(t *testing.T) {
	for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := casleadertest.NewDB(t, d)
			inv := newInvoices(t, db)
			// A lease of 2 s: the candidates are processes built with -race that
			// share the machine with the other tests.
			c, err := casleadertest.NewProcessCluster(casleadertest.ProcessConfig{
				Dialect: schema.Dialect(d), DSN: db.DSN, Table: db.Table, Candidates: 3,
				Lease: 2 * time.Second, Renew: 1200 * time.Millisecond, Heartbeat: 200 * time.Millisecond, Poll: 400 * time.Millisecond,
				Slack: 4 * time.Second, Trials: 4, Seed: uint64(time.Now().UnixNano()),
				Kinds: []string{casleadertest.KillLeader, casleadertest.StopLeader, casleadertest.CutLeader},
				Lead:  sendInvoices, Logf: t.Logf,
			})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			rep, err := c.Run(t.Context())
			require.NoError(t, err)
			if !rep.OK() {
				t.Fatalf("the nightly invoice job acted twice:\n%s", rep)
			}
			twice, sent := inv.sentTwice(t)
			assert.Empty(t, twice, "invoices sent twice")
			assert.Positive(t, sent, "no invoice was sent")
			assert.GreaterOrEqual(t, sent, rep.ActionsChecked, "an action recorded is an invoice sent (a commit whose reply was lost, or a candidate killed before it reported, sends one unrecorded)")
		})
	}
}

// The TestMain of a test binary whose tests run a ProcessCluster with a Lead
// function: a candidate process (the binary re-executed) finds its function among
// those given to Main and runs it; otherwise the tests run. (No output: it is the
// shape of a TestMain, which an example cannot be.)
func ExampleMain() {
	testMain := func(m *testing.M) { casleadertest.Main(m, sendInvoices) }
	_ = testMain // in the application's _test.go file: func TestMain(m *testing.M) { casleadertest.Main(m, sendInvoices) }
}

// A cluster of candidate processes that run the application's job under real
// faults. (No output: it needs a database, see TestNightlyInvoiceUnderProcessFaults.)
func ExampleProcessCluster() {
	test := func(t *testing.T) {
		db := casleadertest.NewDB(t, casleadertest.Postgres)
		c, err := casleadertest.NewProcessCluster(casleadertest.ProcessConfig{
			Dialect: schema.Dialect(db.Dialect), DSN: db.DSN, Table: db.Table,
			Lease: 2 * time.Second, Renew: 1200 * time.Millisecond, Heartbeat: 200 * time.Millisecond, Poll: 400 * time.Millisecond,
			Slack: 4 * time.Second, Trials: 4, Lead: sendInvoices, Logf: t.Logf,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rep, err := c.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Fatalf("the job acted twice:\n%s", rep)
		}
	}
	_ = test // in the application's _test.go file: func TestSendInvoices(t *testing.T)
}
