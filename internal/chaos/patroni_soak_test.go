//go:build linux

package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/chaos"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/schema"
)

const (
	// envPatroniSoak runs TestPatroniSoak for this long (a Go duration, e.g. 20m).
	envPatroniSoak = "CASLEADER_PATRONI_SOAK"
	// envPatroniDSN is the multi-host DSN of .ci/patroni's three nodes.
	envPatroniDSN = "CASLEADER_PATRONI_DSN"
)

// Database events of the Patroni soak.
const (
	dbSwitchover = "switchover"   // patronictl switchover to the synchronous standby
	dbKill       = "kill-primary" // SIGKILL of the primary's Patroni and PostgreSQL: a failover after ttl
	dbCrash      = "crash-primary"
)

// dbEvent is one event on the Patroni cluster: Kind began at Start (the command
// started), the old primary (node Old) was last seen writable at Lost, and the
// database had a writable primary again (node New) at Promoted; CLOCK_MONOTONIC,
// as the history's.
type dbEvent struct {
	Kind                  string
	Old, New              string
	Start, Lost, Promoted int64
	Output                string // what .ci/patroni printed
}

// TestPatroniSoak is a soak on .ci/patroni's cluster (CASLEADER_PATRONI_DSN, three
// PostgreSQL nodes under Patroni in synchronous mode): three candidates (Electors,
// the soak's timings) on the multi-host DSN with target_session_attrs=read-write,
// the fault suite's leader kills (CASLEADER_CHAOS_KINDS to change them), and
// meanwhile, every 15 to 35 s, an event on the primary: a Patroni switchover, a
// kill of the primary node (Patroni and PostgreSQL; the synchronous standby is
// promoted once the leader key's ttl has run out, and the node rejoins 2 to 7 s
// later), or a crash of the primary's PostgreSQL alone (its Patroni restarts it).
// No two leaders and no token regression are allowed; it reports per event how long
// the database had no writable primary, and casleader's time to a leader after the
// promotion.
func TestPatroniSoak(t *testing.T) {
	v := os.Getenv(envPatroniSoak)
	if v == "" {
		t.Skipf("%s=20m runs a soak on the Patroni cluster of %s (start it with: export %s=\"$(bash .ci/patroni)\"), killing primaries", envPatroniSoak, envPatroniDSN, envPatroniDSN)
	}
	soak, err := time.ParseDuration(v)
	require.NoError(t, err, "%s=%q", envPatroniSoak, v)
	dsn := os.Getenv(envPatroniDSN)
	require.NotEmpty(t, dsn, "%s: the multi-host DSN that bash .ci/patroni prints", envPatroniDSN)
	hosts, err := chaos.PgHosts(dsn)
	require.NoError(t, err)
	require.Len(t, hosts, 3, "%s lists the three nodes of .ci/patroni", envPatroniDSN)
	pc, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)

	seed := uint64(time.Now().UnixNano())
	tm := suiteTimings(true)
	// A dead primary keeps Patroni's leader key until its ttl (10 s) runs out, and
	// a crashed one is recovered and restarted by its Patroni: 14-23 s measured
	// on the loaded 2-core machine. The harness waits for a leader within the
	// liveness bound before each trial, so the bound must cover that.
	tm.slack += 40 * time.Second
	kinds := []string{chaos.KillLeader}
	if v := os.Getenv(envKinds); v != "" {
		kinds = strings.Split(v, ",")
	}
	c, err := chaos.New(chaos.Config{
		Dialect: schema.Postgres, DSN: dsn, Table: testdb.Name(t), Candidates: 3,
		Lease: tm.lease, Renew: tm.renew, Heartbeat: tm.heartbeat, Poll: tm.poll, Slack: tm.slack,
		Duration: soak, Seed: seed, Kinds: kinds, ClockOffsets: true,
		Logf: t.Logf,
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var events []dbEvent
	var eventErr error
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 2))
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(15*time.Second + time.Duration(rng.Int64N(int64(20*time.Second)))):
			}
			kind := []string{dbSwitchover, dbSwitchover, dbKill, dbKill, dbCrash}[rng.IntN(5)]
			ev, err := patroniEvent(pc, hosts, kind, rng)
			if err != nil {
				eventErr = err
				return
			}
			events = append(events, ev)
			t.Logf("%s %s: node %s -> %s, no writable primary for %v (%v after the command began)\n%s", time.Now().Format("15:04:05.000"), ev.Kind, ev.Old, ev.New,
				time.Duration(ev.Promoted-ev.Lost).Round(time.Millisecond), time.Duration(ev.Promoted-ev.Start).Round(time.Millisecond), ev.Output)
		}
	})
	start := time.Now()
	rep, err := c.Run(context.Background())
	stop()
	wg.Wait()
	require.NoError(t, err)
	require.NoError(t, eventErr)

	// Per event: the time the database had no writable primary, and casleader's
	// time from the promotion to a leader.
	byKind := map[string][]time.Duration{}
	var promos, toLeader []time.Duration
	kept := 0
	var lines []string
	for _, ev := range events {
		promo := time.Duration(ev.Promoted - ev.Lost)
		promos = append(promos, promo)
		byKind[ev.Kind] = append(byKind[ev.Kind], promo)
		line := fmt.Sprintf("  %s node %s -> %s: no primary for %v", ev.Kind, ev.Old, ev.New, promo.Round(time.Millisecond))
		switch d, k, ok := leaderAfterPromotion(c.History.Beliefs, ev, tm.renew); {
		case k:
			kept++
			line += ", the leader kept its lease"
		case ok:
			toLeader = append(toLeader, max(d, 0))
			line += fmt.Sprintf(", a leader %v after the promotion", d.Round(time.Millisecond))
			if d < 0 {
				line += " (the probe saw the promotion after the candidates did)"
			}
		default:
			line += ", no leader after it before the end"
		}
		lines = append(lines, line)
	}
	ps := func(ds []time.Duration) string {
		return fmt.Sprintf("p50=%v p99=%v max=%v", chaos.Percentile(ds, 50).Round(time.Millisecond),
			chaos.Percentile(ds, 99).Round(time.Millisecond), chaos.Percentile(ds, 100).Round(time.Millisecond))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Patroni soak: %v, seed %d, L=%v R=%v H=%v P=%v slack=%v, leader faults %v\n",
		time.Since(start).Round(time.Second), seed, tm.lease, tm.renew, tm.heartbeat, tm.poll, tm.slack, kinds)
	fmt.Fprintf(&b, "database events: %d; no writable primary (the old primary last seen writable to the new one writable) %s\n", len(events), ps(promos))
	for _, k := range []string{dbSwitchover, dbKill, dbCrash} {
		if len(byKind[k]) > 0 {
			fmt.Fprintf(&b, "  %s (%d): %s\n", k, len(byKind[k]), ps(byKind[k]))
		}
	}
	fmt.Fprintf(&b, "casleader leader after the promotion (%d, negative as 0; %d more kept their lease): %s\n", len(toLeader), kept, ps(toLeader))
	b.WriteString(strings.Join(lines, "\n"))
	fmt.Fprintf(&b, "\n%s", rep)
	t.Log(b.String())
	if path := os.Getenv(envReport); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = f.WriteString(b.String() + "\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	if !rep.OK() || os.Getenv(envDump) != "" {
		dumpHistory(t, c.History)
		if b, err := json.Marshal(events); err == nil {
			t.Logf("database events (CLOCK_MONOTONIC, as the history's): %s", b)
		}
	}
	byProperty := map[string]int{}
	for _, v := range rep.Violations {
		byProperty[v.Property]++
	}
	require.NotZero(t, rep.ActionsChecked, "no fenced action was performed")
	require.NotEmpty(t, events, "no database event in the run")
	require.Zero(t, byProperty["token-order"], "fenced writes went back in token")
	require.Zero(t, byProperty["belief-overlap"], "two leaders at once")
	require.Zero(t, byProperty["stale-action"], "an action of an old term after a newer term began")
}

