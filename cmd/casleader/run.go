package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	casleader "github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/timing"
)

const runUsage = `
Usage: casleader run --key KEY [--id ID] [--priority N]
                     [--lease D --renew D --heartbeat D --poll D]
                     [--grace D] [--exit-on-loss] [--listen ADDR] -- COMMAND [ARGS...]

Takes part in the election KEY and runs COMMAND only while this instance leads, like
'consul lock'. Start the same command line on several hosts: one runs COMMAND, the
others wait and take over when it dies, stops renewing, or is asked to step down
('casleader resign', 'casleader handover').

run needs the database named, with --dsn or $CASLEADER_DSN: the same database for
every candidate. Unlike the other commands it does not fall back to ./casleader.db,
a file of one host, over which every host would elect itself (for candidates on one
host only, name the file: --dsn sqlite://casleader.db).

The child gets the environment of casleader plus:
  CASLEADER_KEY        the election key
  CASLEADER_TOKEN      the fencing token (term) of this leadership: it strictly increases
                       from one leader to the next; pass it with writes that must
                       never come from a deposed leader
  CASLEADER_LEADER_ID  this candidate's ID

The child runs in its own process group (it cannot read from the terminal).
  - It is started when this instance becomes leader.
  - When leadership ends (lost, or a step-down requested), casleader sends SIGTERM to
    the child's process group and SIGKILL after --grace; --grace ends before the
    lease could pass to another candidate (it must be less than lease - renew), so
    the child is gone before another one can start. A step-down request releases the
    lease only after the child is gone.
  - A small supervisor process (casleader's own binary) stands between casleader and
    the child. If casleader dies (even of SIGKILL), it kills the child's group at once.
    If casleader is frozen (SIGSTOP, a paused VM, heavy swapping) and stops
    confirming that it leads, it kills the group with SIGKILL 7/8 of (lease - renew)
    after casleader's last confirmed trust deadline, before another candidate can
    take over. A zero duration flag means the library's default.
  - SIGINT, SIGTERM and SIGHUP are forwarded to the child's group; before a child
    runs they make casleader exit (128+N).
  - When the child exits, casleader terminates what is left of its process group,
    releases the lease (another candidate takes over at once) and exits with the
    child's exit code (128+N if it died of signal N).
  - After losing leadership casleader stays a candidate and runs the command again
    when it is elected again, unless --exit-on-loss is given (exit code 4).
Processes that leave the child's process group (setsid, daemons) are not tracked.

Preferred leader (--priority N, default 0; higher is preferred): a leader hands the
lease (and so the child) over to a live candidate of strictly higher priority once
that candidate has been live for a full --lease, by the members table (created by
'casleader migrate'; see 'casleader status --members'): the leader terminates its
child first, then hands over with one compare-and-set, as 'casleader handover'
does. Equal priorities never hand over, nor do paused candidates or observers
receive the lease, and each handover goes to a higher priority, so the child never
moves back and forth while the candidates stay up.

At start, casleader checks the table: it exits 3 when the database cannot be reached
or the table is missing (run 'casleader migrate'). Later outages are retried: the
leader stops (and terminates the child) at the renew deadline, and campaigns again.

Metrics and health check (--listen ADDR, e.g. :9090 or 127.0.0.1:9090): while run
runs, an HTTP server answers
  GET /metrics   Prometheus metrics of this candidate: casleader_is_leader{key="KEY"}
                 (1 while this instance leads, read at scrape time), casleader_token,
                 casleader_leadership_transitions_total{transition="started"|"stopped"},
                 casleader_leader_changes_total, renewal durations and failures, store
                 errors by kind, and the Go runtime and process metrics
  GET /healthz   200 "ok"; 500 when this instance believes it leads (its term
                 started and its child is not yet gone) but its last successful
                 renewal was sent more than --lease ago: the elector is stuck. Use it
                 as a liveness probe. Followers are healthy. /healthz?verbose
                 describes the election's state.
The address in use is logged at start ("listening" with addr=HOST:PORT; port 0 picks
a free port). An address that cannot be listened on (port in use, malformed address,
no permission) is a usage error: exit 2, before campaigning and before the database is
checked. The endpoints have no authentication: bind them to a private interface.

Timing: heartbeat < renew < lease. The leader trusts its lease for --renew after the
send time of its last successful renewal; followers take over --lease after it, by
the database clock. Followers read the row at least every --poll. Left out, --renew
is 2/3 of --lease, --heartbeat 1/5 of --renew and --grace 3/4 of lease - renew, as
in the library's defaults (15s, 10s, 2s, 3.75s): --lease 3s alone runs with 2s,
400ms and 750ms. The "campaigning" line at start shows the values in effect.
`

