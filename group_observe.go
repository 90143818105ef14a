package casleader

import (
	"context"
	"errors"
	"time"
)

// hooks are the GroupConfig.Hooks of a group, by event, so that an event without hooks
// costs one length check.
type hooks struct {
	call                                    []func(Call)
	started, renewed, stopped, leader, skew []func(Event)
}

func newHooks(hs []Hooks) hooks {
	var out hooks
	for _, h := range hs {
		if h.Call != nil {
			out.call = append(out.call, h.Call)
		}
		add := func(fs *[]func(Event), f func(Event)) {
			if f != nil {
				*fs = append(*fs, f)
			}
		}
		add(&out.started, h.Started)
		add(&out.renewed, h.Renewed)
		add(&out.stopped, h.Stopped)
		add(&out.leader, h.Leader)
		add(&out.skew, h.Skew)
	}
	return out
}

// tell calls the hooks fs with the event of key in term token, after change has
// filled in its facts.
func (g *Group) tell(fs []func(Event), key string, token int64, change func(*Event)) {
	if len(fs) == 0 {
		return
	}
	ev := Event{Key: key, ID: g.cfg.ID, Token: token, LeaseDuration: g.cfg.LeaseDuration, RenewDeadline: g.cfg.RenewDeadline}
	if change != nil {
		change(&ev)
	}
	for _, f := range fs {
		f(ev)
	}
}

// stmt is what the Call hooks are told of one statement, whatever its reply.
type stmt struct {
	sent      time.Time
	took      time.Duration
	cancelled bool // Run's end cancelled it: not the database's doing
	err       error
}

// done records the end of a statement sent under ctx that returned err.
func (s *stmt) done(ctx context.Context, err error) {
	s.took = time.Since(s.sent)
	s.err = err
	s.cancelled = err != nil && errors.Is(ctx.Err(), context.Canceled)
}

// calls tells the Call hooks of the statement op, sent for keys, once per key;
// outcome fills in a key's outcome (Swapped, Term, Record, Found).
func (g *Group) calls(op string, keys []string, st stmt, outcome func(c *Call)) {
	for _, key := range keys {
		c := Call{Key: key, ID: g.cfg.ID, Keys: len(keys), Op: op,
			Sent: st.sent, Duration: st.took, Err: st.err, Cancelled: st.cancelled}
		if st.err == nil && outcome != nil {
			outcome(&c)
		}
		for _, f := range g.hooks.call {
			f(c)
		}
	}
}

// observed tells the Call hooks of a batched read of b.
func (r *engine) observed(b keyBatch, rep readReply) {
	if len(r.g.hooks.call) == 0 {
		return
	}
	r.g.calls("observe", b.keys, rep.stmt, func(c *Call) {
		c.Record, c.Found = rep.recs[c.Key]
	})
}

// wrote tells the Call hooks of a batched write op of the keys of ss, with each
// key's compare-and-set outcome (and, for an election, its term).
func (r *engine) wrote(op string, ss []*state, rep wonReply) {
	if len(r.g.hooks.call) == 0 {
		return
	}
	r.g.calls(op, stateKeys(ss), rep.stmt, func(c *Call) {
		w, ok := rep.won[c.Key]
		c.Swapped = ok
		if ok && op != "renew" && op != "release" {
			c.Term = w.Term
		}
	})
}

// stateKeys returns the keys of ss, for the Call hooks.
func stateKeys(ss []*state) []string {
	keys := make([]string, len(ss))
	for i, s := range ss {
		keys[i] = s.key
	}
	return keys
}

// renewed tells the Renewed hooks the trust deadline of the term s leads.
func (r *engine) renewed(s *state) {
	r.g.tell(r.g.hooks.renewed, s.key, s.m.Term(), func(ev *Event) { ev.Until = s.m.Deadline() })
}

// lapse ends, for the Stopped hooks, the lead phase of the term token of s, which
// ended without a write to send (its lease was lost, or not held): once the term's
// work has returned, at most DrainTimeout later, as a release would.
func (r *engine) lapse(s *state, token int64) {
	if len(r.g.hooks.stopped) == 0 {
		return
	}
	e := ending{s: s, token: token, led: true, nowrite: true, told: true}
	if s.working() {
		r.draining = append(r.draining, draining{ending: e, until: time.Now().Add(r.g.cfg.DrainTimeout)})
		return
	}
	r.ended(e, nil)
}

// wroteEnds tells the Call hooks of a batched write op of the keys of es.
func (r *engine) wroteEnds(op string, es []ending, rep wonReply) {
	if len(r.g.hooks.call) == 0 {
		return
	}
	ss := make([]*state, len(es))
	for i, e := range es {
		ss[i] = e.s
	}
	r.wrote(op, ss, rep)
}

// noteKeySkew records the clock skew k that the reads of s show, and tells the
// hooks when it changed.
func (r *engine) noteKeySkew(s *state, k time.Duration) {
	if k == s.skew {
		return
	}
	s.skew = k
	r.g.tell(r.g.hooks.skew, s.key, 0, func(ev *Event) { ev.Skew = k })
}
