package casleader

import (
	"context"
	"fmt"

	"github.com/casleader/casleader/internal/rules"
)

// Listen returns the leadership stream of key, as [Elector.Listen] does
// for its key: a channel that holds the key's current status at once, then each
// change (a term of the group starts, it stops acting, the observed leader
// changes), in order, until ctx ends or the key is removed from the group; then
// it is closed. The stream keeps the latest status only and never delays the
// group: a listener that has not taken a status finds it replaced by the next
// one, and [Status.Seq] says how many it skipped.
//
// The key must be in the group (GroupConfig.Keys or [Group.Add]); for any other key
// the channel is closed at once. Listen may be called before or during Run, any
// number of times.
func (g *Group) Listen(ctx context.Context, key string) <-chan Status {
	sh := g.shared(key)
	if sh == nil {
		ch := make(chan Status)
		close(ch)
		return ch
	}
	return sh.stream.Listen(ctx)
}

// HandoverTo passes the leadership of key to candidate id, as
// [Elector.HandoverTo] does for its key, through the handover of the preferred
// leader rule: the key's term stops acting (IsLeader(key) turns false, its
// leadership context is cancelled), its OnStartedLeading is waited for (at most
// DrainTimeout), then one compare-and-set names id in the row; id confirms with
// its first renewal. The group's other keys are not touched, and it stays out of
// the key's election for one LeaseDuration.
//
// It returns once the handover write is settled, or when ctx ends: nil when the
// row names id (or id is this group's own ID), an error matching
// [ErrNotLeader] when the group does not lead key (or no Run is under
// way), [ErrNotDrained] when OnStartedLeading did not return within
// DrainTimeout (the lease then expires by itself), [ErrInvalidKey] for a key not
// in the group and [ErrInvalidConfig] for an id that cannot be a candidate's.
// From the key's own OnStartedLeading, pass its leadership context: HandoverTo
// then returns ctx's error as soon as the term stops acting, and the handover is
// written once the callback has returned.
func (g *Group) HandoverTo(ctx context.Context, key, id string) error {
	if err := rules.ValidateName("handover target", id); err != nil {
		return fmt.Errorf("%w: HandoverTo: %w", ErrInvalidConfig, err)
	}
	sh := g.shared(key)
	if sh == nil {
		return fmt.Errorf("%w: HandoverTo: %q is not a key of the group: Add it first", ErrInvalidKey, key)
	}
	token := sh.trust.Token()
	if token == 0 {
		return g.notLeading(key, "hand it over from its leader (see Leader)")
	}
	if id == g.cfg.ID {
		return nil // it leads key already
	}
	done := make(chan error, 1)
	if !g.request(op{key: key, token: token, to: id, done: done}) {
		return g.notLeading(key, "no Run is under way")
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// request hands o, the end of a term (a resign or a handover), to Run's
// goroutine, which alone acts on it (in takeResigns). It reports false, and
// drops o, when no Run is under way: then no term runs.
func (g *Group) request(o op) bool {
	g.reqMu.Lock()
	defer g.reqMu.Unlock()
	if !g.running {
		return false
	}
	g.resigns = append(g.resigns, o)
	g.signal()
	return true
}

// begin marks a Run under way; the function it returns marks its end, answers
// the HandoverTo calls that Run did not take and drops the other requests (their
// terms have ended).
func (g *Group) begin() (end func()) {
	g.reqMu.Lock()
	g.running = true
	g.reqMu.Unlock()
	return func() {
		g.reqMu.Lock()
		defer g.reqMu.Unlock()
		g.running = false
		for _, o := range g.resigns {
			if o.done != nil {
				o.done <- g.notLeading(o.key, "Run ended before the handover")
			}
		}
		g.resigns = nil
	}
}

// notLeading is the error of a handover of key that this group does not lead.
func (g *Group) notLeading(key, why string) error {
	return fmt.Errorf("%w: group %q does not lead key %q: %s", ErrNotLeader, g.cfg.ID, key, why)
}

// notDrained is the error of the release or handover e, not written because the
// work of its term did not return within DrainTimeout.
func (g *Group) notDrained(e ending) error {
	what := "released"
	if e.to != "" {
		what = fmt.Sprintf("handed to %q", e.to)
	}
	return fmt.Errorf("%w: key %q, term %d: the lease was not %s and expires by itself: make OnStartedLeading return when its context is cancelled; "+
		"if it resigns itself, call casleader.TermFrom(ctx).Resign(), which returns at once, then return (Resign and HandoverTo wait for the work, so it never calls them with a context of its own); "+
		"raise DrainTimeout only if the work needs longer to stop",
		ErrNotDrained, e.s.key, e.token, what)
}

// handoverFailed is the error of the release or handover e whose write failed with err.
func handoverFailed(e ending, err error) error {
	what := "release"
	if e.to != "" {
		what = fmt.Sprintf("handover to %q", e.to)
	}
	return fmt.Errorf("casleader: the %s of key %q failed, and the lease expires by itself (check the database): %w", what, e.s.key, err)
}