func cmdRun(a *app, args []string) error {
	fs := a.flagSet("run", runUsage)
	key := fs.String("key", "", "the election `KEY` (required)")
	id := fs.String("id", "", "this candidate's `ID`, unique among the candidates (default hostname-pid-random)")
	priority := fs.Int("priority", 0, "this candidate's priority `N`: a leader hands over to a live candidate of higher priority once it has been live for a full lease")
	lease := fs.Duration("lease", timing.DefaultLease, "lease: followers take over this long after the leader's last renewal, by the database clock")
	renew := fs.Duration("renew", 0, "renew deadline: the leader stops (and terminates the child) this long after the send time of its last successful renewal (default 2/3 of --lease: 10s)")
	heartbeat := fs.Duration("heartbeat", 0, "time between two renewals by the leader (default 1/5 of --renew: 2s)")
	poll := fs.Duration("poll", timing.DefaultPoll, "longest time between two reads of the row by a follower")
	grace := fs.Duration("grace", 0, "time between SIGTERM and SIGKILL when leadership ends (default 3/4 of lease - renew)")
	exitOnLoss := fs.Bool("exit-on-loss", false, "exit with code 4 after leadership is lost, instead of campaigning again")
	listen := fs.String("listen", "", "serve Prometheus metrics at /metrics and the health check at /healthz on `ADDR` (host:port, e.g. :9090 or 127.0.0.1:0) while running")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if *key == "" {
		return usagef("run", "--key is required: name the election, e.g. --key nightly-report")
	}
	if len(argv) == 0 {
		return usagef("run", "no command given: put it after --, e.g. casleader run --key %s -- ./job.sh", *key)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		code := exitNoExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		return &exitError{code: code, err: err, hint: "check the command after --, and PATH"}
	}
	self, err := os.Executable()
	if err != nil {
		return failf("cannot find casleader's own executable to supervise the child: %v", err)
	}
	if *id == "" {
		*id = casleader.DefaultID()
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := a.open(ctx, mustExist)
	if err != nil {
		return err
	}
	defer d.close()
	r := &runner{log: a.log.With("key", *key, "id", *id), key: *key, id: *id, argv: argv, self: self,
		exitOnLoss: *exitOnLoss, cancel: cancel}
	cfg := casleader.Config{
		Key:               *key,
		ID:                *id,
		LeaseDuration:     *lease,
		RenewDeadline:     *renew,
		HeartbeatInterval: *heartbeat,
		PollInterval:      *poll,
		Priority:          *priority,
		Logger:            a.log,
		OnStartedLeading:  r.lead,
	}
	var obs *observer
	if *listen != "" {
		if obs, err = newObserver(); err != nil {
			return failf("%v", err)
		}
		cfg.Hooks = obs.hooks()
	}
	el, err := casleader.New(d.st, cfg)
	if errors.Is(err, casleader.ErrInvalidConfig) {
		return usageError("run", errors.New(flagNames.Replace(err.Error())))
	}
	if err != nil {
		return failf("%v", err)
	}
	// Every timing derived here comes from the configuration the elector runs with,
	// where a zero flag has become its default.
	eff := el.Config()
	margin := eff.LeaseDuration - eff.RenewDeadline
	if *grace == 0 {
		*grace = margin * 3 / 4
	}
	if *grace < 0 || *grace >= margin {
		return usagef("run", "--grace %v must be positive and less than lease - renew (%v - %v = %v): the child must be gone before another candidate can take over", *grace, eff.LeaseDuration, eff.RenewDeadline, margin)
	}
	if !a.explicitDSN() {
		// Every host would elect itself over a file of its own.
		return usagef("run", "no database given: run needs --dsn or $%s, naming the database that all candidates share (run does not default to ./%s, a file of this host only; for candidates on one host, say so: --dsn sqlite://%s)", envDSN, defaultSQLiteFile, defaultSQLiteFile)
	}
	r.grace = *grace
	r.isLeader, r.trustedUntil = el.IsLeader, el.TrustedUntil
	r.backstop = margin * 7 / 8
	r.keepEvery = max(eff.HeartbeatInterval/4, 5*time.Millisecond)
	if obs != nil {
		// Before the database check and the campaign: a taken port is reported at once.
		if err := obs.listen(*listen); err != nil {
			return err
		}
		defer obs.close() // after Run and the leftover release, before the database closes
	}
	if err := a.check(ctx, d); err != nil {
		return err
	}
	if obs != nil {
		obs.serve(a.log)
	}

	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, forwardedSignals...)
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for sig := range sigc {
			r.signal(sig)
		}
	}()
	a.log.Info("casleader: campaigning", "key", *key, "id", *id, "lease", eff.LeaseDuration, "renew", eff.RenewDeadline,
		"heartbeat", eff.HeartbeatInterval, "poll", eff.PollInterval, "grace", *grace, "table", d.st.Table(), "dsn", redact(d.raw))
	runErr := el.Run(ctx)
	signal.Stop(sigc)
	close(sigc)
	<-forwarded

	r.mu.Lock()
	finished, code, msg := r.finished, r.code, r.msg
	r.mu.Unlock()
	switch {
	case errors.Is(runErr, casleader.ErrNotDrained):
		// Not a database error: the child's supervision did not end in time.
		return failf("election %q: %v", *key, runErr)
	case runErr != nil:
		return a.storeError("election "+fmt.Sprintf("%q", *key), d.target, runErr)
	case !finished:
		return failf("the election ended unexpectedly")
	case msg != "":
		return &exitError{code: code, err: errors.New(msg)}
	}
	return exitCode(code)
}

