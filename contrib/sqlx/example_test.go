package casleadersqlx_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/jmoiron/sqlx"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/mysql"
)

// A service that holds a *sqlx.DB: the store takes db.DB, the guard tx.Tx, and the
// fenced writes use sqlx's helpers on the same transaction. (No output: it needs a
// MySQL server.)
func Example() {
	ctx := context.Background()
	db, err := sqlx.Connect("mysql", os.Getenv("CASLEADER_MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	st, err := mysql.New(db.DB, "")
	if err != nil {
		log.Fatal(err)
	}
	el, err := casleader.New(st, casleader.Config{
		Key: "invoices",
		OnStartedLeading: func(ctx context.Context, token int64) {
			tx, err := db.BeginTxx(ctx, nil)
			if err != nil {
				return
			}
			defer func() { _ = tx.Rollback() }()
			if err := casleader.TermFrom(ctx).Guard(ctx, tx.Tx); err != nil {
				if errors.Is(err, casleader.ErrNotLeader) {
					return // another term began: stop acting
				}
				return // the check could not be made: retry later
			}
			_, err = tx.NamedExecContext(ctx,
				"UPDATE invoices SET sent_by_term = :token WHERE id = :id",
				map[string]any{"token": token, "id": 42})
			if err == nil {
				_ = tx.Commit()
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := el.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
