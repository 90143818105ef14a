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

// One key changes hands between two groups: HandoverTo stops the key's term on
// worker-1 (its work returns first) and names worker-2 in the row, whose stream of
// the key (Listen) then reports its own term. The group's other keys stay where
// they are.
func Example_groupHandoverTo() {
	dir, err := os.MkdirTemp("", "casleader-group-handover")
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := st.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	keys := []string{"shard-1", "shard-2"}
	start := func(id string) (*casleader.Group, chan error) {
		g, err := casleader.NewGroup(st, casleader.GroupConfig{ID: id, Keys: keys, PollInterval: 100 * time.Millisecond})
		if err != nil {
			log.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		return g, done
	}
	w1, done1 := start("worker-1")
	for !w1.IsLeader("shard-1") || !w1.IsLeader("shard-2") {
		time.Sleep(5 * time.Millisecond)
	}
	w2, done2 := start("worker-2")
	statuses := w2.Listen(ctx, "shard-1")

	if err := w1.HandoverTo(ctx, "shard-1", "worker-2"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker-1 leads shard-1:", w1.IsLeader("shard-1"))
	for s := range statuses {
		if s.Leading {
			fmt.Println("worker-2 leads shard-1, token > 0:", s.Token > 0)
			break
		}
	}
	fmt.Println("worker-1 leads shard-2:", w1.IsLeader("shard-2"))
	cancel()
	for _, done := range []chan error{done1, done2} {
		if err := <-done; err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// worker-1 leads shard-1: false
	// worker-2 leads shard-1, token > 0: true
	// worker-1 leads shard-2: true
}
