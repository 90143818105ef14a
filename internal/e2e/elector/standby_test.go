package casleader_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/store/postgres"
)

// belief is one interval during which a candidate's IsLeader() was seen true,
// sampled every millisecond: it lies inside the real one, so an overlap of two
// candidates' intervals is certain.
type belief struct {
	id          string
	first, last time.Time
}

// TestFailoverToSynchronousStandby runs three candidates on the multi-host DSN of a
// PostgreSQL primary with a synchronous standby (target_session_attrs=read-write),
// stops the primary while a leader makes fenced writes, and promotes the standby.
// No two candidates may believe they lead at once, fenced writes must never go
// back in token, and a leader must make fenced writes on the promoted standby (the
// same leader, when its renewals reach the standby within the renew deadline: the
// row survived the failover, synchronous commit).
func TestFailoverToSynchronousStandby(t *testing.T) {
	dsn, dir := testdb.PgSyncDSN(t)
	ctx := t.Context()
	cc, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	require.NotEmpty(t, cc.Fallbacks, "%s must name the primary and then the standby", testdb.EnvPgSync)
	hostDSN := func(host string, port uint16) string {
		return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cc.User, host, port, cc.Database)
	}
	primary := hostDSN(cc.Host, cc.Port)
	standby := hostDSN(cc.Fallbacks[len(cc.Fallbacks)-1].Host, cc.Fallbacks[len(cc.Fallbacks)-1].Port)
	sb := pgdb.PostgresAt(t, standby)
	var inRecovery bool
	require.NoError(t, sb.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery))
	if !inRecovery {
		t.Fatalf("the second host of %s is not a standby (an earlier failover promoted it): rebuild the pair with `bash .ci/pgsync`", testdb.EnvPgSync)
	}
	// This test promotes the standby; build the pair again for the next run.
	t.Cleanup(func() {
		out, err := exec.Command("bash", filepath.Join("..", "..", "..", ".ci", "pgsync")).CombinedOutput()
		if err != nil {
			t.Logf("rebuilding the primary + standby pair failed: %v\n%s", err, out)
		}
	})

	table := testdb.Name(t)
	actions := table + "_act"
	pp := pgdb.PostgresAt(t, primary)
	st0, err := postgres.New(pp, table)
	require.NoError(t, err)
	require.NoError(t, st0.CreateTable(ctx))
	_, err = pp.Exec(ctx, `CREATE TABLE `+actions+` (id BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL, cand TEXT NOT NULL)`)
	require.NoError(t, err)

	const (
		lease     = 1500 * time.Millisecond
		renew     = 900 * time.Millisecond
		heartbeat = 150 * time.Millisecond
		poll      = 300 * time.Millisecond
	)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var beliefs []belief
	for i := range 3 {
		id := fmt.Sprintf("c%d", i)
		pool, err := postgres.Open(ctx, dsn)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		st, err := postgres.New(pool, table)
		require.NoError(t, err)
		var el *casleader.Elector
		el, err = casleader.New(st, casleader.Config{
			Key: "failover", ID: id,
			LeaseDuration: lease, RenewDeadline: renew, HeartbeatInterval: heartbeat, PollInterval: poll,
			OnStartedLeading: func(ctx context.Context, token int64) {
				for ctx.Err() == nil {
					func() {
						tx, err := pool.Begin(ctx)
						if err != nil {
							return
						}
						defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
						if postgres.Guard(ctx, el.Fence(token), tx) != nil {
							return
						}
						if _, err := tx.Exec(ctx, `INSERT INTO `+actions+` (token, cand) VALUES ($1, $2)`, token, id); err != nil {
							return
						}
						_ = tx.Commit(ctx)
					}()
					select {
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
				}
			},
		})
		require.NoError(t, err)
		wg.Go(func() { _ = el.Run(runCtx) })
		wg.Go(func() { // sample the belief
			var cur *belief
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-runCtx.Done():
					if cur != nil {
						mu.Lock()
						beliefs = append(beliefs, *cur)
						mu.Unlock()
					}
					return
				case <-tick.C:
				}
				now := time.Now()
				if el.IsLeader() {
					if cur == nil {
						cur = &belief{id: id, first: now}
					}
					cur.last = now
				} else if cur != nil {
					mu.Lock()
					beliefs = append(beliefs, *cur)
					mu.Unlock()
					cur = nil
				}
			}
		})
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
			wg.Wait()
		}
	}()

	countActions := func(db *pgxpool.Pool) int64 {
		var n int64
		_ = db.QueryRow(ctx, `SELECT count(*) FROM `+actions).Scan(&n)
		return n
	}
	require.Eventually(t, func() bool { return countActions(pp) >= 20 }, 30*time.Second, 10*time.Millisecond,
		"no leader made fenced writes on the primary")

	// Fail over: the primary stops at once (as if its host died), the standby is
	// promoted.
	pgctl, err := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	require.NoError(t, err)
	require.NotEmpty(t, pgctl, "pg_ctl not found under /usr/lib/postgresql")
	failedAt := time.Now()
	out, err := exec.Command("runuser", "-u", "postgres", "--", pgctl[len(pgctl)-1], "stop", "-D", filepath.Join(dir, "primary"), "-m", "immediate", "-w").CombinedOutput()
	require.NoError(t, err, "stop the primary: %s", out)
	_, err = sb.Exec(ctx, "SELECT pg_promote()")
	require.NoError(t, err)
	promotedAt := time.Now()
	base := countActions(sb)
	require.Eventually(t, func() bool { return countActions(sb) >= base+20 }, 60*time.Second, 10*time.Millisecond,
		"no leader made fenced writes on the promoted standby")
	t.Logf("primary stopped; standby promoted %v later; fenced writes again %v after the promotion",
		promotedAt.Sub(failedAt).Round(time.Millisecond), time.Since(promotedAt).Round(time.Millisecond))

	stop()
	wg.Wait()
	stopped = true

	// No two candidates believed at once.
	overlaps := 0
	for i, a := range beliefs {
		for _, b := range beliefs[i+1:] {
			if a.id != b.id && a.first.Before(b.last) && b.first.Before(a.last) {
				overlaps++
				end, start := a.last, a.first
				if b.last.Before(end) {
					end = b.last
				}
				if b.first.After(start) {
					start = b.first
				}
				t.Errorf("%s and %s both believed they led for %v", a.id, b.id, end.Sub(start))
			}
		}
	}
	// Fenced writes, in commit order, never go back in token; no token has two users.
	rows, err := sb.Query(ctx, `SELECT token, cand FROM `+actions+` ORDER BY id`)
	require.NoError(t, err)
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
	t.Logf("%d belief intervals, %d fenced writes, %d terms, %d overlaps, %d token regressions", len(beliefs), n, len(owner), overlaps, regressions)
	assert.Zero(t, regressions, "fenced writes went back in token")
	if len(owner) == 1 {
		t.Logf("the leader kept its lease across the failover (its renewals reached the promoted standby within the renew deadline)")
	}
}
