package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
)

const resignUsage = `
Usage: casleader resign --key KEY [--wait] [--timeout D]

Asks the current leader of KEY, in whatever process it runs, to step down. The request
is written into the election row (a compare-and-set, retried when a renewal got in
first); it does not touch the lease. The leader sees it at its next renewal, stops
acting (a 'casleader run' leader terminates its child first), releases the lease and
stays out of elections for one lease duration, so another candidate takes over at once.

With --wait the command waits until another candidate leads and has confirmed its
lease with a renewal, and exits 1 if that does not happen within --timeout (for
example when no other candidate runs).

Exits 1 when KEY names no election or --wait times out, 3 on database errors.
`

const handoverUsage = `
Usage: casleader handover --key KEY --to ID [--wait] [--timeout D]

Asks the current leader of KEY, in whatever process it runs, to hand its lease to the
candidate ID. The request is written into the election row (a compare-and-set, retried
when a renewal got in first). The leader sees it at its next renewal, stops acting
(a 'casleader run' leader terminates its child first), then passes the lease to ID with
one compare-and-set and a new term; ID confirms with its first renewal. If no
candidate with that ID is running, the lease expires and any candidate takes over.

With --wait the command waits until ID leads and has confirmed with a renewal, and
exits 1 if another candidate leads instead or --timeout passes.

Exits 1 when KEY names no election or has no leader, or --wait fails; 3 on database
errors.
`

func cmdResign(a *app, args []string) error { return requestStepDown(a, "resign", resignUsage, args) }
func cmdHandover(a *app, args []string) error {
	return requestStepDown(a, "handover", handoverUsage, args)
}

func requestStepDown(a *app, name, usage string, args []string) error {
	fs := a.flagSet(name, usage)
	key := fs.String("key", "", "the election `KEY` (required)")
	to := new(string)
	if name == "handover" {
		to = fs.String("to", "", "the candidate `ID` to hand over to (required)")
	}
	wait := fs.Bool("wait", false, "wait until the new leader has confirmed its lease")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	lease := fs.Duration("lease", timing.DefaultLease, "the candidates' lease, to tell a leader that stopped renewing")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *key == "" {
		return usagef(name, "--key is required: name the election, e.g. --key nightly-report")
	}
	if name == "handover" && *to == "" {
		return usagef(name, "--to is required: name the candidate ID that should lead (see 'casleader status' and the candidates' --id)")
	}
	if *timeout <= 0 || *lease <= 0 {
		return usagef(name, "--timeout and --lease must be positive")
	}
	sctx, stop := signalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, *timeout)
	defer cancel()
	d, err := a.open(ctx, mustExist)
	if err != nil {
		return err
	}
	defer d.close()
	if err := a.check(ctx, d); err != nil {
		return err
	}

	var old store.Record
	for attempt := 1; ; attempt++ {
		rec, found, err := d.st.Observe(ctx, *key)
		if err != nil {
			return a.requestError(name, d, err)
		}
		if !found {
			return failf("no election %q in table %s: no candidate has run with this key", *key, d.st.Table())
		}
		if rec.Released() {
			if name == "resign" {
				fmt.Fprintf(a.stdout, "%q has no leader (the lease is released): nothing to do\n", *key)
				return nil
			}
			return failf("%q has no leader (the lease is released): there is nothing to hand over; the next election picks any candidate", *key)
		}
		if name == "handover" && rec.LeaderID == *to {
			fmt.Fprintf(a.stdout, "%q already leads %q (term %d)\n", *to, *key, rec.Term)
			return nil
		}
		if rec.Expired(*lease) {
			a.log.Warn("casleader: the leader has not renewed for longer than the lease: it may be gone, and then any candidate takes over without a request",
				"leader", rec.LeaderID, "age", fmtDur(rec.Age), "lease", *lease)
		}
		if rec.StepDown && rec.HandoverTo == *to {
			old = rec
			fmt.Fprintf(a.stdout, "%q of %q has a pending %s request already (term %d)\n", rec.LeaderID, *key, name, rec.Term)
			break
		}
		swapped, err := d.st.RequestStepDown(ctx, *key, rec.Version, *to)
		if err != nil {
			return a.requestError(name, d, err)
		}
		if swapped {
			old = rec
			if *to == "" {
				fmt.Fprintf(a.stdout, "asked %q (term %d) to step down from %q; it releases the lease at its next renewal\n", rec.LeaderID, rec.Term, *key)
			} else {
				fmt.Fprintf(a.stdout, "asked %q (term %d) to hand %q over to %q; it hands over at its next renewal\n", rec.LeaderID, rec.Term, *key, *to)
			}
			break
		}
		// A renewal (or another request) got in first: read the row again.
		a.log.Debug("casleader: step-down request lost its compare-and-set; retrying", "version", rec.Version, "attempt", attempt)
		if err := retry.Sleep(ctx, time.Duration(5+rand.IntN(20))*time.Millisecond); err != nil {
			return failf("gave up after %d attempts: the row kept changing (%v)", attempt, err)
		}
	}
	if !*wait {
		return nil
	}
	return waitLeader(ctx, a, d, *key, old, *to, *timeout)
}

// waitLeader waits until a candidate other than old's leader (or exactly to, when
// set) leads key with a newer term and has confirmed it with a renewal.
func waitLeader(ctx context.Context, a *app, d *database, key string, old store.Record, to string, timeout time.Duration) error {
	var last store.Record
	released := false
	for {
		rec, found, err := d.st.Observe(ctx, key)
		switch {
		case ctx.Err() != nil:
			what := "another candidate to lead"
			if to != "" {
				what = to + " to lead"
			}
			return failf("timed out after %s waiting for %s %q: the row shows %s", timeout, what, key, describe(last))
		case err != nil && errors.Is(err, store.ErrDeployment):
			return a.requestError("wait", d, err)
		case err != nil:
			a.log.Warn("casleader: reading the row failed; retrying", "error", err)
		case !found:
			return failf("the election row of %q has disappeared", key)
		default:
			last = rec
			if rec.Released() && !released {
				released = true
				fmt.Fprintf(a.stdout, "%q released the lease\n", old.LeaderID)
			}
			// Version > Term: the term's leader has renewed at least once.
			if !rec.Released() && rec.Term > old.Term && rec.Version > rec.Term {
				switch {
				case to != "" && rec.LeaderID != to:
					return failf("%s leads %q now (term %d), not %s: was a candidate with that ID running?", rec.LeaderID, key, rec.Term, to)
				case rec.LeaderID != old.LeaderID:
					fmt.Fprintf(a.stdout, "%q leads %q now (term %d)\n", rec.LeaderID, key, rec.Term)
					return nil
				}
				// The old leader won again (no other candidate): keep waiting.
			}
		}
		if retry.Sleep(ctx, 50*time.Millisecond) != nil {
			continue // reported at the top
		}
	}
}

func describe(rec store.Record) string {
	if rec.Version == 0 {
		return "nothing yet"
	}
	if rec.Released() {
		return fmt.Sprintf("no leader (version %d)", rec.Version)
	}
	return fmt.Sprintf("leader %q, term %d, version %d, last renewal %s ago", rec.LeaderID, rec.Term, rec.Version, fmtDur(rec.Age))
}

func (a *app) requestError(name string, d *database, err error) error {
	if errors.Is(err, store.ErrInvalidArgument) {
		return usagef(name, "%v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return failf("timed out: %v", redactError(err, d.target))
	}
	return a.storeError(name, d.target, err)
}
