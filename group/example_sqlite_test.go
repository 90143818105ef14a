package group_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/group"
	"github.com/casleader/casleader/store/sqlite"
)

// Many keys in one process: one Group campaigns for every key with batched
// statements, and runs each key's leader work with that key's term, which
// casleader.TermFrom gives as for an Elector (token, guard, Resign).
func ExampleGroup_IsLeader() {
	dir, err := os.MkdirTemp("", "casleader-group-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "election.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	st, err := sqlite.New(db, "")
	if err != nil {
		log.Fatal(err)
	}
	if err := st.CreateTable(context.Background()); err != nil {
		log.Fatal(err)
	}
	keys := []string{"shard-1", "shard-2", "shard-3"}
	g, err := group.New(st, group.Config{
		ID: "worker-1", Keys: keys,
		OnStartedLeading: func(ctx context.Context, key string, token int64) {
			term := casleader.TermFrom(ctx)
			for ctx.Err() == nil && term.IsLeader() {
				// the key's work; term.Guard(ctx, tx) fences its writes
				time.Sleep(10 * time.Millisecond)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	for _, key := range keys {
		for !g.IsLeader(key) {
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Println(key, "led by", g.Leader(key), "token > 0:", g.Token(key) > 0)
	}
	cancel() // releases every key once its work has returned
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// shard-1 led by worker-1 token > 0: true
	// shard-2 led by worker-1 token > 0: true
	// shard-3 led by worker-1 token > 0: true
}
