package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// report is the application's code under test: the leader's work, which must stop
// when leadership ends.
func report(ctx context.Context, stopped chan<- error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C: // one step of the work
		case <-ctx.Done():
			stopped <- ctx.Err()
			return
		}
	}
}

// workStopsWhenRenewalsFail runs report under an elector on st, makes every renewal
// fail once it leads, and returns how the work ended.
func workStopsWhenRenewalsFail(st *memstore.Store, cfg casleader.Config) error {
	stopped := make(chan error, 1)
	cfg.OnStartedLeading = func(ctx context.Context, _ int64) { report(ctx, stopped) }
	el, err := casleader.New(st, cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	for !el.IsLeader() {
		time.Sleep(time.Millisecond)
	}
	st.Fail(memstore.OpRenew, errors.New("connection reset")) // the database is cut off
	werr := <-stopped
	cancel()
	if err := <-done; err != nil {
		return err
	}
	return werr
}

// Unit-test the code that runs while leading, without a database: memstore is the
// election table in memory, with faults to inject (Fail, FailNext, CommitThenFail,
// SetDelay). Here every renewal fails, and the work must stop at the leader's renew
// deadline. Inside synctest.Test (package testing/synctest) the same code runs in
// the bubble's fake time, with the default 15 s lease and no wait:
// TestWorkStopsWhenRenewalsFail in this package does so.
func Example() {
	err := workStopsWhenRenewalsFail(memstore.New(), casleader.Config{
		Key: "nightly-report", ID: "replica-1", LeaseDuration: 300 * time.Millisecond,
	})
	fmt.Println("the work stopped:", err)
	// Output:
	// the work stopped: context canceled
}
