package postgres_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/postgres"
)

// Fencing a leader's writes in a pgx transaction: the guard first, then the
// writes, then the commit. A write whose guard passed commits before any newer
// leader can win; a stale term's is refused. (No output: it needs a PostgreSQL
// server.)
func ExampleGuard() {
	ctx := context.Background()
	pool, err := postgres.Open(ctx, os.Getenv("DATABASE_URL")) // a small pool of its own
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := postgres.New(pool, "")
	if err != nil {
		log.Fatal(err)
	}
	if err := st.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	el, err := casleader.New(st, casleader.Config{
		Key: "invoices",
		OnStartedLeading: func(ctx context.Context, token int64) {
			err := sendInvoice(ctx, pool, casleader.TermFrom(ctx))
			if errors.Is(err, casleader.ErrNotLeader) {
				return // another term began: stop acting
			}
			if err != nil {
				log.Print(err)
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

func sendInvoice(ctx context.Context, pool *pgxpool.Pool, term *casleader.Term) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := postgres.Guard(ctx, term, tx); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE invoices SET sent = true WHERE id = $1", 42); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// When the elections go through PgBouncer in transaction pooling mode, LISTEN does
// not work on the store's pool (its wake-ups test themselves and fall back to
// polling): give the store a DSN that reaches PostgreSQL directly for its
// listener. (No output: it needs a PostgreSQL server.)
func ExampleListenDSN() {
	ctx := context.Background()
	pool, err := postgres.Open(ctx, os.Getenv("ELECTION_DSN")) // through PgBouncer
	if err != nil {
		log.Fatal(err)
	}
	st, err := postgres.New(pool, "", postgres.ListenDSN(os.Getenv("DIRECT_DSN")))
	if err != nil {
		log.Fatal(err)
	}
	el, err := casleader.New(st, casleader.Config{Key: "billing-cron"})
	if err != nil {
		log.Fatal(err)
	}
	_ = el.Run(ctx)
}
