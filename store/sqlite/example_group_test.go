package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store/sqlite"
)

// Many keys in one process: one Group campaigns for every key with batched
// statements, and runs each key's leader work with that key's term, which
// casleader.TermFrom gives as for an Elector (token, guard, Resign).
func Example_group() {
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
	g, err := casleader.NewGroup(st, casleader.GroupConfig{
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

// Balanced keys: replicas that run the same keys with Balance spread them, each
// leading its fair share, and move only what must move when one joins or leaves.
func Example_balancedGroups() {
	dir, err := os.MkdirTemp("", "casleader-balance-example")
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
	tenants := []string{"tenant-1", "tenant-2", "tenant-3", "tenant-4", "tenant-5", "tenant-6"}
	ctx, cancel := context.WithCancel(context.Background())
	var replicas []*casleader.Group
	done := make(chan error, 2)
	for _, id := range []string{"replica-1", "replica-2"} {
		g, err := casleader.NewGroup(st, casleader.GroupConfig{ID: id, Keys: tenants, Balance: true, LeaseDuration: time.Second})
		if err != nil {
			log.Fatal(err)
		}
		replicas = append(replicas, g)
		go func() { done <- g.Run(ctx) }()
	}
	for !balancedOver(replicas, tenants) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, g := range replicas {
		fmt.Println(g.ID(), "leads", led(g, tenants), "tenants")
	}
	cancel()
	for range replicas {
		if err := <-done; err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// replica-1 leads 3 tenants
	// replica-2 leads 3 tenants
}

func led(g *casleader.Group, keys []string) int {
	n := 0
	for _, k := range keys {
		if g.IsLeader(k) {
			n++
		}
	}
	return n
}

func balancedOver(gs []*casleader.Group, keys []string) bool {
	for _, g := range gs {
		if led(g, keys) != len(keys)/len(gs) {
			return false
		}
	}
	return true
}
