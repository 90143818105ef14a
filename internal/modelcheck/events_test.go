package modelcheck

import (
	"fmt"
)

// kind is a kind of step.
type kind uint8

const (
	evTick         kind = iota // time advances one unit on every clock
	evSlow                     // time advances, but not on p's clock
	evFast                     // p's clock advances alone (unused: a clock that runs fast only makes its owner step down earlier)
	evSend                     // p's executor sends its next statement
	evExec                     // the database executes p's statement (arg: -1 current, else an orphan)
	evDeliver                  // p receives the reply to its current statement
	evFail                     // p's current statement fails (timeout, reset): lost request or reply
	evExpire                   // p's trust deadline timer fires
	evResign                   // p's user resigns
	evHandover                 // p's user hands over to arg
	evCrash                    // p's process dies
	evRestart                  // p restarts (arg 1: with Resume of its last term)
	evWake                     // p is woken with the last released version (arg 1: with none, 2: as a handover's target)
	evOutside                  // something bumps the row's version
	evStepBack                 // tick_time steps back one unit
	evRequest                  // a step-down request (arg: target slot, -1 none)
	evLate                     // time advances one unit, then p receives the reply to its executed statement
	evWorkDone                 // p's leader's work (OnStartedLeading) returns
	evDrainTimeout             // DrainTimeout passes while p's executor waits for the work
	evPause                    // p's user calls Pause
	evResume                   // p's user calls Resume
)

// namedArg in an evHandover's arg: the handover names the target's incarnation.
const namedArg = 0x40

type event struct {
	k   kind
	p   int8
	arg int8
}

func (e event) String() string {
	names := [...]string{"time+1", "time+1 (clock of %s stalls)", "clock of %s +1", "%s sends", "database executes %s's %s", "%s receives the reply", "%s's statement fails", "%s's deadline timer fires", "%s resigns", "%s hands over to %s", "%s crashes", "%s restarts", "%s woken", "outside write bumps the version", "tick_time steps back 1", "step-down requested%s", "time+1, then %s receives the reply (late)", "%s's leader's work returns", "%s's drain times out (DrainTimeout)", "%s is paused", "%s is resumed"}
	return names[e.k]
}

// events returns the steps to explore from s: every step enabled in s, or only
// the steps of one process that has a reply to take or a statement to send (an
// ample set: those steps touch only that process, so the other steps of the
// state commute with them and are explored after them; the steps of the same
// process that conflict with them, a failure or the deadline timer, are in the
// set too).
func (s *state) events(sc *scenario) []event {
	all := s.enabled(sc)
	for i := 0; i < s.n; i++ {
		var ample []event
		local := false
		for _, e := range all {
			if int(e.p) != i || e.k < evSend {
				continue
			}
			switch e.k {
			case evSend, evDeliver:
				local = true
				ample = append(ample, e)
			case evFail, evExpire, evLate:
				ample = append(ample, e)
			}
		}
		if local {
			return ample
		}
	}
	return all
}

// enabled returns the steps enabled in s.
func (s *state) enabled(sc *scenario) []event {
	var out []event
	if s.now < sc.horizon && !s.urgent() {
		out = append(out, event{k: evTick})
	}
	if s.row.exists && s.outside < sc.outside {
		out = append(out, event{k: evOutside})
	}
	if s.row.exists && s.stepBack < sc.stepBack {
		out = append(out, event{k: evStepBack})
	}
	if s.row.exists && s.row.leader != "" && !s.row.stepdown && s.requests < sc.requests {
		out = append(out, event{k: evRequest, arg: -1})
		if sc.handover {
			for i := 0; i < s.n; i++ {
				if s.procs[i].id != s.row.leader {
					out = append(out, event{k: evRequest, arg: int8(i)})
				}
			}
		}
	}
	for i := 0; i < s.n; i++ {
		out = s.procEvents(sc, i, out)
	}
	return out
}

