package modelcheck

import (
	"fmt"

	"github.com/casleader/casleader/cas"
)

// apply performs e on s.
func (s *state) apply(sc *scenario, e event) {
	switch e.k {
	case evTick:
		s.now++
		s.dropOrphans()
		return
	case evOutside:
		s.outside++
		s.row.version++
		return
	case evStepBack:
		s.stepBack++
		s.row.tick--
		return
	case evRequest:
		s.requests++
		s.row.version++
		s.row.stepdown = true
		s.row.handover = ""
		if e.arg >= 0 {
			s.row.handover = s.procs[e.arg].id
		}
		return
	}
	p := &s.procs[e.p]
	if e.k == evLate {
		s.now++
		s.dropOrphans()
		e.k = evDeliver
	}
	now := s.local(p)
	switch e.k {
	case evSlow:
		s.now++
		p.drift--
		s.dropOrphans()
	case evFast:
		p.drift++
	case evSend:
		s.send(sc, p, now)
	case evExec:
		if e.arg < 0 {
			s.exec(p, &p.cur)
			if p.cur.op == opRead && p.ph != phSettle {
				// A follower's read is one step: the time its reply takes
				// changes nothing that the sends after it do not cover.
				c := p.cur
				p.cur = call{}
				s.deliver(sc, p, c, now)
			}
		} else {
			s.exec(p, &p.orphans[e.arg])
			p.orphans[e.arg] = call{}
		}
	case evDeliver:
		c := p.cur
		p.cur = call{}
		s.deliver(sc, p, c, now)
	case evFail:
		s.faults++
		c := p.cur
		p.cur = call{}
		p.abandon(c)
		s.failed(p, c, now)
	case evExpire:
		p.abandon(p.cur)
		p.cur = call{}
		p.m.DeadlinePassed(at(now))
		s.endTerm(p, cas.Decision{Action: cas.StepDown}, now)
	case evResign:
		s.endTerm(p, cas.Decision{Action: cas.Release}, now)
	case evHandover:
		to := &s.procs[e.arg&^namedArg]
		s.endTerm(p, cas.Decision{Action: cas.Handover, To: to.id}, now)
		if e.arg&namedArg != 0 && p.relPending {
			p.relInc = to.inc // as a members read showed it: it may be stale by the write
		}
	case evCrash:
		s.crashes++
		p.abandon(p.cur)
		p.cur = call{}
		p.ph, p.work, p.relPending = phDead, 0, false
	case evWorkDone:
		p.work = 0
		if p.ph == phDrain {
			s.drained(p, true, now)
		}
	case evPause:
		s.pauses++
		p.paused = true
		if p.ph == phLead {
			s.interrupt(p, now)
		}
	case evResume:
		p.paused = false
		if p.ph == phFollow && p.cur.op == opNone {
			p.nextRead = min(p.nextRead, now) // the watch is interrupted: it reads again
		}
	case evDrainTimeout:
		s.drained(p, false, now)
	case evRestart:
		term := s.lastWon(p)
		p.gen++
		p.inc = intern(fmt.Sprintf("%s%d", p.id, p.slot*10+p.gen))
		p.m = newMachine(p)
		p.ph, p.ambiguous, p.resumed, p.resigned = phFollow, false, 0, 0
		p.nextRead, p.lastRenew = now, -100
		if e.arg == 1 {
			p.resumed = term
			p.m.Resume(term)
		}
	case evWake:
		v := s.relVer
		switch e.arg {
		case 1:
			v = 0 // a wake-up that carries no version
		case 2:
			v = -1 // a handover to p (notify.HandedOver), sent or not
		}
		d := p.m.Woken(v, s.part(p, now), 0)
		s.campaigned(p, d, false)
		if d.Action == cas.Wait && d.Wait == 0 && p.ph == phFollow {
			p.nextRead = min(p.nextRead, now) // a read at once
		}
		switch d.Action {
		case cas.Campaign:
			p.cur = call{op: opElect, sent: now, from: d.Version}
		case cas.CampaignReleased:
			p.cur = call{op: opElectReleased, sent: now, from: d.Version}
		}
	}
}

