package notify_test

import (
	"context"
	"log"
	"os"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/postgres"
)

// Electors on a dialect store are woken by the store's own wake-ups: nothing to
// build, run or stop. Here three electors share one store, so one LISTEN connection
// (taken from the pool) serves them all, and a release by any of them wakes the
// others at once.
func ExampleWakeups() {
	ctx := context.Background()
	pool, err := postgres.Open(ctx, os.Getenv("ELECTION_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	st, err := postgres.New(pool, "")
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"billing-cron", "mailer", "reports"} {
		el, err := casleader.New(st, casleader.Config{Key: key})
		if err != nil {
			log.Fatal(err)
		}
		go func() { _ = el.Run(ctx) }()
	}
	<-ctx.Done()
}
