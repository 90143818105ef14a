package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// timing is the lease/heartbeat setting every system runs with.
type timing struct {
	Lease, Renew, Heartbeat, Poll time.Duration
}

// system is one election implementation on one database.
type system interface {
	Name() string
	// Start starts candidate id in the election key.
	Start(ctx context.Context, key, id string) (candidate, error)
	// Statements returns the election requests sent so far (statements for the SQL
	// systems, gRPC requests for etcd), by kind.
	Statements() map[string]int64
	Close()
}

// candidate is one running candidate.
type candidate interface {
	ID() string
	// IsLeader reports the candidate's own belief, without I/O where the system
	// allows it (the upsert design has no local state: it reports its last query).
	IsLeader() bool
	// Crash stops the candidate without giving the lease up, like kill -9.
	Crash()
	// Resign gives leadership up gracefully; it returns when the release is committed.
	Resign(ctx context.Context) error
	// Stop ends the candidate (releasing if it leads).
	Stop()
	// Marks returns the candidate's recorded times.
	Marks() marks
}

// marks are local monotonic times a candidate records.
type marks struct {
	LastRenew   time.Time // send time of the last renewal that succeeded (etcd: last keepalive reply)
	Won         time.Time // reply time of the write that made it leader, zero if none
	Led         time.Time // casleader: when OnStartedLeading was called (also for a lease handed over, won with no write)
	Released    time.Time // reply time of the resign write that succeeded
	ReleaseSent time.Time // send time of that write (casleader)

	// casleader only: what the candidate did around a wake-up, for the handover's
	// breakdown. Wakes are the times its notifier delivered wake-ups to its elector
	// (the last few); Calls its last store calls.
	Wakes []time.Time
	Calls []call
}

// call is one store call a casleader candidate made.
type call struct {
	Op         string // observe, elect, elect released, insert, renew, release
	Sent, Done time.Time
	OK         bool // a write that won
}

// keepLast bounds the wake-ups and calls a candidate remembers.
const keepLast = 32

func (m *marks) wake(at time.Time) {
	m.Wakes = append(m.Wakes, at)
	if len(m.Wakes) > keepLast {
		m.Wakes = m.Wakes[1:]
	}
}

func (m *marks) call(c call) {
	m.Calls = append(m.Calls, c)
	if len(m.Calls) > keepLast {
		m.Calls = m.Calls[1:]
	}
}

// markBox is a concurrency-safe marks.
type markBox struct {
	mu sync.Mutex
	m  marks
}

func (b *markBox) set(f func(*marks)) {
	b.mu.Lock()
	f(&b.m)
	b.mu.Unlock()
}

func (b *markBox) get() marks {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.m
	m.Wakes = append([]time.Time(nil), b.m.Wakes...)
	m.Calls = append([]call(nil), b.m.Calls...)
	return m
}

// counter counts requests by kind.
type counter struct {
	mu sync.Mutex
	m  map[string]*atomic.Int64
}

func (c *counter) add(kind string, n int64) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*atomic.Int64{}
	}
	v := c.m[kind]
	if v == nil {
		v = &atomic.Int64{}
		c.m[kind] = v
	}
	c.mu.Unlock()
	v.Add(n)
}

func (c *counter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int64{}
	for k, v := range c.m {
		out[k] = v.Load()
	}
	return out
}

func diff(after, before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
