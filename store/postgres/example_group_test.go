package postgres_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/postgres"
)

// One process campaigns for 10,000 shards with batched statements: about ten
// renewal statements per second for all of them.
func Example_group() {
	ctx := context.Background()
	pool, err := postgres.Open(ctx, os.Getenv("ELECTION_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	st, err := postgres.New(pool, "")
	if err != nil {
		log.Fatal(err)
	}
	shards := make([]string, 10000)
	for i := range shards {
		shards[i] = fmt.Sprintf("shard-%05d", i)
	}
	g, err := casleader.NewGroup(st, casleader.GroupConfig{
		ID: "worker-1", Keys: shards,
		OnChange: func(key string, leading bool, token int64) {
			log.Printf("%s: leading=%v token=%d", key, leading, token)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = g.Run(ctx)
}
