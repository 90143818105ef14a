package modelcheck

import (
	"github.com/casleader/casleader/cas"
	"github.com/casleader/casleader/store"
)

// The executor's glue: what the engine (group.go) does with each reply and each
// decision, minimally. The machine decides every protocol question.

// deliver hands p the reply to c at local time now.
func (s *state) deliver(sc *scenario, p *proc, c call, now int) {
	var rec store.Record
	if c.op == opRead && c.ok {
		rec = record(c.res, c.resAt, sc.oneClock)
	}
	switch p.ph {
	case phFollow:
		s.followReply(p, c, rec, now)
	case phLead: // a renewal
		if !c.ok {
			s.settle(p, now)
			return
		}
		if d := p.m.RenewReply(c.from+1, at(c.sent), at(now)); d.Action != cas.Lead {
			s.endTerm(p, d, now)
			return
		}
		p.ambiguous = false
	case phSettle:
		d := p.m.SettledAt(rec, c.ok, at(c.sent), at(now))
		if d.Action == cas.Lead && !p.m.Trusted(at(now)) {
			d = cas.Decision{Action: cas.StepDown} // the expiry timer fired meanwhile
		}
		if d.Action == cas.Lead {
			p.ph = phLead
			if p.paused {
				s.interrupt(p, now) // the next heartbeat is interrupted at once
			}
			return
		}
		s.endTerm(p, d, now)
	case phRelease:
		s.releaseReply(p, c, rec, now)
	}
}

// followReply handles a reply while following (the engine's followReply).
func (s *state) followReply(p *proc, c call, rec store.Record, now int) {
	var d cas.Decision
	switch c.op {
	case opRead:
		d = p.m.Observed(rec, c.ok, at(c.sent), s.part(p, now))
		if d.Action != cas.Refuse {
			sightings(&p.m, rec)
		}
	case opInsert:
		d = p.m.Created(c.term, c.ok, at(c.sent))
	case opElect, opElectReleased:
		d = p.m.Elected(c.term, c.ok, at(c.sent))
	case opRenew: // a Confirm
		d = p.m.Confirmed(c.ok, at(c.sent))
	}
	s.campaigned(p, d, c.op == opRead)
	switch d.Action {
	case cas.Wait:
		p.nextRead = now + 1
		if c.op == opRead {
			w := int((d.Wait + unit - 1) / unit)
			p.nextRead = c.sent + min(max(w, 1), poll)
		}
	case cas.Create:
		p.cur = call{op: opInsert, sent: now}
	case cas.Campaign:
		p.cur = call{op: opElect, sent: now, from: d.Version}
	case cas.Confirm:
		p.cur = call{op: opRenew, sent: now, from: d.Version}
	case cas.Lead:
		if p.work != 0 {
			s.besideRunning = p.m.Term()
		}
		p.ph, p.ambiguous, p.lapsed = phLead, false, false
		if s.drain {
			p.work = p.m.Term()
		}
		if c.op == opRead {
			p.lastRenew = -100 // adopted: renew at once
		} else {
			p.lastRenew = c.sent
		}
		if p.paused {
			s.interrupt(p, now) // won by a write sent before the pause
		}
	case cas.Refuse:
		p.ph = phStopped
	}
}

// failed handles the failure of c (the engine's applyWon and renewReply, the renewal's
// ambiguous flag, settle's and release's read errors).
func (s *state) failed(p *proc, c call, now int) {
	switch {
	case c.op == opInsert || c.op == opElect || c.op == opElectReleased || c.op == opRenew && p.ph == phFollow:
		p.m.Unsettled()
	case c.op == opRenew:
		p.ambiguous = true // the engine retries the renewal from the same version
	case p.ph == phRelease && c.op == opRead:
		s.releaseDone(p, false) // release: a read error ends the loop
	case p.ph == phRelease:
		p.relRead = true
	}
}

