package mysql_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/mysql"
)

// A store's own wake-ups wait on named locks with connections of its pool, for at
// most half of it; keys beyond that are found by their reads. To wait on more keys,
// give the store a pool of its own for them with WakePool, sized for them: they hold one connection for the locks the process leads with and one per
// key it follows. (No output: it needs a MySQL or MariaDB server.)
func ExampleWakePool() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	db, err := mysql.Open(os.Getenv("ELECTION_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	const keys = 16
	locks, err := mysql.Open(os.Getenv("ELECTION_DSN")) // a pool of its own
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	locks.SetMaxOpenConns(2*keys + 2) // half of it waits
	st, err := mysql.New(db, "", mysql.WakePool(locks))
	if err != nil {
		log.Fatal(err)
	}
	el, err := casleader.New(st, casleader.Config{Key: "billing-cron"})
	if err != nil {
		log.Fatal(err)
	}
	if err := el.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
