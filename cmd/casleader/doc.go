// Command casleader runs and inspects casleader elections from the shell.
//
//	casleader migrate                       create the election table (idempotent)
//	casleader status [--key K] [--json] [--watch]
//	casleader run --key K [timings] -- CMD  run CMD only while this instance leads
//	casleader resign --key K [--wait]       ask the leader (another process) to step down
//	casleader handover --key K --to ID      ask the leader to hand over to ID
//	casleader demo                          a local failover on a temporary SQLite file
//
// The database comes from --dsn or $CASLEADER_DSN (default: the SQLite file
// ./casleader.db, except for run, which needs it named so that hosts never elect
// themselves over files of their own): mysql://user:pass@host:3306/db (or a
// go-sql-driver DSN after mysql://), postgres://user:pass@host:5432/db, sqlite://path
// or a plain path.
// Passwords are never printed: every error and log line is redacted.
//
// # run
//
// run is 'consul lock' for casleader. The child runs under a supervisor process
// (this binary's hidden supervise-child command) in a process group of its own, and
// gets CASLEADER_KEY, CASLEADER_TOKEN (the fencing token) and CASLEADER_LEADER_ID.
// When leadership ends the group gets SIGTERM, then SIGKILL after --grace, which ends
// before the lease can pass to another candidate (grace < lease - renew). The
// supervisor kills the group by itself when casleader dies (its lifeline pipe
// closes) or stops proving, on the host's monotonic clock, that it still leads (a
// frozen casleader): so the child is gone before another candidate's child can start,
// whatever happens to casleader. When the child exits, run releases the lease and
// exits with the child's code.
//
// # Metrics and health check
//
// With run --listen ADDR (host:port, e.g. :9090; port 0 picks a free port), run serves
// while it runs, over plain HTTP without authentication:
//
//	GET /metrics   Prometheus metrics of package metrics (casleader_is_leader{key="K"},
//	               casleader_token, casleader_leadership_transitions_total, ...) and the
//	               Go runtime and process collectors, from a registry of its own
//	GET /healthz   package healthz: 200 "ok", or 500 when this instance believes it
//	               leads but its last renewal is older than the lease (a liveness probe)
//
// The address in use is logged at start with the key addr. It is listened on before
// the database check and the campaign: an address that cannot be listened on (port in
// use, malformed) exits 2, like any unusable command-line value, without campaigning.
//
// # Exit codes
//
//	0        success (run: the child exited 0)
//	1        the operation did not succeed (no such election, --wait timed out, ...)
//	2        usage error (unknown command or flag, missing --key, bad duration or DSN,
//	         a run --listen address that cannot be listened on)
//	3        database or deployment error (unreachable, missing table, privileges)
//	4        run --exit-on-loss: leadership was lost and the child was terminated
//	126/127  run: the command cannot be executed / was not found
//	128+N    signal N before a child ran, or the child died of signal N
//	other    run: the child's own exit code
//
// Each command has its own --help.
package main
