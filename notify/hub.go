package notify

import (
	"sync"
)

// Hub is the set of subscribers of a notifier, per election key: the part every
// notifier shares ([MySQL] here, the PostgreSQL one in package store/postgres).
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*func()]struct{}
	// added is signalled (latest only) when a key gets its first subscriber.
	added chan struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{subs: map[string]map[*func()]struct{}{}, added: make(chan struct{}, 1)}
}

// Subscribe calls wake on every notification for key until unsubscribe is called.
func (h *Hub) Subscribe(key string, wake func()) (unsubscribe func()) {
	p := &wake
	h.mu.Lock()
	m := h.subs[key]
	if m == nil {
		m = map[*func()]struct{}{}
		h.subs[key] = m
		select {
		case h.added <- struct{}{}:
		default:
		}
	}
	m[p] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs[key], p)
			if len(h.subs[key]) == 0 {
				delete(h.subs, key)
			}
			h.mu.Unlock()
		})
	}
}

// Wake calls the subscribers of key. It returns whether there were any.
func (h *Hub) Wake(key string) bool {
	h.mu.Lock()
	fs := make([]func(), 0, len(h.subs[key]))
	for p := range h.subs[key] {
		fs = append(fs, *p)
	}
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
	return len(fs) > 0
}

// WakeAll calls every subscriber: notifications may have been missed.
func (h *Hub) WakeAll() {
	for _, k := range h.Keys() {
		h.Wake(k)
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
