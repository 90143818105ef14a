package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	castiming "github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
)

// takeoverTrace records, per key, the reads and elections one candidate of the
// saturation run made, so that each takeover can be split into its parts: how
// fresh the follower's view of the dead term was, when its deciding read was sent
// after the lease expired, that read's round trip, and the election's.
type takeoverTrace struct {
	mu     sync.Mutex
	reads  map[string][]traceRead
	elects map[string][]traceElect
}

type traceRead struct {
	sent, reply time.Time
	term        int64
	age         time.Duration
	released    bool
}

type traceElect struct {
	sent, reply time.Time
	won         bool
}

// traceOut, when set (-trace-takeovers), gets each takeover's reads: send time
// after the expiry, whether of the dead term, and age, in milliseconds.
var traceOut *log.Logger

// keep is how long the trace keeps a key's events: the skew window, over which a
// follower takes the freshest age of a term (internal/timing.SkewWindow).
const keep = castiming.SkewWindow

func newTrace() *takeoverTrace {
	return &takeoverTrace{reads: map[string][]traceRead{}, elects: map[string][]traceElect{}}
}

func trim[T any](s []T, at func(T) time.Time, now time.Time) []T {
	i := 0
	for i < len(s) && now.Sub(at(s[i])) > keep {
		i++
	}
	return s[i:]
}

func (t *takeoverTrace) read(keys []string, recs map[string]store.Record, sent, reply time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		rec, ok := recs[k]
		if !ok {
			continue
		}
		t.reads[k] = append(trim(t.reads[k], func(r traceRead) time.Time { return r.sent }, sent),
			traceRead{sent: sent, reply: reply, term: rec.Term, age: rec.Age, released: rec.Released()})
	}
}

func (t *takeoverTrace) elect(from []store.KeyVersion, won []store.Won, sent, reply time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := map[string]bool{}
	for _, x := range won {
		w[x.Key] = true
	}
	for _, kv := range from {
		t.elects[kv.Key] = append(trim(t.elects[kv.Key], func(e traceElect) time.Time { return e.sent }, sent),
			traceElect{sent: sent, reply: reply, won: w[kv.Key]})
	}
}

// takeover is one key won after its leader was killed, split into parts (local
// clock and database clock are the same host's here).
type takeover struct {
	fresh        time.Duration // the smallest age the winner read of the dead term: what its expiry judgement waits beyond L
	readAfterExp time.Duration // the deciding read's send time minus the lease's expiry (last write + L)
	readRTT      time.Duration // that read's round trip
	client       time.Duration // from that read's reply to the election's send
	electToWrite time.Duration // from the election's send to its write, by the database clock
	electRTT     time.Duration // the election's round trip
	readsAfter   int           // reads of the key sent after the lease's expiry, before the election
	ok           bool
}

// takeoverOf splits the takeover of key, won by a write executed at won, of the
// dead leader's term term, whose last write was executed at last.
func (t *takeoverTrace) takeoverOf(key string, term int64, last, won time.Time, lease time.Duration) takeover {
	t.mu.Lock()
	defer t.mu.Unlock()
	var e *traceElect
	for i := len(t.elects[key]) - 1; i >= 0; i-- {
		if x := &t.elects[key][i]; x.won && !x.sent.After(won) {
			e = x
			break
		}
	}
	if e == nil {
		return takeover{}
	}
	var d *traceRead
	fresh := time.Duration(-1)
	expiry := last.Add(lease)
	after := 0
	for i := range t.reads[key] {
		r := &t.reads[key][i]
		if r.sent.After(e.sent) {
			break
		}
		if r.sent.After(expiry) {
			after++
		}
		if r.term == term && !r.released {
			if fresh < 0 || r.age < fresh {
				fresh = r.age
			}
		}
		d = r
	}
	if d == nil || fresh < 0 {
		return takeover{}
	}
	if traceOut != nil {
		var rs []string
		for _, r := range t.reads[key] {
			if r.sent.After(e.sent) {
				break
			}
			rs = append(rs, fmt.Sprintf("%+.0f:%s:%.1f", ms(r.sent.Sub(expiry)), map[bool]string{true: "dead", false: "other"}[r.term == term], ms(r.age)))
		}
		traceOut.Printf("key %s fresh %.1f elect_sent %+.1f reads %v", key, ms(fresh), ms(e.sent.Sub(expiry)), rs)
	}
	return takeover{
		fresh:        fresh,
		readAfterExp: d.sent.Sub(expiry),
		readRTT:      d.reply.Sub(d.sent),
		client:       e.sent.Sub(d.reply),
		electToWrite: won.Sub(e.sent),
		electRTT:     e.reply.Sub(e.sent),
		readsAfter:   after,
		ok:           true,
	}
}

// parts collects the takeovers' parts into the result's values.
func takeoverParts(r *result, ts []takeover) {
	var fresh, readAfter, readRTT, client, toWrite, electRTT []time.Duration
	reads := map[int]int{}
	for _, t := range ts {
		if !t.ok {
			continue
		}
		reads[min(t.readsAfter, 3)]++
		fresh = append(fresh, t.fresh)
		readAfter = append(readAfter, t.readAfterExp)
		readRTT = append(readRTT, t.readRTT)
		client = append(client, t.client)
		toWrite = append(toWrite, t.electToWrite)
		electRTT = append(electRTT, t.electRTT)
	}
	if len(fresh) == 0 {
		return
	}
	r.Values["takeovers_traced"] = float64(len(fresh))
	for n, c := range reads {
		name := fmt.Sprintf("takeovers_with_%d_reads_after_expiry", n)
		if n == 3 {
			name = "takeovers_with_3_or_more_reads_after_expiry"
		}
		r.Values[name] = float64(c)
	}
	for _, p := range []struct {
		name string
		ds   []time.Duration
	}{
		{"takeover_fresh", fresh},
		{"takeover_read_sent_after_expiry", readAfter},
		{"takeover_read_rtt", readRTT},
		{"takeover_read_reply_to_elect_sent", client},
		{"takeover_elect_sent_to_write", toWrite},
		{"takeover_elect_rtt", electRTT},
	} {
		r.Values[p.name+"_p50_ms"] = ms(percentile(p.ds, 0.5))
		r.Values[p.name+"_p99_ms"] = ms(percentile(p.ds, 0.99))
		r.Values[p.name+"_max_ms"] = ms(percentile(p.ds, 1))
	}
}

// tracedObserve and tracedElect wrap a store call with the trace, when there is one.
func (g *groupStore) tracedObserve(ctx context.Context, keys []string) (map[string]store.Record, error) {
	sent := time.Now()
	recs, err := g.Driver.ObserveMany(ctx, keys)
	if err == nil && g.trace != nil {
		g.trace.read(keys, recs, sent, time.Now())
	}
	return recs, err
}

func (g *groupStore) tracedElect(ctx context.Context, cand store.Candidate, from []store.KeyVersion) ([]store.Won, error) {
	sent := time.Now()
	won, err := g.Driver.ElectMany(ctx, cand, from)
	if err == nil && g.trace != nil {
		g.trace.elect(from, won, sent, time.Now())
	}
	return won, err
}
