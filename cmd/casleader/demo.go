package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	casleader "github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/store"
)

const demoUsage = `
Usage: casleader demo [--verbose]

Needs no setup and ends by itself within 30 seconds. It creates a SQLite file in a
temporary directory, starts three candidate processes (node-1, node-2, node-3) on one
election with short timings (lease 1.5s, renew deadline 1s, heartbeat 250ms, poll
250ms) and prints a timeline of the election row:

  1. one candidate wins (its first term) and renews;
  2. the leader is killed with SIGKILL: it can neither renew nor release, so the others
     wait until its lease has passed since its last renewal, then one takes over with
     a larger term (the fencing token);
  3. a resign request is written into the row (as 'casleader resign' does): the new
     leader sees it at its next renewal, steps down and releases the lease, and the
     last candidate takes over at once;
  4. the candidates are stopped and the temporary directory is removed.

--dsn and --table are ignored: the demo always uses its own temporary file.
Exits 0 when every step was seen, 1 otherwise.
`

// Demo timings: short, and valid for the library (heartbeat < renew < lease).
const (
	demoLease     = 1500 * time.Millisecond
	demoRenew     = time.Second
	demoHeartbeat = 250 * time.Millisecond
	demoPoll      = 250 * time.Millisecond
	demoKey       = "demo"
	demoTimeout   = 28 * time.Second
)

func cmdDemo(a *app, args []string) error {
	fs := a.flagSet("demo", demoUsage)
	verbose := fs.Bool("verbose", false, "show the candidates' logs (prefixed with their IDs) on stderr")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return failf("cannot find casleader's own executable to start the candidates: %v", err)
	}
	dir, err := os.MkdirTemp("", "casleader-demo-")
	if err != nil {
		return failf("cannot create a temporary directory: %v", err)
	}
	defer os.RemoveAll(dir)

	sctx, stop := signalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, demoTimeout)
	defer cancel()

	a.dsn = "sqlite://" + filepath.Join(dir, "demo.db")
	d, err := a.open(ctx, mayCreate)
	if err != nil {
		return err
	}
	defer d.close()
	if err := d.st.CreateTable(ctx); err != nil {
		return a.storeError("create the demo table", d.target, err)
	}

	dm := &demo{a: a, st: d.st, start: time.Now(), procs: map[string]*exec.Cmd{}, lifelines: map[string]io.Closer{}}
	defer dm.stopAll()
	fmt.Fprintf(a.stdout, "casleader demo: 3 candidates, one election %q in %s\n", demoKey, d.driver)
	fmt.Fprintf(a.stdout, "timings: lease %s, renew deadline %s, heartbeat %s, poll %s\n\n", demoLease, demoRenew, demoHeartbeat, demoPoll)
	var started []string
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("node-%d", i)
		pid, err := dm.startCandidate(self, a.dsn, a.table, id, *verbose)
		if err != nil {
			return failf("cannot start candidate %s: %v", id, err)
		}
		started = append(started, fmt.Sprintf("%s (pid %d)", id, pid))
	}
	dm.say("started %s", strings.Join(started, ", "))

	err = dm.script(ctx)
	switch {
	case err == nil:
	case sctx.Err() != nil:
		dm.say("interrupted: stopping the candidates and removing %s", dir)
		return exitCode(exitSignal + int(syscall.SIGINT))
	default:
		dm.say("%v", err)
		dm.say("stopping the candidates and removing %s", dir)
		return failf("the demo did not complete: %v", err)
	}
	dm.say("stopping the candidates and removing %s", dir)
	dm.stopAll()
	fmt.Fprintf(a.stdout, "\ndemo finished in %.1fs\n", time.Since(dm.start).Seconds())
	return nil
}