// dropOrphans forgets the abandoned statements that are now too old to execute.
func (s *state) dropOrphans() {
	for i := 0; i < s.n; i++ {
		p := &s.procs[i]
		for j := range p.orphans {
			if p.orphans[j].op != opNone && s.local(p)-p.orphans[j].sent > orphanLag {
				p.orphans[j] = call{}
			}
		}
	}
}

// abandon keeps c, a statement given up on, pending at the database if it has
// not executed yet (it may execute later, or never).
func (p *proc) abandon(c call) {
	if c.op == opNone || c.done {
		return
	}
	if p.orphans[0].op == opNone {
		p.orphans[0] = c
		return
	}
	p.orphans[1] = c // the older one never executes
}

// send sends p's next statement (the engine's follow, renew, settle and release).
func (s *state) send(sc *scenario, p *proc, now int) {
	switch p.ph {
	case phFollow:
		p.nextRead = now + 1
		p.cur = call{op: opRead, sent: now}
	case phLead:
		p.lastRenew = now
		p.cur = call{op: opRenew, sent: now, from: p.m.Version()}
	case phSettle:
		if !p.m.Trusted(at(now)) {
			s.endTerm(p, p.m.DeadlinePassed(at(now)), now)
			return
		}
		p.cur = call{op: opRead, sent: now}
	case phRelease:
		switch {
		case p.relRead:
			p.cur = call{op: opRead, sent: now}
		case p.relTo != "":
			p.cur = call{op: opHandover, sent: now, from: p.relVersion, to: p.relTo, toInc: p.relInc}
		default:
			p.cur = call{op: opRelease, sent: now, from: p.relVersion}
		}
	}
}

// exec executes c, a statement of p, on the row at the database's time.
func (s *state) exec(p *proc, c *call) {
	r, now := s.row, s.now
	c.done = true
	held := r.exists && r.version == c.from && r.leader == p.id
	switch c.op {
	case opRead:
		c.ok, c.res, c.resAt = r.exists, r, now
		if s.takesLiveLeases {
			c.res.tick -= 100
		}
	case opInsert:
		if !r.exists && s.revert&revElectionsLose == 0 {
			s.win(p, 1)
			c.ok, c.term = true, 1
		}
	case opElectReleased:
		if releasedWins(r, p) || (s.revert&revElectReleasedAnyRow != 0 && r.exists) {
			s.win(p, r.version+1)
			c.ok, c.term = true, r.version+1
		}
	case opElect:
		if r.exists && r.version == c.from && (takeable(r, p, now) || s.takesLiveLeases) && s.revert&revElectionsLose == 0 {
			s.win(p, c.from+1)
			c.ok, c.term = true, c.from+1
		}
	case opRenew:
		if held {
			s.row.version++
			s.row.tick = now
			c.ok = true
		}
	case opRelease:
		if held {
			s.running(r.term)
			s.row = released(r, now)
			s.relVer = s.row.version
			c.ok = true
		}
	case opHandover:
		if held {
			s.running(r.term)
			s.row = handedOver(r, c.to, c.toInc, c.from+1, now)
			c.ok, c.term = true, c.from+1
			for i := 0; i < s.n && c.toInc != "" && c.from+1 < maxTerm; i++ {
				if s.procs[i].inc == c.toInc { // the process the row names, if it still runs
					s.wonBy[c.from+1] = handedMark | s.procs[i].key()
				}
			}
		}
	}
}

// win records an election or creation of p executed at the database in term.
func (s *state) win(p *proc, term int64) {
	s.row = elected(p, term, s.now)
	if term >= maxTerm {
		s.overflow = true
		return
	}
	s.wonBy[term] = p.key() + 1
}

// running records term as released while its work still runs, if it does.
func (s *state) running(term int64) {
	for i := 0; i < s.n; i++ {
		if s.procs[i].work == term {
			s.releasedRunning = term
		}
	}
}
