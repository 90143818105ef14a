// Package members keeps a candidate's rows in the members table up to date: who
// takes part in which election, in which role, and when it was last seen by the
// database clock. It is a view for operators, and the input of the preferred
// leader rule ([Preference]): a leader reads the members of the keys it leads
// and hands a key over to a live candidate of higher priority.
//
// [Run] writes one batched upsert per period (a lease; half a lease in a balanced
// group, whose rounds follow the writes) on its own goroutine,
// each with its own timeout, and never touches the election table or the
// election's goroutine: a slow, failing or missing members table delays nothing and
// is logged at Warn level at most once per [retry.LogEvery]. A clean stop deletes
// the candidate's rows; a candidate that dies leaves rows that readers stop showing
// once they are older than [Window] (two leases by the database clock), and that
// writers delete once they are older than [PruneAge] (ten leases).
package members

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/store"
)

// The roles of a [store.Member] (its Role field).
const (
	RoleLeader   = "leader"   // holds the lease
	RoleFollower = "follower" // campaigns, does not hold the lease
	RoleObserver = "observer" // never campaigns
)

// Store is the part of a store that [Run] needs (of [store.Driver]).
type Store interface {
	PutMembers(ctx context.Context, ms []store.Member) error
	DeleteMembers(ctx context.Context, id string, keys []string) error
	PruneMembers(ctx context.Context, olderThan time.Duration) (int64, error)
	// MembersOf reads the members of many keys in one call, for the preferred
	// leader rule.
	MembersOf(ctx context.Context, keys []string, within time.Duration) ([]store.Member, error)
}

// Window is how recently, by the database clock, a member must have written its
// row to be shown live, for a lease of lease: two leases, that is two periods
// (four in a balanced group).
func Window(lease time.Duration) time.Duration { return 2 * lease }

// Period is how often a candidate writes its rows: once a lease. The leader's
// read of the members follows each write, so a key costs the database one write
// per candidate and one read per lease.
func Period(lease time.Duration) time.Duration { return lease }

// BalancedPeriod is how often a candidate of a balanced group (Config.Anchor and
// Config.Balance set) writes its rows, and so how often it balances: half a
// lease. Every candidate of a balanced key is a balanced group, so the readers of
// its rows know their period.
func BalancedPeriod(lease time.Duration) time.Duration { return lease / 2 }

// period is the period of c's writes.
func (c Config) period() time.Duration {
	if c.Anchor != nil && c.Balance != nil {
		return BalancedPeriod(c.Lease)
	}
	return Period(c.Lease)
}

// fresh is how recently a row of c's election must have been written to count as
// live: the rule of [Fresh] for c's period.
func (c Config) fresh() time.Duration { return fresh(c.period(), c.Lease) }

// PruneAge is the age beyond which writers delete rows: ten leases.
func PruneAge(lease time.Duration) time.Duration { return 10 * lease }

// pruneEvery is how many periods pass between two prunes by one writer: with N
// candidates writing once a lease, the table is pruned about every 50/N leases,
// so a dead candidate's row goes about 10 + 50/N leases after its last write.
const pruneEvery = 50

// deleteTimeout bounds the delete sent on a clean stop.
const deleteTimeout = 5 * time.Second

