package casleader_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// start runs el until the returned stop is called; stop returns Run's error.
func start(el *casleader.Elector) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	return func() error { cancel(); return <-done }
}

// until waits for cond, checking every few milliseconds.
func until(cond func() bool) {
	for !cond() {
		time.Sleep(5 * time.Millisecond)
	}
}

// A planned handover: the leader stops acting, drains its work, and hands the
// lease to a named live candidate with one compare-and-set; the target claims it
// with an election of its own and leads in a new term, with a larger token. (memstore stands in for the shared database.)
func ExampleElector_HandoverTo() {
	st := memstore.New()
	cfg := casleader.Config{Key: "billing-cron", PollInterval: 20 * time.Millisecond}
	cfg.ID = "replica-1"
	first, err := casleader.New(st, cfg)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ID = "replica-2"
	second, err := casleader.New(st, cfg)
	if err != nil {
		log.Fatal(err)
	}
	stop1 := start(first)
	until(first.IsLeader)
	stop2 := start(second)
	until(func() bool { return second.Leader() == "replica-1" })
	token := first.Token()

	if err := first.HandoverTo(context.Background(), "replica-2"); err != nil {
		log.Fatal(err) // ErrNotLeader when this candidate does not lead
	}
	until(second.IsLeader)
	fmt.Println("replica-2 leads:", second.IsLeader(), "with a larger token:", second.Token() > token)
	if err := stop1(); err != nil {
		log.Fatal(err)
	}
	if err := stop2(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// replica-2 leads: true with a larger token: true
}

// A paused candidate never takes over (a paused leader resigns first); Resume lets
// it campaign again. Pause before Run keeps it out from its start.
func ExampleElector_Pause() {
	st := memstore.New()
	el, err := casleader.New(st, casleader.Config{
		Key: "billing-cron", ID: "replica-1", PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	el.Pause()
	stop := start(el)
	time.Sleep(100 * time.Millisecond) // the row is free, yet it does not campaign
	fmt.Println("paused, leading:", el.IsLeader())
	el.Resume()
	until(el.IsLeader)
	fmt.Println("resumed, leading:", el.IsLeader())
	if err := stop(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// paused, leading: false
	// resumed, leading: true
}

// An observer never campaigns: a dashboard or a router learns who leads without
// ever leading.
func ExampleConfig_observer() {
	st := memstore.New()
	leader, err := casleader.New(st, casleader.Config{Key: "billing-cron", ID: "replica-1"})
	if err != nil {
		log.Fatal(err)
	}
	watcher, err := casleader.New(st, casleader.Config{
		Key: "billing-cron", ID: "dashboard", Observer: true, PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	stopLeader := start(leader)
	until(leader.IsLeader)
	stopWatcher := start(watcher)
	until(func() bool { return watcher.Leader() != "" })
	fmt.Println("the leader is", watcher.Leader(), "- the observer leads:", watcher.IsLeader())
	if err := stopWatcher(); err != nil {
		log.Fatal(err)
	}
	if err := stopLeader(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// the leader is replica-1 - the observer leads: false
}

// Code that may be slow follows the leadership stream: the current status at once,
// then each change in order. A slow listener skips intermediate statuses (a gap in
// Seq) but always ends up with the current one; it never delays the elector.
func ExampleElector_Listen() {
	el, err := casleader.New(memstore.New(), casleader.Config{Key: "billing-cron", ID: "replica-1"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	statuses := el.Listen(ctx)
	stop := start(el)
	for s := range statuses {
		if s.Leading {
			fmt.Println("leading:", s.Leader, "token > 0:", s.Token > 0)
			break
		}
	}
	if err := stop(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// leading: replica-1 token > 0: true
}
