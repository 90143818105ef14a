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

// One candidate on an embedded SQLite file: it creates the table, wins, runs its work
// with the leadership context and resigns when its context ends.
func Example() {
	dir, err := os.MkdirTemp("", "casleader-example")
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

	ctx, cancel := context.WithCancel(context.Background())
	el, err := casleader.New(st, casleader.Config{
		Key: "nightly-report",
		ID:  "replica-1",
		OnStartedLeading: func(ctx context.Context, token int64) {
			// Tokens increase with every term; they follow the database clock in
			// microseconds, so a new term's token is larger than any before it even
			// after a database failover that lost writes.
			fmt.Println("leading with a token:", token > 0)
			cancel() // the work is done: end Run, which resigns
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := el.Run(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader after resign:", el.IsLeader())
	// Output:
	// leading with a token: true
	// leader after resign: false
}

// leadership is what code gated on leadership needs: *casleader.Elector has these
// methods, and so does a group's Lease. Declare it where it is used.
type leadership interface {
	IsLeader() bool
	Token() int64
	Leader() string
}

// solo stands in for an elector in a single-instance deployment or a test: it
// always leads, in term 1.
type solo struct{}

func (solo) IsLeader() bool { return true }
func (solo) Token() int64   { return 1 }
func (solo) Leader() string { return "solo" }

var _ leadership = (*casleader.Elector)(nil)

// Gate periodic work on IsLeader, which costs no I/O. Code that takes a small
// interface instead of *Elector runs in a single-instance deployment or a test
// with a stand-in that always leads.
func Example_isLeader() {
	var el leadership = solo{}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for range 3 {
		<-tick.C
		if el.IsLeader() {
			fmt.Println("work as", el.Leader(), "with token", el.Token())
		}
	}
	// Output:
	// work as solo with token 1
	// work as solo with token 1
	// work as solo with token 1
}

// The leader's callback decides it is done: TermFrom gives it its term, whose
// Resign steps down without waiting for the callback that calls it. A process that
// restarts with the same ID can resume the term it saved (Config.ResumeTerm).
func Example_termFrom() {
	dir, err := os.MkdirTemp("", "casleader-example")
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

	stepped := make(chan struct{})
	el, err := casleader.New(st, casleader.Config{
		Key: "migration",
		ID:  "replica-1",
		OnStartedLeading: func(ctx context.Context, _ int64) {
			term := casleader.TermFrom(ctx)
			// ... the leader-only work, fenced with term.Guard(ctx, tx) ...
			if err := term.Resign(); err != nil { // done: step down, returns at once
				log.Print(err)
			}
			<-ctx.Done() // cancelled by the step-down
			fmt.Println("this term still leads:", term.IsLeader())
			close(stepped)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	<-stepped
	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// this term still leads: false
}

// A shutdown hook stops an elector whose Run it does not own: Stop resigns (the
// leader's work returns, the row is released) and returns once Run has returned.
func Example_stop() {
	dir, err := os.MkdirTemp("", "casleader-example")
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
	leading := make(chan struct{})
	el, err := casleader.New(st, casleader.Config{
		Key: "nightly-report",
		OnStartedLeading: func(ctx context.Context, token int64) {
			close(leading)
			<-ctx.Done() // the work winds down when leadership ends
			fmt.Println("work stopped")
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- el.Run(context.Background()) }()
	<-leading

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := el.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("Run returned:", <-runErr)
	rec, _, err := st.Observe(context.Background(), "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", rec.Released())
	// Output:
	// work stopped
	// Run returned: <nil>
	// released: true
}
