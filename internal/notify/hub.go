package notify

import (
	"sync"

	"github.com/casleader/casleader/internal/stream"
)

// Hub is the set of subscribers of a notifier, per election key: the part every
// notifier shares ([MySQL] and [Wakeups] here, the PostgreSQL listener in package
// store/postgres).
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*func(int64)]string // the subscriber's candidate ID, "" when not named
	last map[string]int64                   // the last released version woken per key (duplicates are dropped)
	// added is signalled (latest only) when a key gets its first subscriber.
	added chan struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{subs: map[string]map[*func(int64)]string{}, last: map[string]int64{}, added: make(chan struct{}, 1)}
}

// Subscribe calls wake on every notification for key until unsubscribe is called,
// with the row version at which the lease was released, 0 when the notification
// carries none (a reconnection, a file change), or [HandedOver] for a handover
// (or, from a MySQL named lock, perhaps one).
func (h *Hub) Subscribe(key string, wake func(version int64)) (unsubscribe func()) {
	return h.SubscribeAs(key, "", wake)
}

// SubscribeAs is [Hub.Subscribe] for candidate id: a handover whose target is known
// ([Hub.HandOver]) wakes it with [HandedOver] only if id is that target, and with
// [HandedToAnother] otherwise. An empty id is [Hub.Subscribe].
func (h *Hub) SubscribeAs(key, id string, wake func(version int64)) (unsubscribe func()) {
	p := &wake
	h.mu.Lock()
	m := h.subs[key]
	if m == nil {
		m = map[*func(int64)]string{}
		h.subs[key] = m
		stream.Poke(h.added)
	}
	m[p] = id
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs[key], p)
			if len(h.subs[key]) == 0 {
				delete(h.subs, key)
				delete(h.last, key)
			}
			h.mu.Unlock()
		})
	}
}

// Wake calls the subscribers of key with version (see [Hub.Subscribe]). A release
// announced twice (by the releasing process itself and by the database) wakes once.
// It returns whether there were any subscribers.
func (h *Hub) Wake(key string, version int64) bool {
	return h.wake(key, version, "")
}

// HandOver wakes the subscribers of key for a handover to candidate to: with
// [HandedOver] the target and those that did not name themselves, with
// [HandedToAnother] the others (see [Hub.SubscribeAs]). It returns whether there
// were any subscribers.
func (h *Hub) HandOver(key, to string) bool {
	return h.wake(key, HandedOver, to)
}

func (h *Hub) wake(key string, version int64, to string) bool {
	h.mu.Lock()
	subs := h.subs[key]
	if version > 0 && len(subs) > 0 {
		if h.last[key] == version {
			h.mu.Unlock()
			return true
		}
		h.last[key] = version
	}
	type call struct {
		f func(int64)
		v int64
	}
	calls := make([]call, 0, len(subs))
	for p, id := range subs {
		v := version
		if to != "" && id != "" && id != to {
			v = HandedToAnother
		}
		calls = append(calls, call{*p, v})
	}
	h.mu.Unlock()
	for _, c := range calls {
		c.f(c.v)
	}
	return len(calls) > 0
}

// WakeAll calls every subscriber with version 0: notifications may have been missed.
func (h *Hub) WakeAll() {
	for _, k := range h.Keys() {
		h.Wake(k, 0)
	}
}

// Keys returns the subscribed keys.
func (h *Hub) Keys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ks := make([]string, 0, len(h.subs))
	for k := range h.subs {
		ks = append(ks, k)
	}
	return ks
}

// Added is signalled (latest only) when a key gets its first subscriber.
func (h *Hub) Added() <-chan struct{} { return h.added }
