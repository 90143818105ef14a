package notify_test

import (
	"context"
	"log"
	"os"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/notify"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
)

// A PostgreSQL elector whose followers take over within milliseconds of a resign.
// The elections may go through PgBouncer; the listener needs a direct connection
// (it tests itself and falls back to polling when LISTEN does not work).
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

// A MySQL or MariaDB elector woken through named locks. The notifier holds one
// connection for the locks it leads with and one per key it follows.
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