// settle starts settling a renewal that lost its compare-and-set.
func (s *state) settle(p *proc, now int) {
	p.m.RenewalFailed(p.ambiguous)
	p.ambiguous = false
	p.ph = phSettle
	s.send(nil, p, now)
}

// endTerm ends the term led by p with decision d (the engine's stopLeading and end, after its
// loop): stop acting, drain the leader's work, then release or hand over when
// asked to.
func (s *state) endTerm(p *proc, d cas.Decision, now int) {
	token := p.m.Term()
	var version int64
	var held bool
	if d.Action == cas.Refuse {
		p.ph = phStopped
		return
	}
	if p.ph == phSettle && (d.Action == cas.Release || d.Action == cas.Handover) {
		version, held = p.m.Yield(at(now)) // asked through the row (group.go)
	} else {
		version, held = p.m.Resign()
		if held && (d.Action == cas.Release || d.Action == cas.Handover) {
			p.m.CoolDown(at(now + p.lease)) // Resign and HandoverTo cool down one lease
		}
	}
	if held {
		p.resigned = token
	}
	p.relPending = held && (d.Action == cas.Release || d.Action == cas.Handover)
	if p.relPending {
		p.relToken, p.relVersion, p.relTo, p.relInc, p.relAttempt, p.relRead = token, version, d.To, "", 0, false
	}
	p.ph = phDrain
	if p.work == 0 || s.revert&revNoDrain != 0 {
		s.drained(p, true, now)
	}
}

// drained ends p's drain (the engine's drain): the work returned (ok), or
// DrainTimeout passed. The release or handover is written only after the work
// returned; else the lease expires by itself.
func (s *state) drained(p *proc, ok bool, now int) {
	p.ph = phFollow
	if !p.relPending || (!ok && s.revert&revReleaseUndrained == 0) {
		p.relPending = false
		return
	}
	p.relPending = false
	p.ph = phRelease
	s.send(nil, p, now)
}

// part is how p takes part in the election at now (the engine's
// participation, and follow's: abstaining while the work of an earlier term
// still runs).
func (s *state) part(p *proc, now int) cas.Participation {
	busy := p.work != 0 && s.revert&revLeadBeside == 0
	paused := p.paused && s.revert&revPausedCampaigns == 0
	return p.m.Participation(at(now), busy || paused, false)
}

// interrupt ends the heartbeat of p, a leader that was paused (the engine's
// tick: Tick, as an abstaining candidate, asks to release).
func (s *state) interrupt(p *proc, now int) {
	p.abandon(p.cur)
	p.cur = call{}
	p.ph = phLead
	s.endTerm(p, p.m.Tick(at(now), cas.Abstaining), now)
}

// campaigned records p as acting while paused if d campaigns, or leads a
// lease adopted from a read.
func (s *state) campaigned(p *proc, d cas.Decision, read bool) {
	switch {
	case !p.paused:
	case d.Action == cas.Create, d.Action == cas.Campaign, d.Action == cas.CampaignReleased, d.Action == cas.Lead && read:
		s.pausedActs = p.slot + 1
	}
}

// releaseReply handles a reply in the release loop (the engine's send and resendFrom).
func (s *state) releaseReply(p *proc, c call, rec store.Record, now int) {
	if c.op != opRead {
		if c.ok {
			v := p.relVersion + 1
			if c.op == opHandover {
				v = c.term
			}
			p.m.Released(v, true, p.relTo)
			p.ph = phFollow
			return
		}
		p.relRead = true
		s.send(nil, p, now)
		return
	}
	from, retry := p.m.RetryFrom(p.relToken, p.relVersion, rec, c.ok)
	if !retry || p.relAttempt >= 2 {
		s.releaseDone(p, false)
		return
	}
	p.relAttempt++
	p.relVersion, p.relRead = from, false
	s.send(nil, p, now)
}

func (s *state) releaseDone(p *proc, ok bool) {
	p.m.Released(p.relVersion+1, ok, p.relTo)
	p.ph = phFollow
}
