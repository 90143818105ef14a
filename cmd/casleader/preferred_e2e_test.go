package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/casleader/casleader/internal/testdb"
)

// TestRunPriorityMovesTheChildToThePreferredCandidate: 'run --priority' hands the
// lease, and so the child, to a live candidate of higher priority once it has been
// live for a full lease; the first child is terminated first, and the child does
// not move back.
func TestRunPriorityMovesTheChildToThePreferredCandidate(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		log := filepath.Join(dir, "child.log")
		key := testdb.Name(t)
		startRun(t, db, key, "cand-low", dir)
		first := waitChildLines(t, log, "start", 1)[0]
		if first.id != "cand-low" {
			t.Fatalf("the only candidate did not lead: %+v", first)
		}
		startRun(t, db, key, "cand-high", dir, "--priority=5")
		second := waitChildLines(t, log, "start", 2)[1]
		if second.id != "cand-high" || second.token <= first.token {
			t.Fatalf("after the preferred candidate came: child %+v, first %+v", second, first)
		}
		sigs := linesOf(readChildLog(t, log), "signal")
		if len(sigs) != 1 || sigs[0].token != first.token {
			t.Fatalf("the first child was not terminated:\n%s", readFile(log))
		}
		// No move back: a lease later the preferred candidate's child still runs alone.
		time.Sleep(testLease)
		if starts := linesOf(readChildLog(t, log), "start"); len(starts) != 2 {
			t.Fatalf("the child moved again:\n%s", readFile(log))
		}
		assertNoOverlap(t, log)
	})
}