// flagNames maps Config field names in the library's errors to run's flags.
var flagNames = strings.NewReplacer(
	"LeaseDuration", "--lease", "RenewDeadline", "--renew", "HeartbeatInterval", "--heartbeat",
	"PollInterval", "--poll", "DrainTimeout", "--lease - --renew", "Key ", "--key ", "ID ", "--id ",
)

// runner starts and stops run's child as leadership comes and goes. The elector calls
// lead in its own goroutine; the signal goroutine calls signal.
type runner struct {
	log        *slog.Logger
	key, id    string
	argv       []string
	self       string
	grace      time.Duration
	exitOnLoss bool
	cancel     context.CancelFunc // ends Run, which then releases the lease
	isLeader   func() bool        // the elector's IsLeader
	// the elector's TrustedUntil
	trustedUntil func() (time.Time, bool)
	backstop     time.Duration // the supervisor kills this long after the trust deadline
	keepEvery    time.Duration // time between keep-alives to the supervisor

	mu       sync.Mutex
	child    *child // the running child, nil when none
	finished bool   // no child may start any more; code is the exit code
	code     int
	msg      string // what to print with code, if anything
}

// finish records the exit code and ends the election (Run resigns). Call with mu held.
func (r *runner) finishLocked(code int, msg string) {
	if r.finished {
		return
	}
	r.finished, r.code, r.msg = true, code, msg
	r.cancel()
}

