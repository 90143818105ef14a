//go:build linux

package casleadertest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store"
)

// Misses. The probe (see [Stall]) asks the database from the harness, on a
// connection of its own; a candidate is another process, under the race detector,
// behind a proxy. On two cores that other processes keep busy, candidates' statements
// ran out of time for seconds at once while the probe's were answered, so the
// probe alone does not show what the candidates went through. Each candidate
// therefore reports what demonstrably did not answer it in time:
//
//   - "M <start> <end>": one of its statements (an election's, or a members
//     table's write or read) reached its deadline;
//   - "L <mono> <token> <key>": its term ended because no renewal succeeded
//     before the trust deadline (a lease lost, not released or handed over).
//
// Only the waits of the preferred leader scenario use them, as the liveness of
// the rule they wait for needs a lease of uninterrupted answers (see
// [ProcessCluster.RunPreferred]); the checker's properties, safety and the
// liveness bound after a fault alike, are judged as before, on the probe's stalls.

// missHooks returns the hooks by which the candidate reports its statements that
// timed out and its terms lost to a missed renewal.
func (c *child) missHooks() casleader.Hooks {
	var (
		mu       sync.Mutex
		until    = map[string]time.Time{} // per key, the trust deadline of the term led
		lastSent time.Time                // a group reports a batched statement once per key
	)
	return casleader.Hooks{
		Call: func(call casleader.Call) {
			if call.Cancelled || !timedOut(call.Err) {
				return
			}
			mu.Lock()
			again := call.Sent.Equal(lastSent)
			lastSent = call.Sent
			mu.Unlock()
			if !again {
				c.missed(call.Duration)
			}
		},
		Renewed: func(ev casleader.Event) {
			mu.Lock()
			until[ev.Key] = ev.Until
			mu.Unlock()
		},
		Stopped: func(ev casleader.Event) {
			mu.Lock()
			u, ok := until[ev.Key]
			delete(until, ev.Key)
			mu.Unlock()
			if ok && !time.Now().Before(u) {
				c.ev.emit("L %d %d %s", Mono(), ev.Token, ev.Key)
			}
		},
	}
}

// missed reports a statement that took took and ended just now by its deadline.
func (c *child) missed(took time.Duration) {
	end := Mono()
	c.ev.emit("M %d %d", end-int64(took), end)
}

// timedOut reports whether err says that a statement reached its deadline.
func timedOut(err error) bool {
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err))
}

// missStore is the candidate's store, which reports the members table's
// statements that reached their deadline (the election's come through missHooks).
type missStore struct {
	store.Driver
	c *child
}

// PutMembers writes the candidate's members rows.
func (s missStore) PutMembers(ctx context.Context, ms []store.Member) error {
	start := time.Now()
	err := s.Driver.PutMembers(ctx, ms)
	if !errors.Is(ctx.Err(), context.Canceled) && timedOut(err) {
		s.c.missed(time.Since(start))
	}
	return err
}

// MembersOf reads the members of keys.
func (s missStore) MembersOf(ctx context.Context, keys []string, within time.Duration) ([]store.Member, error) {
	start := time.Now()
	ms, err := s.Driver.MembersOf(ctx, keys, within)
	if !errors.Is(ctx.Err(), context.Canceled) && timedOut(err) {
		s.c.missed(time.Since(start))
	}
	return ms, err
}

// misses is what the candidates of a cluster reported by "M" and "L" lines.
type misses struct {
	n     int   // statements that reached their deadline
	until int64 // the end of the last one, or the last term lost (Mono)
	lost  map[belief]map[int64]bool
}

// note handles a line "M <start> <end>" or "L <mono> <token> <key>" of candidate
// id (fields f).
func (m *misses) note(id string, f []string) {
	switch {
	case f[0] == "M" && len(f) == 3:
		end, _ := strconv.ParseInt(f[2], 10, 64)
		m.n++
		m.until = max(m.until, end)
	case f[0] == "L" && len(f) == 4:
		at, _ := strconv.ParseInt(f[1], 10, 64)
		tok, _ := strconv.ParseInt(f[2], 10, 64)
		b := belief{id, f[3]}
		if m.lost == nil {
			m.lost = map[belief]map[int64]bool{}
		}
		if m.lost[b] == nil {
			m.lost[b] = map[int64]bool{}
		}
		m.lost[b][tok] = true
		m.until = max(m.until, at)
	}
}

// lostTerms is how many terms ended by a missed renewal.
func (m *misses) lostTerms() int {
	n := 0
	for _, ts := range m.lost {
		n += len(ts)
	}
	return n
}
