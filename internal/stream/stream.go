// Package stream is the latest-only leadership stream behind casleader's
// Elector.Listen and group's Group.Listen: one value that changes, numbered, and
// listeners that each get the current value at once, then its changes in order,
// keeping only the latest one a listener has not taken yet. Publishing never
// blocks, so a listener that never reads never delays the elector.
//
// The value type is the front ends' (casleader.Status); the stream numbers its
// changes and stamps each with its number and time through the function given
// to [New].
package stream

import (
	"context"
	"sync"
	"time"
)

// Stream holds a value of type T and its listeners. Its methods are safe for
// concurrent use.
type Stream[T comparable] struct {
	stamp func(v *T, seq uint64, at time.Time)

	mu        sync.Mutex
	cur       T
	seq       uint64
	closed    bool
	listeners map[chan T]func() bool // each listener, with the stop of its context's AfterFunc
}

// New returns a stream of the zero T. stamp writes a change's number (1, 2, ...)
// and time into the value before it is handed to listeners.
func New[T comparable](stamp func(v *T, seq uint64, at time.Time)) *Stream[T] {
	return &Stream[T]{stamp: stamp}
}

// Listen returns a channel that holds the current value at once, then each change
// in order until ctx ends or the stream is closed; then it is closed. The channel
// has room for one value: a change that comes before the listener has taken the
// previous one replaces it. On a closed stream the channel holds the current
// value and is closed.
func (s *Stream[T]) Listen(ctx context.Context) <-chan T {
	ch := make(chan T, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	ch <- s.cur
	if s.closed {
		close(ch)
		return ch
	}
	if s.listeners == nil {
		s.listeners = map[chan T]func() bool{}
	}
	// An ended ctx runs the AfterFunc at once on a goroutine of its own: it waits
	// for the lock, so it finds ch registered.
	s.listeners[ch] = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.listeners[ch]; ok {
			delete(s.listeners, ch)
			close(ch)
		}
	})
	return ch
}

// Publish applies change to the value and, when it changed anything, numbers and
// stamps the new value and hands it to every listener, replacing one it has not
// taken yet. It never blocks: only Publish sends, under the lock, so after the
// drain the channel has room.
func (s *Stream[T]) Publish(change func(*T)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur
	change(&s.cur)
	if s.cur == old {
		return
	}
	s.seq++
	s.stamp(&s.cur, s.seq, time.Now())
	for ch := range s.listeners {
		select {
		case <-ch:
		default:
		}
		ch <- s.cur
	}
}

// Close closes every listener's channel; later listeners get the current value
// and a closed channel. Publish still updates the value.
func (s *Stream[T]) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for ch, stop := range s.listeners {
		stop()
		close(ch)
	}
	s.listeners = nil
}

// Poke sends on ch without waiting: a wake-up already pending says the same.
func Poke(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
