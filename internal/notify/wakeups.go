package notify

import (
	"context"
	"sync"

	"github.com/casleader/casleader/store"
)

// Listener is the cross-process part of a store's wake-ups: it delivers the
// releases and handovers written by other processes to the [Hub] it was built on,
// while Run runs (Run returns when ctx ends). [Wakeups] forwards the store's own
// writes and the election's events to it; a listener ignores those it needs not.
type Listener interface {
	Run(ctx context.Context) error
	// Announce and AnnounceHandover are told of this process's own release at
	// version, and handover to candidate to (the SQLite file watch writes them
	// down for the other processes; PostgreSQL's statements notify by themselves).
	Announce(key string, version int64)
	AnnounceHandover(key, to string)
	// Observed and Leading are [store.Driver]'s (MySQL's named locks use them).
	Observed(key string, rec store.Record)
	Leading(key string, token int64, leading bool)
	// Listening reports whether the path that carries other processes' writes is
	// set up (a self-test passed, a file is watched), while Run runs.
	Listening() bool
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
// is that candidate, or to every subscriber when the target is not known (a MySQL
// named lock granted: released or handed over, it cannot say). A follower whose
// process a handover can name reads the row (and leads the term it hands to that
// process, with no write); any other claims a lease handed to its ID with the
// election that wins only a released row or one so handed (cas.Machine.Woken).
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
	if w.lis != nil {
		w.lis.Announce(key, version)
	}
}

// HandedOver is called by the store after its own handover of key to candidate to
// committed: it wakes the subscribers of key in this process at once ([Hub.HandOver])
// and hands the handover to the listener if it announces handovers to other
// processes itself (AnnounceHandover(key, to string), as the SQLite file watch
// does).
func (w *Wakeups) HandedOver(key, to string) {
	w.hub.HandOver(key, to)
	if w.lis != nil {
		w.lis.AnnounceHandover(key, to)
	}
}

// Subscribe calls wake whenever the lease of key is released or handed over, with
// the released version (0: unknown; [HandedOver]: handed over to id, or to an
// unknown target; [HandedToAnother]: to another candidate than a non-empty id),
// until unsubscribe is called (see [Hub.SubscribeAs]). The first subscription
// starts the listener; unsubscribing the last one stops it and waits for it to
// return.
func (w *Wakeups) Subscribe(key, id string, wake func(version int64)) (unsubscribe func()) {
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

// Observed forwards a row read by a follower to the listener, if it wants it.
func (w *Wakeups) Observed(key string, rec store.Record) {
	if w.lis != nil {
		w.lis.Observed(key, rec)
	}
}

// Leading forwards the start (leading) or end of a term to the listener, if it
// wants it.
func (w *Wakeups) Leading(key string, token int64, leading bool) {
	if w.lis != nil {
		w.lis.Leading(key, token, leading)
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
	return w.lis == nil || w.lis.Listening()
}
