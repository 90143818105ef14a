package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store/sqlite"
)

// A service runs the elector beside its other servers in an errgroup, under a
// context that SIGINT or SIGTERM cancels; every error is handled, Run's included.
// On the signal, Run stops campaigning, cancels the leader's work, waits for it,
// releases the row and returns. (Here the leader's work stops the service itself,
// as a signal would; use postgres.Open or mysql.Open for a shared database.)
func Example_service() {
	dir, err := os.MkdirTemp("", "casleader-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := service(filepath.Join(dir, "election.db")); err != nil {
		log.Fatal(err) // e.g. a missing table this user may not create: the error says what to do
	}
	// Output:
	// leading: true
	// the work ended: context canceled
	// stopped cleanly
}

func service(path string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	db, err := sqlite.Open(path) // postgres.Open(ctx, dsn) or mysql.Open(dsn): a small pool of its own
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := sqlite.New(db, "") // table casleader_election
	if err != nil {
		return err
	}
	// Safe in every replica at every start: it creates the tables when missing and
	// only checks them when they exist.
	if err := st.CreateTable(ctx); err != nil {
		return err
	}
	el, err := casleader.New(st, casleader.Config{
		Key: "billing-cron",
		OnStartedLeading: func(ctx context.Context, token int64) {
			fmt.Println("leading:", token > 0)
			stop()       // here: as if SIGTERM came
			<-ctx.Done() // ctx ends the moment leadership does
			fmt.Println("the work ended:", ctx.Err())
		},
	})
	if err != nil {
		return err // a *casleader.ConfigError names the field and the rule
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return el.Run(ctx) })
	g.Go(func() error { <-ctx.Done(); return nil }) // the service's other servers
	if err := g.Wait(); err != nil {
		return err
	}
	fmt.Println("stopped cleanly")
	return nil
}

// New checks the configuration and refuses an unsafe one with a *ConfigError that
// names the field and the rule it breaks.
func Example_invalidConfig() {
	_, err := casleader.New(memstore.New(), casleader.Config{
		Key:           "billing-cron",
		LeaseDuration: 10 * time.Second,
		RenewDeadline: 10 * time.Second, // must be shorter than the lease
	})
	var ce *casleader.ConfigError
	if errors.As(err, &ce) {
		fmt.Println("field:", ce.Field)
		fmt.Println("rule:", ce.Rule)
	}
	fmt.Println(errors.Is(err, casleader.ErrInvalidConfig))
	// Output:
	// field: RenewDeadline
	// rule: (10s) must be less than LeaseDuration (10s): the leader must stop acting before anyone can take over
	// true
}