// Config configures [Run].
type Config struct {
	// Store receives the rows.
	Store Store
	// ID is the candidate's ID (the member_id of its rows).
	ID string
	// Lease is the election's lease duration; the period is [Period] of it
	// ([BalancedPeriod] with Anchor and Balance set).
	Lease time.Duration
	// Snapshot returns the rows to write now, one per key of the candidate. It is
	// called on Run's goroutine and must not block.
	Snapshot func() []store.Member
	// Keep, when Run's context has ended, leaves the rows in
	// place (the candidate keeps its leases on exit, as a crashed one does) instead
	// of deleting them.
	Keep bool
	// Logger receives the warnings. It carries the candidate's id attribute: Run
	// does not add it (a line about one key adds the key).
	Logger *slog.Logger

	// Written, when not nil, is told the outcome of each write of the
	// candidate's rows (nil: written). It is called on Run's goroutine and must
	// not block.
	Written func(err error)

	// Priority is the candidate's priority. With Leading and Handover set, a
	// leader hands a key over to a live candidate of higher priority by the rule
	// of [Preference].
	Priority int64
	// Leading, when not nil, returns the keys that the candidate leads now, each
	// with its term. After each write, Run reads the members of those keys (one
	// batched read, when the store is a [ManyReader]) and feeds a
	// [Preference] per key. It is called on Run's goroutine and must not block.
	Leading func() map[string]int64
	// Handover carries out a decision of the rule: hand key, led in term, over to
	// to through the safe handover (stop acting, drain, one compare-and-set),
	// unless that term has ended. It must not block.
	Handover func(key string, term int64, to string)
	// Successor, when not nil, is told after each read of the members of the
	// keys led (the read that the preferred leader rule sends, no other) the
	// [Successor] of each of those keys by that read sent at sent: the candidate
	// to hand the key to when its term ends gracefully, "" for none; and the
	// key's members that read returned (live within [Fresh]), whose
	// incarnations a handover names. It is called on Run's goroutine and must
	// not block.
	Successor func(key, to string, read []store.Member, sent time.Time)

	// Anchor and Balance, when not nil, spread a group's keys: after each write,
	// Run reads the members of the key that Anchor returns (every candidate of
	// the group follows it) that count as live (written within three quarters
	// of a lease: the rule of [Fresh] for [BalancedPeriod]), and passes them
	// to Balance ("" from Anchor: no read). Both are called on Run's goroutine;
	// Balance may read the election rows within ctx (it ends a period after the
	// members read began) and must not block beyond it.
	Anchor  func() string
	Balance func(ctx context.Context, live []store.Member) error
}

// Run writes the candidate's rows at once and then every period until ctx ends,
// then deletes them (unless Keep says otherwise). Failures are logged, never
// returned: the election goes on whatever happens to the members table.
func Run(ctx context.Context, c Config) {
	period := c.period()
	var (
		lim     retry.Limiter
		written = map[string]bool{} // keys whose row this run may have written
		n       int
		prefs   = map[string]*Preference{} // per key led
	)
	warn := func(msg string, err error) {
		if ok, suppressed := lim.Allow(); ok {
			c.Logger.Warn(msg, "error", err, "suppressed", suppressed)
		}
	}
	// The first prune comes at a random period, so that candidates that start
	// together do not all prune at once.
	nextPrune := rand.IntN(pruneEvery)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if !c.Keep {
				remove(ctx, c, written)
			}
			return
		case <-t.C:
		}
		began := time.Now()
		ms := c.Snapshot()
		err := put(ctx, c, ms, period)
		if n >= nextPrune && err == nil {
			nextPrune = n + pruneEvery
			pctx, cancel := context.WithTimeout(ctx, period)
			if _, perr := c.Store.PruneMembers(pctx, PruneAge(c.Lease)); perr != nil && ctx.Err() == nil {
				warn("casleader: could not prune the members table (the election goes on)", perr)
			}
			cancel()
		}
		n++
		for _, m := range ms {
			written[m.Key] = true // even on error: the write may have committed
		}
		if err != nil && ctx.Err() == nil {
			warn("casleader: could not write this candidate's rows in the members table (the election goes on; run `casleader migrate` if the table is missing)", err)
		}
		read(ctx, c, prefs, warn)
		// The next write comes a period after this one began, not after the
		// reads: readers count a row live for Fresh, a quarter lease more than
		// the period, and on a busy machine a write, a prune and two reads took
		// longer than that, so a candidate that waited a whole period after them
		// was seen dead between its writes and never live for a lease.
		t.Reset(max(0, period-time.Since(began)))
	}
}

