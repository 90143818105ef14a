package stream

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

type status struct {
	seq uint64
	at  time.Time
	n   int
}

func stamp(s *status, seq uint64, at time.Time) { s.seq, s.at = seq, at }

func set(n int) func(*status) { return func(s *status) { s.n = n } }

func TestListenerGetsTheCurrentValueThenTheLatestChange(t *testing.T) {
	s := New(stamp)
	s.Publish(set(1))
	ch := s.Listen(t.Context())
	if got := <-ch; got.seq != 1 || got.n != 1 || got.at.IsZero() {
		t.Fatalf("first value = %+v, want the current one, seq 1", got)
	}
	s.Publish(set(2))
	s.Publish(set(2)) // no change: not numbered, not sent
	s.Publish(set(3)) // replaces 2, which the listener has not taken
	if got := <-ch; got.seq != 3 || got.n != 3 {
		t.Fatalf("next value = %+v, want seq 3 (seq 2 skipped)", got)
	}
	select {
	case got := <-ch:
		t.Fatalf("unexpected value %+v: only the latest is kept", got)
	default:
	}
}

func TestChannelClosesWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(stamp)
		ctx, cancel := context.WithCancel(t.Context())
		ch := s.Listen(ctx)
		other := s.Listen(t.Context())
		<-ch
		<-other
		cancel()
		synctest.Wait()
		if _, ok := <-ch; ok {
			t.Fatal("the channel of an ended context is open")
		}
		s.Publish(set(1)) // does not send on the closed channel
		if got := <-other; got.n != 1 {
			t.Fatalf("other listener got %+v, want the change", got)
		}
		ended := s.Listen(ctx) // a context that has ended already
		<-ended
		synctest.Wait()
		if _, ok := <-ended; ok {
			t.Fatal("the channel of a context that had ended is open")
		}
	})
}

func TestCloseEndsEveryListener(t *testing.T) {
	s := New(stamp)
	ch := s.Listen(t.Context())
	<-ch
	s.Close()
	if _, ok := <-ch; ok {
		t.Fatal("open after Close")
	}
	s.Publish(set(4))
	late := s.Listen(t.Context())
	if got, ok := <-late; !ok || got.n != 4 {
		t.Fatalf("late listener got %+v (%v), want the current value", got, ok)
	}
	if _, ok := <-late; ok {
		t.Fatal("late listener's channel is open after Close")
	}
}