// lead is OnStartedLeading: it runs the child for one term. ctx is cancelled when
// leadership ends, at the renew deadline at the latest.
func (r *runner) lead(ctx context.Context, token int64) {
	killAt, ok := r.killAt()
	r.mu.Lock()
	if r.finished || ctx.Err() != nil || !ok {
		r.mu.Unlock()
		return
	}
	env := append(os.Environ(),
		"CASLEADER_KEY="+r.key,
		fmt.Sprintf("CASLEADER_TOKEN=%d", token),
		"CASLEADER_LEADER_ID="+r.id,
	)
	c, err := startChild(r.self, r.argv, env, killAt)
	if err != nil {
		r.finishLocked(exitNoExec, fmt.Sprintf("cannot start the child: %v", err))
		r.mu.Unlock()
		return
	}
	r.child = c
	r.mu.Unlock()
	r.log.Info("casleader: leading: started the child", "token", token, "pgid", c.pid(), "command", r.argv[0])

	// Keep-alives prove to the supervisor that this instance still leads; without
	// them it kills the group killAfter after the last one (see child).
	stopKeep, keepDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(keepDone)
		t := time.NewTicker(r.keepEvery)
		defer t.Stop()
		for {
			select {
			case <-stopKeep:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				killAt, ok := r.killAt()
				if !ok {
					return
				}
				c.keepAlive(killAt)
			}
		}
	}()
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	close(stopKeep)
	<-keepDone

	if c.exited() && ctx.Err() == nil && r.isLeader() {
		// The child exited while this instance leads: resign and exit with its code.
		code := c.exitCode()
		if sig := c.killedBy(); sig != "" {
			r.log.Warn("casleader: the child's supervisor was killed (by its watchdog after casleader was frozen, or from outside)", "signal", sig)
		}
		r.log.Info("casleader: the child exited: resigning", "exit_code", code, "token", token)
		r.mu.Lock()
		r.finishLocked(code, "")
		r.mu.Unlock()
		if groupAlive(c.pid()) {
			r.log.Warn("casleader: processes of the child's group are still running: terminating them before the lease is released", "pgid", c.pid())
		}
		c.terminate(r.grace, r.log) // returns at once when the group is gone
	} else {
		r.log.Warn("casleader: leadership ended: terminating the child", "token", token, "grace", r.grace, "pgid", c.pid())
		c.terminate(r.grace, r.log)
		r.log.Info("casleader: the child is gone", "exit_code", c.exitCode(), "token", token)
		if r.exitOnLoss {
			r.mu.Lock()
			r.finishLocked(exitLost, fmt.Sprintf("leadership of %q ended (term %d); the child was terminated (--exit-on-loss)", r.key, token))
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	r.child = nil
	r.mu.Unlock()
}

// killAt returns the supervisor's kill time for the elector's current trust deadline
// (CLOCK_MONOTONIC ns; see child), and false when this instance does not lead. The
// CLOCK_MONOTONIC reading is taken before the Go clock reading that converts the
// deadline, so the kill time errs early, never late.
func (r *runner) killAt() (int64, bool) {
	mono := monoNow()
	until, ok := r.trustedUntil()
	if !ok {
		return 0, false
	}
	return mono + int64(time.Until(until)+r.backstop), true
}

// signal forwards sig to the child's process group, or ends the election when no
// child runs.
func (r *runner) signal(sig os.Signal) {
	r.mu.Lock()
	if c := r.child; c != nil {
		r.mu.Unlock()
		r.log.Info("casleader: forwarding the signal to the child's process group", "signal", sig.String(), "pgid", c.pid())
		c.forward(sig) // may wait for the supervisor's handlers: without r.mu
		return
	}
	defer r.mu.Unlock()
	if r.finished {
		return
	}
	r.log.Info("casleader: signal received while not running a child: stopping", "signal", sig.String())
	code := exitFailure
	if s, ok := sig.(syscall.Signal); ok {
		code = exitSignal + int(s)
	}
	r.finishLocked(code, "")
}
