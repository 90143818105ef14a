package notify_test

import (
	"context"
	"log"
	"os"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/store/mysql"
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

// When the elections go through PgBouncer in transaction pooling mode, LISTEN does
// not work on the store's pool (its wake-ups test themselves and fall back to
// polling): give the elector a listener on a direct connection instead.
func ExamplePostgres() {
	ctx := context.Background()
	pool, err := postgres.Open(ctx, os.Getenv("ELECTION_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	st, err := postgres.New(pool, "")
	if err != nil {
		log.Fatal(err)
	}
	n, err := postgres.NewNotifier(postgres.NotifierConfig{DSN: os.Getenv("DIRECT_DSN")})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = n.Run(ctx) }()
	el, err := casleader.New(st, casleader.Config{Key: "billing-cron", Notifier: n})
	if err != nil {
		log.Fatal(err)
	}
	_ = el.Run(ctx)
}

// A MySQL or MariaDB store's own wake-ups wait on named locks with connections of
// the store's pool, for at most half of it. To wait on more keys, give the elector
// a notifier on a small pool of its own: it holds one connection for the locks it
// leads with and one per key it follows.
func ExampleMySQL() {
	ctx := context.Background()
	db, err := mysql.Open(os.Getenv("ELECTION_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	st, err := mysql.New(db, "")
	if err != nil {
		log.Fatal(err)
	}
	locks, err := mysql.Open(os.Getenv("ELECTION_DSN")) // a small pool of its own
	if err != nil {
		log.Fatal(err)
	}
	n, err := notify.NewMySQL(notify.MySQLConfig{DB: locks})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = n.Run(ctx) }()
	el, err := casleader.New(st, casleader.Config{Key: "billing-cron", Notifier: n})
	if err != nil {
		log.Fatal(err)
	}
	_ = el.Run(ctx)
}