// put writes ms and tells c.Written. The write is not cancelled with ctx: a write
// cancelled in flight can still execute at the server after the delete of a clean
// stop, and leave a stopped candidate shown for two leases. A stop waits for it
// instead.
func put(ctx context.Context, c Config, ms []store.Member, period time.Duration) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(period, deleteTimeout))
	defer cancel()
	err := c.Store.PutMembers(wctx, ms)
	if c.Written != nil {
		c.Written(err)
	}
	return err
}

// remove deletes the rows of the keys in written, on a clean stop (ctx has ended).
func remove(ctx context.Context, c Config, written map[string]bool) {
	keys := make([]string, 0, len(written))
	for k := range written {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	if err := c.Store.DeleteMembers(dctx, c.ID, keys); err != nil {
		c.Logger.Warn("casleader: could not delete this candidate's rows from the members table on stop; they expire by age", "error", err)
	}
}

// Start runs Run on a goroutine of its own until ctx ends or stop is called;
// stop waits for it to return.
func Start(ctx context.Context, c Config) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { Run(ctx, c) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// read runs the rules that read the members table after a write: the preferred
// leader's and the balance's.
func read(ctx context.Context, c Config, prefs map[string]*Preference, warn func(string, error)) {
	if err := prefer(ctx, c, prefs); err != nil && ctx.Err() == nil {
		warn("casleader: could not read the members table for the preferred leader (no handover until it can be read)", err)
	}
	if err := balance(ctx, c); err != nil && ctx.Err() == nil {
		warn("casleader: could not balance the keys (the spread stays as it is until the next try, a period later)", err)
	}
}

// balance reads the live members of the anchor key and passes them to c.Balance.
func balance(ctx context.Context, c Config) error {
	if c.Anchor == nil || c.Balance == nil {
		return nil
	}
	key := c.Anchor()
	if key == "" {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.period())
	defer cancel()
	ms, err := c.Store.MembersOf(rctx, []string{key}, c.fresh())
	if err != nil {
		return fmt.Errorf("reading the members table: %w", err)
	}
	return c.Balance(rctx, ms)
}

// prefer reads the members of the keys led now and carries out the handovers that
// the preferred leader rule decides ([Preference], one per key led), and tells
// c.Successor each key's successor by the same read. The preferences of keys no
// longer led are forgotten: a term tracks from its start.
func prefer(ctx context.Context, c Config, prefs map[string]*Preference) error {
	if c.Leading == nil || c.Handover == nil {
		return nil
	}
	led := c.Leading()
	for k := range prefs {
		if _, ok := led[k]; !ok {
			delete(prefs, k)
		}
	}
	if len(led) == 0 {
		return nil
	}
	keys := make([]string, 0, len(led))
	for k := range led {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rctx, cancel := context.WithTimeout(ctx, c.period())
	defer cancel()
	sent := time.Now()
	ms, err := c.Store.MembersOf(rctx, keys, c.fresh())
	if err != nil {
		// Reads further apart than a lease vouch for nothing: the preferences
		// start again by themselves (Preference).
		return err
	}
	byKey := map[string][]store.Member{}
	for _, m := range ms {
		byKey[m.Key] = append(byKey[m.Key], m)
	}
	for _, k := range keys {
		if c.Successor != nil {
			c.Successor(k, Successor(byKey[k], c.ID, c.fresh()), byKey[k], sent)
		}
		p := prefs[k]
		if p == nil {
			p = NewPreference(c.ID, c.Priority, c.Lease)
			p.period = c.period()
			prefs[k] = p
		}
		if to := p.Seen(byKey[k], sent, led[k]); to != "" {
			c.Logger.Info("casleader: handing over to a live candidate of higher priority", "key", k, "term", led[k], "priority", c.Priority, "handover_to", to)
			c.Handover(k, led[k], to)
		}
	}
	return nil
}
