package modelcheck

// The parts of the model that follow the row's columns and the machine's
// constructor: the only file that differs when the checker is run against an
// older version of the protocol.

import (
	"time"

	"github.com/casleader/casleader/cas"
	"github.com/casleader/casleader/store"
)

// newMachine is the machine of process p, as an executor builds it.
func newMachine(p *proc) cas.Machine {
	m := cas.New(store.Candidate{ID: p.id, Incarnation: p.inc, Lease: dur(p.lease)}, p.renew)
	m.ElectsReleased(p.electsReleased)
	m.Named(p.named)
	return *m
}

// releasedWins is the condition of the ElectReleased statement by p: the row is
// released, or handed over to p's ID and not claimed, whatever its version.
func releasedWins(r row, p *proc) bool {
	return r.exists && r.version >= 1 && (r.leader == "" || (r.leader == p.id && r.handover == p.id && !r.stepdown))
}

// record is what a read executed at database time now returns of r.
func record(r row, now int, oneClock bool) store.Record {
	age := now - r.tick
	return store.Record{
		Key: "k", Version: r.version, LeaderID: r.leader, Term: r.term,
		Age: dur(max(age, 0)), Ahead: dur(max(-age, 0)),
		HandoverTo: r.handover, StepDown: r.stepdown,
		Lease: dur(r.lease), Incarnation: r.inc, OneClock: oneClock,
	}
}

// takeable is the election statement's condition (internal/sqlstore's
// mysqlTakeable, memstore's takeable) for candidate p at database time now.
func takeable(r row, p *proc, now int) bool {
	lease := p.lease
	if r.lease > 0 {
		lease = r.lease
	}
	return r.leader == "" || now-r.tick >= lease || (r.leader == p.id && r.handover == p.id && !r.stepdown)
}

// elected is the row an election or creation by p at database time now leaves in term.
func elected(p *proc, term int64, now int) row {
	return row{exists: true, version: term, term: term, leader: p.id, inc: p.inc, lease: p.lease, tick: now}
}

// handedOver is the row a handover of r to target to leaves in term, the lease
// kept: held by the target's incarnation inc when the handover names it, else
// handed to its ID and not claimed.
func handedOver(r row, to, inc string, term int64, now int) row {
	if inc != "" {
		return row{exists: true, version: term, term: term, leader: to, inc: inc, lease: r.lease, tick: now}
	}
	return row{exists: true, version: term, term: term, leader: to, handover: to, lease: r.lease, tick: now}
}

// sightings makes the calls an executor makes after each read to log what it
// sees (they keep state in the machine).
func sightings(m *cas.Machine, rec store.Record) {
	m.LeaseSighting(rec)
	m.ForeignSighting(rec)
}

// released is the row a release of r leaves: the term and lease kept.
func released(r row, now int) row {
	return row{exists: true, version: r.version + 1, term: r.term, lease: r.lease, tick: now}
}

func dur(units int) time.Duration { return time.Duration(units) * unit }
