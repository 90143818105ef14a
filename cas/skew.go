package cas

import (
	"time"

	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
)

// Clock skew between database servers.
//
// A row's tick_time is stamped by the clock of the server that executed the
// leader's write, and its age is computed by the clock of the server that reads
// it. On one server they are the same clock. In a multi-primary cluster (Galera)
// they are two: a follower reading from a server whose clock runs s ahead of the
// leader's sees every age s too large, and would take over s early (two leaders
// once s exceeds the margin L - R).
//
// The rule (Machine.Observed): a follower judges an unreleased lease of term T
// expired only when
//
//	age - fresh >= L
//
// where fresh is the smallest age it has read of term T's rows within the last
// [timing.SkewWindow] (or since it first read term T). Every tick of term T is stamped by
// the same server (the one the leader of T writes through), so for two reads of
// term T the skew s is the same: age = a + s and fresh = f + s, with a and f the
// true ages (f >= 0). age - fresh = a - f <= a: the judgement is never early,
// whatever s is, and needs no estimate of it. What it costs is f, how stale the
// freshest read was: a follower that watched the term live read it within a
// heartbeat or so of a renewal (f is a few milliseconds after some reads); a
// follower whose first read of the term already shows it expired (it just
// started, or the term began and ended while it could not read) waits L from that
// read, unless the age exceeds L + [rules.FutureTolerance] (one minute): the
// supported bound on the skew between servers, beyond which a row written by a
// server whose clock runs ahead is reported as invalid by the others. The margin
// L - R is then left to what it covers on a single server: clock rates and
// scheduling, not the offset between servers.
//
// The skew itself is measured and reported (Machine.Skew), as evidence for
// operators, never as a safety input, and only from rows read on a multi-primary
// cluster: a row read by the clock that wrote it (store.Record.OneClock: SQLite,
// PostgreSQL, MySQL/MariaDB that is not a Galera node) shows no skew, whatever
// its age:
//   - a tick in the future of the reading server (store.Record.Ahead > 0): the
//     reading server's clock runs behind the writer's by at least that much;
//   - a row of the same term renewed between two reads of this follower: its
//     tick was stamped after the earlier read was sent, so its true age is at most
//     the time from the earlier read's send to the later read's reply (a read
//     that waited for a connection or for the CPU reaches the database well after
//     its send time, and reads its age there); an age beyond that means the
//     reading server runs ahead of the writer's by at least the difference.
//
// [timing.SkewWindow] is how long a measurement counts: the smallest age of a term,
// and the reported skew, are taken over the last window to half of it (two
// halves), so a skew that changes is followed. The window is at least 2L (see
// newSkew), so that the reads of a term made while its leader was live are still
// counted when its lease runs out.

// skew is one follower's clock-skew bookkeeping. It is fed every row read and kept
// by the Machine; it has no clock of its own.
type skew struct {
	term  int64  // the term whose rows fresh measures
	fresh window // smallest age read of term (min)
	ahead window // evidence that the reading server runs ahead (max)
	behnd window // evidence that it runs behind (max)

	prevVersion int64 // the previous read of term (0: none)
	prevSent    time.Time
	// renewed is the send time of the last read of term that was followed by a
	// read showing the term renewed (a higher version, no step-down request): the
	// renewal executed after it, so the lease lives until at least renewed + L,
	// whatever tick_time says. Zero: no renewal seen.
	renewed time.Time
}

func newSkew(lease time.Duration) skew {
	span := max(timing.SkewWindow, 2*lease)
	return skew{fresh: window{span: span}, ahead: window{span: span}, behnd: window{span: span}}
}

// observe records a read sent at sent, whose reply arrived at received, that
// found the unreleased row rec.
func (s *skew) observe(rec store.Record, sent, received time.Time) {
	if rec.Term != s.term {
		s.term, s.prevVersion, s.renewed = rec.Term, 0, time.Time{}
		s.fresh.reset()
	}
	if s.prevVersion != 0 && rec.Version > s.prevVersion && !rec.StepDown {
		s.renewed = s.prevSent
	}
	s.fresh.add(sent, rec.Age, true)
	if !rec.OneClock {
		s.evidence(rec, sent, received)
	}
	s.prevVersion, s.prevSent = rec.Version, sent
}

// evidence records the skew that rec, read on a multi-primary cluster, shows.
func (s *skew) evidence(rec store.Record, sent, received time.Time) {
	if rec.Ahead > 0 {
		s.behnd.add(sent, rec.Ahead, false)
	}
	if s.prevVersion != 0 && rec.Version != s.prevVersion && rec.Ahead == 0 {
		if e := rec.Age - received.Sub(s.prevSent); e > 0 {
			s.ahead.add(sent, e, false)
		}
	}
}

// elapsed returns how long the lease of rec, read at sent, has certainly run by the
// reading server's clock: rec.Age minus the freshest age read of its term, or, for
// an age beyond any supported skew, rec.Age less [rules.FutureTolerance]. Call it
// after observe.
func (s *skew) elapsed(rec store.Record, sent time.Time) time.Duration {
	e := rec.Age - rules.FutureTolerance
	if f, ok := s.fresh.get(sent, true); ok && rec.Term == s.term {
		e = max(e, rec.Age-f)
	}
	return max(e, 0)
}

// renewedAfter returns the send time of the last read of rec's term that a renewal
// followed (see skew.renewed); ok is false when none was seen.
func (s *skew) renewedAfter(rec store.Record) (time.Time, bool) {
	return s.renewed, rec.Term == s.term && !s.renewed.IsZero()
}

// measured returns the skew observed within the window at now: positive when the
// server this follower reads runs ahead of the one that wrote the row, negative
// when it runs behind; the larger of the two in magnitude, 0 when none was seen.
func (s *skew) measured(now time.Time) time.Duration {
	a, _ := s.ahead.get(now, false)
	b, _ := s.behnd.get(now, false)
	if b > a {
		return -b
	}
	return a
}

// window keeps the smallest (or largest) value added in the last span to span/2,
// in two halves.
type window struct {
	span      time.Duration
	cur, prev slot
}

type slot struct {
	start time.Time
	v     time.Duration
	ok    bool
}

func (w *window) reset() { w.cur, w.prev = slot{}, slot{} }

// roll starts a new half at at when the current one is span/2 old.
func (w *window) roll(at time.Time) {
	if w.cur.ok && at.Sub(w.cur.start) >= w.span/2 {
		w.prev, w.cur = w.cur, slot{}
		if at.Sub(w.prev.start) >= w.span {
			w.prev = slot{}
		}
	}
}

func (w *window) add(at time.Time, v time.Duration, least bool) {
	w.roll(at)
	if !w.cur.ok {
		w.cur = slot{start: at, v: v, ok: true}
		return
	}
	if least == (v < w.cur.v) {
		w.cur.v = v
	}
}

func (w *window) get(at time.Time, least bool) (time.Duration, bool) {
	w.roll(at)
	switch {
	case !w.cur.ok && !w.prev.ok:
		return 0, false
	case !w.prev.ok:
		return w.cur.v, true
	case !w.cur.ok:
		return w.prev.v, true
	case least:
		return min(w.cur.v, w.prev.v), true
	}
	return max(w.cur.v, w.prev.v), true
}