// leaderAfterPromotion returns how long after ev's promotion a candidate began to
// lead (negative when it began before the probe saw the promotion: the probe reads
// the nodes one after another), from the first belief that began after the old
// primary was last seen writable and lasted past the promotion; or kept, when a
// belief began before and outlived the promotion by more than renew: its leader
// renewed its lease on the new primary. ok is false if no candidate led after.
func leaderAfterPromotion(beliefs []chaos.Interval, ev dbEvent, renew time.Duration) (d time.Duration, kept, ok bool) {
	first := int64(-1)
	for _, b := range beliefs {
		if b.Start < ev.Lost && b.End > ev.Promoted+int64(renew) {
			return 0, true, true
		}
		if b.Start >= ev.Lost && b.End > ev.Promoted && (first < 0 || b.Start < first) {
			first = b.Start
		}
	}
	if first < 0 {
		return 0, false, false
	}
	return time.Duration(first - ev.Promoted), false, true
}

// patroniEvent makes one event of kind on .ci/patroni's cluster and waits until a
// node answers as a writable primary again (another than the old one after a
// switchover or a kill); a killed node is started again 2 to 7 s later.
func patroniEvent(pc *pgconn.Config, hosts []string, kind string, rng *rand.Rand) (dbEvent, error) {
	old := -1
	for i := range hosts {
		if ok, _ := writable(pc, i); ok {
			old = i
			break
		}
	}
	if old < 0 {
		return dbEvent{}, fmt.Errorf("%s: no node of %v answers as a primary", kind, hosts)
	}
	node := fmt.Sprint(old + 1)
	args := map[string][]string{dbSwitchover: {"switchover"}, dbKill: {"kill", node}, dbCrash: {"crash", node}}[kind]
	ev := dbEvent{Kind: kind, Old: node, Start: chaos.Mono()}
	ev.Lost = ev.Start
	cmd := exec.Command("bash", append([]string{"../../.ci/patroni"}, args...)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return dbEvent{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(3 * time.Minute)
	down := false // the old primary has been seen not writable since the command began
	for ev.New == "" {
		for i := range hosts {
			at := chaos.Mono()
			ok, _ := writable(pc, i)
			if i == old && !down {
				if ok {
					ev.Lost = at // still the primary: the event has not reached it yet
					continue
				}
				down = true
			}
			if i == old && kind != dbCrash {
				continue // after a crash, its Patroni restarts it as the primary
			}
			if ok {
				ev.Promoted, ev.New = chaos.Mono(), fmt.Sprint(i+1)
				break
			}
		}
		if time.Now().After(deadline) {
			<-done
			return dbEvent{}, fmt.Errorf("%s of node %s: no new primary within 3 minutes\n%s", kind, node, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := <-done; err != nil {
		return dbEvent{}, fmt.Errorf("bash .ci/patroni %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	ev.Output = strings.TrimSpace(out.String())
	if kind == dbKill {
		time.Sleep(2*time.Second + time.Duration(rng.Int64N(int64(5*time.Second))))
		if b, err := exec.Command("bash", "../../.ci/patroni", "join", node).CombinedOutput(); err != nil {
			return dbEvent{}, fmt.Errorf("bash .ci/patroni join %s: %v\n%s", node, err, b)
		}
	}
	return ev, nil
}

// writable reports whether host i of pc answers as a primary (not in recovery).
func writable(pc *pgconn.Config, i int) (bool, error) {
	c := pc.Copy()
	if i > 0 {
		c.Host, c.Port = pc.Fallbacks[i-1].Host, pc.Fallbacks[i-1].Port
	}
	c.Fallbacks, c.ValidateConnect = nil, nil
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, c)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	res, err := conn.Exec(ctx, "SELECT pg_is_in_recovery()").ReadAll()
	if err != nil {
		return false, err
	}
	return len(res) == 1 && len(res[0].Rows) == 1 && string(res[0].Rows[0][0]) == "f", nil
}

func TestLeaderAfterPromotion(t *testing.T) {
	ms := int64(time.Millisecond)
	ev := dbEvent{Kind: dbKill, Lost: 1000 * ms, Promoted: 12000 * ms}
	renew := 900 * time.Millisecond
	for _, tc := range []struct {
		name     string
		beliefs  []chaos.Interval
		d        time.Duration
		kept, ok bool
	}{
		{"ALeaderAfterThePromotion", []chaos.Interval{{Start: 0, End: 1500 * ms}, {Start: 12400 * ms, End: 20000 * ms}}, 400 * time.Millisecond, false, true},
		{"ALeaderTheProbeHadNotSeenYet", []chaos.Interval{{Start: 0, End: 1500 * ms}, {Start: 11900 * ms, End: 20000 * ms}}, -100 * time.Millisecond, false, true},
		{"ALeaseRenewedOnTheNewPrimary", []chaos.Interval{{Start: 0, End: 20000 * ms}}, 0, true, true},
		{"AnOldBeliefEndingWithinRIsNoLeader", []chaos.Interval{{Start: 0, End: 12500 * ms}, {Start: 13000 * ms, End: 14000 * ms}}, time.Second, false, true},
		{"ABeliefOnTheOldPrimaryThatEndedBeforeThePromotionIsNoLeader", []chaos.Interval{{Start: 1100 * ms, End: 1900 * ms}, {Start: 12100 * ms, End: 12200 * ms}}, 100 * time.Millisecond, false, true},
		{"NoLeader", []chaos.Interval{{Start: 0, End: 1500 * ms}}, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, kept, ok := leaderAfterPromotion(tc.beliefs, ev, renew)
			require.Equal(t, tc.ok, ok, "ok")
			require.Equal(t, tc.kept, kept, "kept")
			require.Equal(t, tc.d, d)
		})
	}
}
