package casleader_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/store/mysql"
)

// TestGaleraCandidatesOnEveryNode runs one candidate per Galera node, each making
// fenced writes through the guard on its own node, and kills the leader (its lease
// kept, as after a crash) several times; a new candidate replaces it on the same
// node. No two candidates may believe they lead at once, and fenced writes, in
// commit order, never go back in token.
func TestGaleraCandidatesOnEveryNode(t *testing.T) {
	dbs := mydb.Galera(t)
	ctx := t.Context()
	table := testdb.Name(t)
	actions, seq := table+"_act", table+"_seq"
	st0, err := mysql.New(dbs[0], table)
	require.NoError(t, err)
	require.NoError(t, st0.CreateTable(ctx))
	for _, q := range []string{
		`CREATE TABLE ` + actions + ` (n BIGINT PRIMARY KEY, token BIGINT NOT NULL, cand VARCHAR(64) NOT NULL)`,
		`CREATE TABLE ` + seq + ` (id INT PRIMARY KEY, n BIGINT NOT NULL)`,
		`INSERT INTO ` + seq + ` VALUES (1, 0)`,
	} {
		_, err := dbs[0].ExecContext(ctx, q)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, tb := range []string{actions, seq, table} {
			_, _ = dbs[0].Exec("DROP TABLE IF EXISTS " + tb)
		}
	})

	const (
		lease     = 1500 * time.Millisecond
		renew     = 900 * time.Millisecond
		heartbeat = 150 * time.Millisecond
		poll      = 300 * time.Millisecond
		kills     = 4
	)
	var mu sync.Mutex
	var beliefs []belief
	var wg sync.WaitGroup
	type cand struct {
		el   *casleader.Elector
		node int
		kill context.CancelFunc
	}
	// fenced makes one fenced write on db in term token: the counter row gives the
	// commit order (every fenced transaction writes it, so they also serialize).
	fenced := func(ctx context.Context, el *casleader.Elector, db *sql.DB, token int64) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return
		}
		defer func() { _ = tx.Rollback() }()
		if el.Guard(ctx, tx, token) != nil {
			return
		}
		if _, err := tx.ExecContext(ctx, `UPDATE `+seq+` SET n = LAST_INSERT_ID(n + 1) WHERE id = 1`); err != nil {
			return
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+actions+` (n, token, cand) VALUES (LAST_INSERT_ID(), ?, ?)`, token, el.ID()); err != nil {
			return
		}
		_ = tx.Commit()
	}
	start := func(node, gen int) *cand {
		id := fmt.Sprintf("n%d-%d", node, gen)
		st, err := mysql.New(dbs[node], table)
		require.NoError(t, err)
		var el *casleader.Elector
		el, err = casleader.New(st, casleader.Config{
			Key: "galera", ID: id, KeepLeaseOnExit: true,
			LeaseDuration: lease, RenewDeadline: renew, HeartbeatInterval: heartbeat, PollInterval: poll,
			OnStartedLeading: func(ctx context.Context, token int64) {
				for ctx.Err() == nil {
					fenced(ctx, el, dbs[node], token)
					select {
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
				}
			},
		})
		require.NoError(t, err)
		runCtx, kill := context.WithCancel(ctx)
		wg.Go(func() { _ = el.Run(runCtx) })
		wg.Go(func() { // sample the belief every millisecond
			var cur *belief
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			flush := func() {
				if cur != nil {
					mu.Lock()
					beliefs = append(beliefs, *cur)
					mu.Unlock()
					cur = nil
				}
			}
			for {
				select {
				case <-runCtx.Done():
					flush()
					return
				case <-tick.C:
				}
				now := time.Now()
				if el.IsLeader() {
					if cur == nil {
						cur = &belief{id: id, first: now}
					}
					cur.last = now
				} else {
					flush()
				}
			}
		})
		return &cand{el: el, node: node, kill: kill}
	}
	cands := []*cand{start(0, 0), start(1, 0), start(2, 0)}
	defer func() {
		for _, c := range cands {
			c.kill()
		}
		wg.Wait()
	}()
	leaderOf := func() int {
		for i, c := range cands {
			if c.el.IsLeader() {
				return i
			}
		}
		return -1
	}
	count := func() int64 {
		var n int64
		_ = dbs[0].QueryRowContext(ctx, `SELECT COUNT(*) FROM `+actions).Scan(&n)
		return n
	}
	leaders := map[int]bool{}
	for k := range kills + 1 {
		var li int
		require.Eventually(t, func() bool { li = leaderOf(); return li >= 0 }, 30*time.Second, time.Millisecond, "no leader (round %d)", k)
		base := count()
		require.Eventually(t, func() bool { return count() >= base+10 }, 30*time.Second, 10*time.Millisecond, "the leader made no fenced writes (round %d)", k)
		leaders[cands[li].node] = true
		if k == kills {
			break
		}
		c := cands[li]
		c.kill() // a crash: the lease stays until it expires
		cands[li] = start(c.node, k+1)
	}
	for _, c := range cands {
		c.kill()
	}
	wg.Wait()
	cands = nil

	overlaps := 0
	for i, a := range beliefs {
		for _, b := range beliefs[i+1:] {
			if a.id != b.id && a.first.Before(b.last) && b.first.Before(a.last) {
				overlaps++
				t.Errorf("%s and %s both believed they led", a.id, b.id)
			}
		}
	}
	rows, err := dbs[0].QueryContext(ctx, `SELECT token, cand FROM `+actions+` ORDER BY n`)
	require.NoError(t, err)
	defer rows.Close()
	var last int64
	owner := map[int64]string{}
	regressions, n := 0, 0
	for rows.Next() {
		var tok int64
		var cand string
		require.NoError(t, rows.Scan(&tok, &cand))
		n++
		if tok < last {
			regressions++
		}
		last = max(last, tok)
		if o, ok := owner[tok]; ok && o != cand {
			t.Errorf("token %d used by %s and %s", tok, o, cand)
		}
		owner[tok] = cand
	}
	require.NoError(t, rows.Err())
	t.Logf("%d leader kills, leaders on %d nodes, %d belief intervals, %d fenced writes in %d terms, %d overlaps, %d token regressions",
		kills, len(leaders), len(beliefs), n, len(owner), overlaps, regressions)
	assert.Zero(t, regressions, "fenced writes went back in token")
	assert.Greater(t, len(owner), kills, "a term per leader")
}
