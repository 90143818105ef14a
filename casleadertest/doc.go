// Package casleadertest is a race-test kit for the code an application runs while
// it leads: the nightly job, the consumer, the reconciler. It proves, in the
// application's own tests, that this code never acts twice: it runs several
// candidates of it on a real database, injects faults on the leader, records what
// each candidate did and checks the history.
//
// It is a module of its own (github.com/casleader/casleader/casleadertest), so that
// what it needs for its tests stays out of what a user of the library downloads.
// The library's in-memory store for unit tests under testing/synctest,
// internal/memstore, is not public.
//
// # A database for a test
//
// [NewDB] returns a database for one test, with a fresh election table: MySQL or
// MariaDB from CASLEADER_MYSQL_DSN, PostgreSQL from CASLEADER_POSTGRES_DSN, SQLite
// in a file of the test's temporary directory ([DB.DSN] is then its path). Where a DSN is not set the test is
// skipped with a message naming the variable, or fails under
// CASLEADER_REQUIRE_DB=1 (set it in CI, so that CI never goes green by skipping).
//
// # A cluster of the application's leader code
//
// A [Cluster] runs [Cluster.Candidates] electors of one key, each calling the
// application's [Cluster.Lead] while it leads, with a [Candidate] that carries the
// term's fencing token. Lead calls [Candidate.Act] around each action it takes:
// Act records when the action began and completed, in which term, or that it was
// refused. Faults hit the leader, one at a time ([Cluster.Trials]), every kind of
// [Cluster.Kinds] once, in a shuffled order, before any comes again:
//
//   - [PauseLeader]: the leader's action is held after it began: the first
//     statement of it that would change the database is held on its way (see
//     "The pause" below) for two to three leases, and until another candidate has
//     led and acted; its election store's calls fail meanwhile;
//   - [KillLeader]: the leader ends without releasing its lease, and a fresh
//     candidate takes its place;
//   - [RefuseLeader]: the leader cannot reach the election table for longer than
//     its lease;
//   - [RestartDatabase], only when asked for: the database server is restarted
//     under every candidate (stopped with its fast shutdown, which drops their
//     connections, kept down for [Cluster.Down], started again on the same data);
//     a leader must be back within the bound once the server answers again.
//
// A run proves only what it did. One in which Lead recorded no action through
// Act ("no action was recorded: the Lead function must perform its writes through
// Act, or the run proves nothing"), or in which a requested kind could not be
// applied, fails: its [Report] has a violation of property "untested" that says
// which. The report counts the faults applied by kind ([Report.FaultsByKind]).
//
// # The pause
//
// A leader's context does not make its action safe: a statement already sent can
// be held in the network (or the process frozen inside the driver, after its
// context check) past the lease, and land after the next leader began. [NewDB]
// opens [DB.SQL] through a driver connector of the kit's, which the PauseLeader
// fault uses to do just that, as a delayed packet would: the first statement of
// the paused leader's action (run with the ctx that [Candidate.Act] hands it, or
// one derived from it) that would change the database, a statement outside a
// transaction other than SELECT or SHOW, or the commit of a transaction the action
// began, waits until the fault heals, and is then delivered whatever its context
// says. No context can call it back. The action is recorded as begun when the kit
// let the statement through, and as taken effect when the statement did, whatever
// the job's code made of the reply.
//
// An unguarded job then fails whether or not it honours its context, and a
// guarded one passes: the guard in the same transaction holds the election row, so
// the next leader waits for the held commit (or the guard refuses the send). One
// case is safe without the guard: on SQLite, the kit's pool (as the library's
// store/sqlite.Open) begins every transaction with the file's write lock, which
// keeps the next election out until a held commit has landed; there an insert
// sent without a transaction is what the pause catches.
//
// A pause that finds no such statement within the liveness bound is not applied;
// a run in which no PauseLeader could be applied fails (see above).
//
// # A database the kit may restart
//
// [NewRestartableDB] is [NewDB] on a container started for the test alone and
// removed at its cleanup: [NewDB]'s container is shared by every test of the run,
// and a restart of it would break them. [DB.Restart] restarts it, and so does the
// RestartDatabase fault. The kit never restarts a server given by
// CASLEADER_MYSQL_DSN or CASLEADER_POSTGRES_DSN: with the variable set,
// NewRestartableDB skips the test (also under CASLEADER_REQUIRE_DB=1) and says to
// unset it. SQLite has no server to restart: NewRestartableDB fails the test.
//
// # Candidates in processes of their own
//
// A [ProcessCluster] (Linux) runs candidates as processes of their own: the test
// binary re-executed, whose TestMain is [Main]. Each reaches the database through a
// TCP proxy of its own (toxiproxy, in the test's process), so that faults are real:
// SIGKILL ([KillLeader]), SIGSTOP for longer than the lease and until another
// candidate leads ([StopLeader]), a link that drops every byte ([CutLeader]),
// refuses connections, is slowed beyond the renew deadline or resets replies, a row
// set back to an older version ([RollbackRow]). With [ProcessConfig.Lead] each
// candidate runs the application's function, which [Main] must be given (a
// candidate process finds it by name), with [Candidate.DB] reached through its
// proxy:
//
//	func TestMain(m *testing.M) { casleadertest.Main(m, sendInvoices) }
//
// On SQLite the candidates share the database file on this host and open it
// directly: kills, freezes and rolled-back rows apply, faults of the network do not
// (the schedule leaves them out). A freeze never lands while the process holds
// SQLite's write lock, which would block every writer for as long as it stays
// frozen: the harness stops it between two writes (see [ProcessCluster]).
//
// Without Lead, candidates run the library's own fenced actions: that is the
// library's fault suite (internal/chaos), which records its history in the same
// [History] and judges it with the same [Check].
//
// # The checker
//
// [Check] verifies a [History], per election key: actions never go backwards in
// token, one token is never used by two candidates, no action begins after another
// candidate began to lead in a newer term (an action a fence should have refused),
// beliefs of leadership never overlap, and a leader is back within
// [Bounds.Liveness] of each fault's heal. For a balanced group
// ([ProcessConfig.Balance], [ProcessCluster.RunBalanced]) it also checks that the
// keys are spread fairly again within a bound after each change of the candidates
// ([Share]). [Report.String] prints the violations,
// each with the interleaving of beliefs, actions and faults that broke it.
//
// # Test your leader code
//
// The test of a job that sends each night's invoice, guarded by the elector's
// fence, on each database (the README's section "Test your leader code" has the job,
// and docs/testing.md the same job without the guard, which the same test catches):
//
//	func TestNightlyInvoiceIsSentOnce(t *testing.T) {
//		for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres, casleadertest.SQLite} {
//			t.Run(string(d), func(t *testing.T) {
//				t.Parallel()
//				db := casleadertest.NewDB(t, d)
//				inv := newInvoices(t, db) // creates the invoices table
//				rep := casleadertest.Cluster{DB: db, Lead: inv.send, Lease: 400 * time.Millisecond}.Run(t)
//				if !rep.OK() {
//					t.Fatalf("the nightly invoice job acted twice:\n%s", rep)
//				}
//			})
//		}
//	}
//
// Without the guard, the same test fails with a stale-action violation, also when
// the job honours its context: the paused leader's insert landed after the next
// leader had sent the night's invoice. So does a [ProcessCluster] of candidate
// processes whose leader is frozen (SIGSTOP) between its decision and its send, on
// the three databases (casleadertest's TestNightlyInvoiceInProcesses).
package casleadertest