func (s *state) procEvents(sc *scenario, i int, out []event) []event {
	p := &s.procs[i]
	e := func(k kind, arg int8) { out = append(out, event{k: k, p: int8(i), arg: arg}) }
	for j, o := range p.orphans {
		if o.op != opNone && !o.done {
			e(evExec, int8(j))
		}
	}
	if p.ph == phDead {
		if s.crashes <= sc.crashes && p.gen < 3 {
			e(evRestart, 0)
			if s.lastWon(p) != 0 {
				e(evRestart, 1)
			}
		}
		return out
	}
	if sc.drain && p.work != 0 && p.ph != phLead && p.ph != phSettle {
		e(evWorkDone, 0)
	}
	if p.ph == phDrain {
		e(evDrainTimeout, 0)
	}
	if p.ph == phStopped {
		return out
	}
	if p.paused {
		e(evResume, 0)
	} else if s.pauses < sc.pauses {
		e(evPause, 0)
	}
	if s.now < sc.horizon && p.drift > -sc.drift && !s.urgent() {
		e(evSlow, 0)
	}
	if s.crashes < sc.crashes {
		e(evCrash, 0)
	}
	if p.cur.op != opNone {
		if !p.cur.done {
			e(evExec, -1)
		} else {
			e(evDeliver, 0)
			if sc.late && s.now < sc.horizon && !s.urgent() && s.local(p)+1-p.cur.sent <= lag {
				e(evLate, 0)
			}
		}
		if s.faults < sc.faults {
			e(evFail, 0)
		}
	} else if s.canSend(p) {
		e(evSend, 0)
	}
	if p.m.Leading() && (p.ph == phLead || p.ph == phSettle) && !p.m.Trusted(at(s.local(p))) {
		e(evExpire, 0)
	}
	if p.ph == phLead && p.cur.op == opNone {
		if sc.resign {
			e(evResign, 0)
		}
		if sc.handover {
			for j := 0; j < s.n; j++ {
				if s.procs[j].id != p.id && (sc.target == "" || sc.target == s.procs[j].id) {
					e(evHandover, int8(j))
					if sc.named {
						e(evHandover, int8(j)|namedArg)
					}
					break
				}
			}
		}
	}
	if sc.wake && p.ph == phFollow && p.cur.op == opNone && s.relVer > 0 {
		e(evWake, 0)
	}
	if sc.electsReleased && p.ph == phFollow && p.cur.op == opNone {
		e(evWake, 1)
		e(evWake, 2)
	}
	return out
}

// urgent reports whether a process has something to do before time may
// advance: a statement to send (a read or renewal that is due, a retry), or a
// trust deadline that has passed. Delays are the network's: a statement sent at
// once may execute, and its reply arrive, any time later.
func (s *state) urgent() bool {
	for i := 0; i < s.n; i++ {
		p := &s.procs[i]
		if p.ph == phDead || p.ph == phStopped {
			continue
		}
		if p.cur.op == opNone && s.canSend(p) {
			return true
		}
		if p.cur.op != opNone && s.local(p)-p.cur.sent >= lag {
			return true // the round trip takes at most lag: it ends, or fails
		}
		if p.m.Leading() && (p.ph == phLead || p.ph == phSettle) && !p.m.Trusted(at(s.local(p))) {
			return true
		}
	}
	return false
}

// canSend reports whether p's executor has a statement to send now.
func (s *state) canSend(p *proc) bool {
	switch p.ph {
	case phFollow:
		return s.local(p) >= p.nextRead
	case phLead:
		return s.local(p) >= p.lastRenew+heartbeat && p.m.Trusted(at(s.local(p)))
	case phSettle, phRelease:
		return true
	}
	return false
}

// lastWon returns the highest term won by an earlier process of p's slot.
func (s *state) lastWon(p *proc) int64 {
	for t := maxTerm - 1; t > 0; t-- {
		if k := s.wonBy[t]; k != 0 && (k-1)>>4 == p.slot {
			return int64(t)
		}
	}
	return 0
}

// describe names the event in terms of s (the state it is applied to).
func (s *state) describe(e event) string {
	if e.k == evTick || e.k == evOutside || e.k == evStepBack {
		return e.String()
	}
	if e.k == evRequest {
		if e.arg < 0 {
			return fmt.Sprintf(e.String(), " (release)")
		}
		return fmt.Sprintf(e.String(), " (hand over to "+s.procs[e.arg].name()+")")
	}
	p := &s.procs[e.p]
	switch e.k {
	case evExec:
		c := p.cur
		if e.arg >= 0 {
			c = p.orphans[e.arg]
			return fmt.Sprintf("database executes %s's abandoned %s (sent at %d, from v%d)", p.name(), c.op, c.sent, c.from)
		}
		return fmt.Sprintf(e.String(), p.name(), c.op)
	case evHandover:
		if e.arg&namedArg != 0 {
			return fmt.Sprintf("%s hands over to %s, naming its incarnation", p.name(), s.procs[e.arg&^namedArg].name())
		}
		return fmt.Sprintf(e.String(), p.name(), s.procs[e.arg].name())
	case evWake:
		switch e.arg {
		case 1:
			return fmt.Sprintf("%s woken without a version", p.name())
		case 2:
			return fmt.Sprintf("%s woken as a handover's target", p.name())
		}
	case evRestart:
		if e.arg == 1 {
			return fmt.Sprintf("%s restarts with ResumeTerm %d", p.name(), s.lastWon(p))
		}
		return fmt.Sprintf("%s restarts", p.name())
	case evSend:
		return fmt.Sprintf("%s sends %s", p.name(), s.nextOp(p))
	}
	return fmt.Sprintf(e.String(), p.name())
}

func (p *proc) name() string { return fmt.Sprintf("%s[%s]", p.id, p.inc) }

func (s *state) nextOp(p *proc) op {
	switch p.ph {
	case phFollow, phSettle:
		return opRead
	case phLead:
		return opRenew
	case phRelease:
		if p.relRead {
			return opRead
		}
		if p.relTo != "" {
			return opHandover
		}
		return opRelease
	}
	return opNone
}
