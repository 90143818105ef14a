package notify

import (
	"context"
	"fmt"
	"sync"

	"github.com/casleader/casleader/store"
)

// Listener is the cross-process part of a store's wake-ups: it delivers the
// releases and handovers written by other processes to the [Hub] it was built on,
// while Run runs. Run returns when ctx ends. A listener may also implement
// Observed(key string, rec store.Record) and Leading(key string, token int64,
// leading bool), which [Wakeups] forwards to it (the [MySQL] notifier does).
type Listener interface {
	Run(ctx context.Context) error
}

// Wakeups is the wake-up path built into a dialect store: the electors and groups
// that use the store subscribe to it (they find it by themselves), the store's own
// release and handover writes wake the subscribers in this process directly
// ([Wakeups.Released]), and a
// [Listener] (LISTEN/NOTIFY, named locks, a file watch), started with the first
// subscription and stopped with the last one, wakes them for writes of other
// processes. However many electors share the store, there is one listener.
type Wakeups struct {
	table string
	hub   *Hub
	lis   Listener // nil: in-process wake-ups only

	mu     sync.Mutex
	refs   int
	cancel context.CancelFunc
	done   chan struct{}
}

// NewWakeups returns the wake-ups of a store for table, delivering to hub; lis may
// be nil.
func NewWakeups(table string, hub *Hub, lis Listener) *Wakeups {
	return &Wakeups{table: table, hub: hub, lis: lis}
}

// Table returns the election table whose releases wake the subscribers.
func (w *Wakeups) Table() string { return w.table }

// HandedOver is the version a wake-up carries when the lease was handed over to a
// named candidate (Store.Handover) rather than released, to the subscriber that
// is that candidate, or to every subscriber when the target is not known: there
// is no election to win, and the follower reads the row instead (the target adopts
// the lease it names, with no write; the others see a live leader). A wake-up with
// no version (0) may announce a release, and sends a follower whose store can into
// an election that wins only a released row first.
const HandedOver int64 = -1

// HandedToAnother is the version a handover's wake-up carries to the subscribers
// that named themselves ([Hub.SubscribeAs]) and are not its target: they read the
// row to learn the new leader, a few milliseconds after the target's read
// (cas.Machine.Woken), so that the one read that hands the lease over does not
// queue behind theirs.
const HandedToAnother int64 = -2

// Released is called by the store after its own release of key committed (version:
// the row's new version): it wakes the subscribers of key in this process at once,
// and hands the release to the listener if it announces releases to other
// processes itself (Announce(key string, version int64), as the SQLite file watch
// does; PostgreSQL's statements notify by themselves, and MySQL's lock holder
// releases its lock when told by Leading).
func (w *Wakeups) Released(key string, version int64) {
	w.hub.Wake(key, version)
	if a, ok := w.lis.(interface{ Announce(string, int64) }); ok {
		a.Announce(key, version)
	}
}

// HandedOver is called by the store after its own handover of key to candidate to
// committed: it wakes the subscribers of key in this process at once ([Hub.HandOver])
// and hands the handover to the listener if it announces handovers to other
// processes itself (AnnounceHandover(key, to string), as the SQLite file watch
// does).
func (w *Wakeups) HandedOver(key, to string) {
	w.hub.HandOver(key, to)
	if a, ok := w.lis.(interface{ AnnounceHandover(string, string) }); ok {
		a.AnnounceHandover(key, to)
	}
}

// Subscribe calls wake whenever the lease of key is released or handed over, with
// the released version (0: unknown; [HandedOver]: handed over), until unsubscribe is called. The first
// subscription starts the listener; unsubscribing the last one stops it and waits
// for it to return.
func (w *Wakeups) Subscribe(key string, wake func(version int64)) (unsubscribe func()) {
	return w.SubscribeAs(key, "", wake)
}

// SubscribeAs is [Wakeups.Subscribe] for candidate id: a handover to another
// candidate wakes it with [HandedToAnother] (see [Hub.SubscribeAs]).
func (w *Wakeups) SubscribeAs(key, id string, wake func(version int64)) (unsubscribe func()) {
	unsub := w.hub.SubscribeAs(key, id, wake)
	w.mu.Lock()
	w.refs++
	if w.refs == 1 && w.lis != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		w.cancel, w.done = cancel, done
		go func() {
			defer close(done)
			_ = w.lis.Run(ctx) // it returns only when ctx ends
		}()
	}
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			unsub()
			w.mu.Lock()
			w.refs--
			var cancel context.CancelFunc
			var done chan struct{}
			if w.refs == 0 && w.cancel != nil {
				cancel, done = w.cancel, w.done
				w.cancel, w.done = nil, nil
			}
			w.mu.Unlock()
			if cancel != nil {
				cancel()
				<-done
			}
		})
	}
}

// Subscriber is what [SubscribeAs] needs of a notifier.
type Subscriber interface {
	Subscribe(key string, wake func(version int64)) (unsubscribe func())
}

// SubscribeAs subscribes to the wake-ups of key on n as candidate id, through n's
// SubscribeAs(key, id string, wake func(int64)) (unsubscribe func()) where n has
// one (every notifier of this module does): a handover then wakes only its target
// with [HandedOver], and the others with [HandedToAnother]. Other notifiers are
// subscribed without the ID, and wake every follower alike.
func SubscribeAs(n Subscriber, key, id string, wake func(version int64)) (unsubscribe func()) {
	if a, ok := n.(interface {
		SubscribeAs(key, id string, wake func(version int64)) (unsubscribe func())
	}); ok {
		return a.SubscribeAs(key, id, wake)
	}
	return n.Subscribe(key, wake)
}

// Observed forwards a row read by a follower to the listener, if it wants it.
func (w *Wakeups) Observed(key string, rec store.Record) {
	if o, ok := w.lis.(interface{ Observed(string, store.Record) }); ok {
		o.Observed(key, rec)
	}
}

// Leading forwards the start (leading) or end of a term to the listener, if it
// wants it.
func (w *Wakeups) Leading(key string, token int64, leading bool) {
	if l, ok := w.lis.(interface{ Leading(string, int64, bool) }); ok {
		l.Leading(key, token, leading)
	}
}

// Running reports whether the listener runs (some elector or group subscribes).
func (w *Wakeups) Running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cancel != nil
}

// Listening reports whether wake-ups from other processes are being delivered: the
// listener runs and, if it can tell (PostgreSQL's self-test, the SQLite file watch),
// has set up its path. In-process wake-ups need no listener.
func (w *Wakeups) Listening() bool {
	if !w.Running() {
		return false
	}
	if l, ok := w.lis.(interface{ Listening() bool }); ok {
		return l.Listening()
	}
	return true
}

// Of returns the wake-ups built into store st (a dialect store's Wakeups method), or
// nil when it has none (a store of your own, or one wrapped in a decorator).
func Of(st any) *Wakeups {
	if s, ok := st.(interface{ Wakeups() *Wakeups }); ok {
		return s.Wakeups()
	}
	return nil
}

// SameTable returns an error when notifier n serves another election table than
// store st; nil when they agree or either cannot tell (no Table method).
func SameTable(st, n any) error {
	nt, ok1 := n.(interface{ Table() string })
	stt, ok2 := st.(interface{ Table() string })
	if ok1 && ok2 && nt.Table() != stt.Table() {
		return fmt.Errorf("serves table %q but the store elects in table %q: give the notifier the store's table, or leave Notifier nil to use the store's own wake-ups", nt.Table(), stt.Table())
	}
	return nil
}
