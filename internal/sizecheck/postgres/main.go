// Command postgres is a minimal PostgreSQL-only casleader program for the
// binary-size check: a pgx pool, the PostgreSQL store and an Elector's Run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/postgres"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	pool, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := postgres.New(pool, "")
	if err != nil {
		return err
	}
	el, err := casleader.New(st, casleader.Config{
		Key: "size-check",
		OnStartedLeading: func(ctx context.Context, token int64) {
			fmt.Println("leading, token", token)
			<-ctx.Done()
		},
	})
	if err != nil {
		return err
	}
	return el.Run(ctx)
}
