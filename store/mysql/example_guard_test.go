package mysql_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/mysql"
)

// Fencing the leader's writes: check the guard inside the transaction, then write,
// then commit. A write whose guard passed commits before any newer leader can win;
// one whose token is stale is refused. (No output: it needs a MySQL server.)
func Example_guard() {
	ctx := context.Background()
	db, err := mysql.Open(os.Getenv("CASLEADER_MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	st, err := mysql.New(db, "")
	if err != nil {
		log.Fatal(err)
	}
	var el *casleader.Elector
	el, err = casleader.New(st, casleader.Config{
		Key: "invoices",
		OnStartedLeading: func(ctx context.Context, token int64) {
			for ctx.Err() == nil {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					continue
				}
				if err := el.Guard(ctx, tx, token); err != nil {
					_ = tx.Rollback()
					if errors.Is(err, casleader.ErrNotLeader) {
						return // another term began: stop acting
					}
					continue // the check could not be made: retry
				}
				_, err = tx.ExecContext(ctx, "UPDATE invoices SET sent = 1 WHERE id = ?", 42)
				if err != nil {
					_ = tx.Rollback()
					continue
				}
				_ = tx.Commit()
				return
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = el.Run(ctx)
}