// script runs the demo's steps.
func (dm *demo) script(ctx context.Context) error {
	// 1. The first election.
	first, err := dm.watchUntil(ctx, "a first leader", func(r store.Record) bool { return !r.Released() })
	if err != nil {
		return err
	}
	if _, err := dm.watchUntil(ctx, "renewals", func(r store.Record) bool { return false }, 2*time.Second); err != nil {
		return err
	}
	cur, err := dm.observe(ctx)
	if err != nil {
		return err
	}
	if cur.LeaderID == first.LeaderID && cur.Term == first.Term {
		dm.say("%s renewed %d times (every %s): row version %d, last renewal %s ago", cur.LeaderID, cur.Version-cur.Term, demoHeartbeat, cur.Version, fmtDur(cur.Age))
	}

	// 2. Kill the leader: nobody renews or releases its lease.
	victim := cur
	p := dm.procs[victim.LeaderID]
	if p == nil {
		return fmt.Errorf("the row names %q, which is not one of the demo's candidates", victim.LeaderID)
	}
	if err := p.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s: %w", victim.LeaderID, err)
	}
	killed := time.Now()
	_ = p.Wait()
	dm.say("SIGKILL %s (pid %d): its lease stays in the row; the others must wait %s after its last renewal", victim.LeaderID, p.Process.Pid, demoLease)
	next, err := dm.watchUntil(ctx, "a takeover", func(r store.Record) bool {
		return !r.Released() && r.LeaderID != victim.LeaderID && r.Term > victim.Term
	})
	if err != nil {
		return err
	}
	dm.say("takeover: %s took over %.2fs after the kill (lease %s); fencing token %d -> %d",
		next.LeaderID, time.Since(killed).Seconds(), demoLease, victim.Term, next.Term)

	// 3. A graceful step-down, requested through the row like 'casleader resign'.
	if _, err := dm.watchUntil(ctx, "renewals", func(r store.Record) bool { return false }, time.Second); err != nil {
		return err
	}
	asked, err := dm.requestStepDown(ctx)
	if err != nil {
		return err
	}
	requested := time.Now()
	dm.say("resign request written into the row for %s (term %d): it steps down at its next renewal", asked.LeaderID, asked.Term)
	last, err := dm.watchUntil(ctx, "a leader after the resign request", func(r store.Record) bool {
		return !r.Released() && r.LeaderID != asked.LeaderID && r.Term > asked.Term
	})
	if err != nil {
		return err
	}
	dm.say("graceful handover: %s leads %.2fs after the request, without waiting for the lease; fencing token %d -> %d",
		last.LeaderID, time.Since(requested).Seconds(), asked.Term, last.Term)
	return nil
}

type demo struct {
	a     *app
	st    electionStore
	start time.Time

	mu        sync.Mutex // serialises the timeline's lines
	procs     map[string]*exec.Cmd
	lifelines map[string]io.Closer // the candidates' stdin: closed, they exit
	lastSeen  store.Record
	seen      bool
	stopped   bool
}

func (dm *demo) say(format string, args ...any) {
	dm.mu.Lock()
	defer dm.mu.Unlock()
	fmt.Fprintf(dm.a.stdout, "%6.2fs  %s\n", time.Since(dm.start).Seconds(), fmt.Sprintf(format, args...))
}

// startCandidate starts one demo-candidate process and returns its PID. The
// candidate exits when its stdin reaches EOF, so it never outlives the demo.
func (dm *demo) startCandidate(self, dsn, table, id string, verbose bool) (int, error) {
	cmd := exec.Command(self, "demo-candidate", "--dsn", dsn, "--table", table, "--key", demoKey, "--id", id,
		"--lease", demoLease.String(), "--renew", demoRenew.String(),
		"--heartbeat", demoHeartbeat.String(), "--poll", demoPoll.String(), "--log-level", dm.a.logLevel)
	if verbose {
		cmd.Stderr = &prefixWriter{w: dm.a.stderr, prefix: fmt.Sprintf("  %s | ", id)}
	}
	life, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	dm.procs[id] = cmd
	dm.lifelines[id] = life
	return cmd.Process.Pid, nil
}

