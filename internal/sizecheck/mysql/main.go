// Command mysql is a minimal MySQL-only casleader program for the binary-size
// check: go-sql-driver/mysql, the MySQL store and an Elector's Run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/mysql"
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
	db, err := mysql.Open(os.Getenv("MYSQL_DSN"))
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := mysql.New(db, "")
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