// stopAll stops the candidates that still run (they resign) and reaps them.
func (dm *demo) stopAll() {
	if dm.stopped {
		return
	}
	dm.stopped = true
	ids := make([]string, 0, len(dm.procs))
	for id := range dm.procs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		_ = dm.lifelines[id].Close()
		if p := dm.procs[id]; p.ProcessState == nil {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, id := range ids {
		p := dm.procs[id]
		if p.ProcessState != nil {
			continue
		}
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
}

func (dm *demo) observe(ctx context.Context) (store.Record, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rec, found, err := dm.st.Observe(rctx, demoKey)
	if err == nil && !found {
		err = errors.New("no row yet")
	}
	return rec, err
}

// watchUntil polls the row, printing every change of leader or term, until cond
// holds (or, with a duration, until that time has passed).
func (dm *demo) watchUntil(ctx context.Context, what string, cond func(store.Record) bool, forAtMost ...time.Duration) (store.Record, error) {
	var until time.Time
	if len(forAtMost) > 0 {
		until = time.Now().Add(forAtMost[0])
	}
	for {
		rec, err := dm.observe(ctx)
		if err == nil {
			dm.report(rec)
			if cond(rec) {
				return rec, nil
			}
		}
		if !until.IsZero() && time.Now().After(until) {
			return rec, nil
		}
		if retry.Sleep(ctx, 40*time.Millisecond) != nil {
			return rec, fmt.Errorf("timed out waiting for %s", what)
		}
	}
}

// report prints a change of leader or term.
func (dm *demo) report(rec store.Record) {
	last, seen := dm.lastSeen, dm.seen
	dm.lastSeen, dm.seen = rec, true
	switch {
	case seen && rec.LeaderID == last.LeaderID && rec.Term == last.Term:
	case rec.Released():
		dm.say("%s released the lease (row version %d)", last.LeaderID, rec.Version)
	default:
		dm.say("%s leads: term %d, row version %d", rec.LeaderID, rec.Term, rec.Version)
	}
}

// requestStepDown writes a resign request into the row, retrying when a renewal got
// in first, and returns the row it asked.
func (dm *demo) requestStepDown(ctx context.Context) (store.Record, error) {
	for {
		rec, err := dm.observe(ctx)
		if err == nil && !rec.Released() {
			ok, err := dm.st.RequestStepDown(ctx, demoKey, rec.Version, "")
			if err == nil && ok {
				return rec, nil
			}
		}
		if retry.Sleep(ctx, time.Duration(5+rand.IntN(20))*time.Millisecond) != nil {
			return rec, errors.New("timed out writing the resign request")
		}
	}
}

// prefixWriter prefixes each line with prefix.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		if _, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i]); err != nil {
			return len(b), nil // the demo's stderr is gone: drop the line
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

const demoCandidateUsage = `
Usage: casleader demo-candidate --key KEY --id ID [timings]

Internal: one candidate of 'casleader demo'. It campaigns until SIGINT or SIGTERM, or
until its stdin reaches EOF (the demo has ended or died), then resigns.
`

func cmdDemoCandidate(a *app, args []string) error {
	fs := a.flagSet("demo-candidate", demoCandidateUsage)
	key := fs.String("key", demoKey, "the election `KEY`")
	id := fs.String("id", "", "this candidate's `ID`")
	lease := fs.Duration("lease", demoLease, "lease")
	renew := fs.Duration("renew", demoRenew, "renew deadline")
	heartbeat := fs.Duration("heartbeat", demoHeartbeat, "heartbeat interval")
	poll := fs.Duration("poll", demoPoll, "poll interval")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	d, err := a.open(ctx, mustExist)
	if err != nil {
		return err
	}
	defer d.close()
	log := a.log // the elector adds key and id
	el, err := casleader.New(d.st, casleader.Config{
		Key: *key, ID: *id,
		LeaseDuration: *lease, RenewDeadline: *renew, HeartbeatInterval: *heartbeat, PollInterval: *poll,
		Logger: log,
		OnStartedLeading: func(ctx context.Context, token int64) {
			log.Info("demo: leading", "id", *id, "token", token)
			<-ctx.Done()
			log.Info("demo: stopped acting", "id", *id, "token", token)
		},
	})
	if errors.Is(err, casleader.ErrInvalidConfig) {
		return usageError("demo-candidate", errors.New(flagNames.Replace(err.Error())))
	}
	if err != nil {
		return failf("%v", err)
	}
	if err := el.Run(ctx); err != nil {
		return a.storeError("election", d.target, err)
	}
	return nil
}
