package modelcheck

import (
	"fmt"
	"hash/maphash"
	"strings"
	"time"
	"unsafe"
)

// handedMark in wonBy marks a term started by a handover that named its target's
// incarnation, with the key of that process in the low bits: it may lead that
// term from a read, and nobody else may.
const handedMark = 0x80

// check checks the invariants in s and updates their bookkeeping. It returns a
// description of the violation, or "".
func (s *state) check() string {
	if t := s.releasedRunning; t != 0 {
		return fmt.Sprintf("term %d was released while its leader's work still ran (it had not returned after its context was cancelled): the next leader may start beside it", t)
	}
	if k := s.pausedActs; k != 0 {
		return fmt.Sprintf("%s campaigned or adopted a lease while paused", s.procs[k-1].name())
	}
	if t := s.besideRunning; t != 0 {
		return fmt.Sprintf("a process starts leading term %d while the leader's work it started before still runs: two OnStartedLeading of one process at once", t)
	}
	var trusted *proc
	for i := 0; i < s.n; i++ {
		p := &s.procs[i]
		if p.ph == phDead || !p.m.Trusted(at(s.local(p))) {
			p.lapsed = true
			continue
		}
		tok := p.m.Term()
		if p.lapsed {
			return fmt.Sprintf("%s trusts term %d again after its trust lapsed, without starting the term again (IsLeader said false, the leader's work was cancelled)", p.name(), tok)
		}
		if trusted != nil {
			return fmt.Sprintf("%s (term %d) and %s (term %d) both trust their leadership", trusted.name(), trusted.m.Term(), p.name(), tok)
		}
		trusted = p
		if tok >= maxTerm {
			s.overflow = true
			return ""
		}
		won := s.wonBy[tok]
		resumed := p.resumed == tok && won != 0 && (won-1)>>4 == p.slot
		handed := won&handedMark != 0 && won&^handedMark == p.key()
		if won != p.key()+1 && !resumed && !handed {
			return fmt.Sprintf("%s trusts term %d, which it did not win, claim or resume (won by %s)", p.name(), tok, s.winner(tok))
		}
		if tok == p.resigned {
			return fmt.Sprintf("%s trusts term %d again after resigning it", p.name(), tok)
		}
		switch {
		case tok < s.lastTok:
			return fmt.Sprintf("%s trusts term %d after term %d was trusted: tokens went backwards", p.name(), tok, s.lastTok)
		case tok == s.lastTok && s.lastProc != p.key() && !resumed:
			return fmt.Sprintf("%s trusts term %d, which another process trusted before", p.name(), tok)
		}
		s.lastTok, s.lastProc = tok, p.key()
	}
	return ""
}

func (s *state) winner(t int64) string {
	k := s.wonBy[t]
	switch k {
	case 0:
		return "nobody"
	}
	if k&handedMark != 0 {
		k &^= handedMark
		return fmt.Sprintf("a handover to %s, generation %d", s.procs[k>>4].id, k&15)
	}
	k--
	return fmt.Sprintf("%s, generation %d", s.procs[k>>4].id, k&15)
}

var seed = maphash.MakeSeed()

// hash is the state's fingerprint: its bytes, the machines' included (a
// cas.Machine holds no pointer but its strings, and every string in a state is
// interned, see intern: equal strings have equal pointers, and none is freed).
func (s *state) hash() uint64 {
	return maphash.Bytes(seed, unsafe.Slice((*byte)(unsafe.Pointer(s)), unsafe.Sizeof(*s)))
}

var interned = map[string]string{}

// intern returns the one copy of v kept for the process's life.
func intern(v string) string {
	if w, ok := interned[v]; ok {
		return w
	}
	interned[v] = v
	return v
}

// show prints s: the time, the row, and each process.
func (s *state) show(b *strings.Builder) {
	r := s.row
	if r.exists {
		fmt.Fprintf(b, "    t=%-2d row v%d term %d leader %q inc %q lease %d tick %d (age %d) handover %q stepdown %v\n",
			s.now, r.version, r.term, r.leader, r.inc, r.lease, r.tick, s.now-r.tick, r.handover, r.stepdown)
	} else {
		fmt.Fprintf(b, "    t=%-2d row missing\n", s.now)
	}
	for i := 0; i < s.n; i++ {
		p := &s.procs[i]
		local := s.local(p)
		role := "candidate"
		switch {
		case p.m.Leading():
			role = "leader"
		case p.m.Following():
			role = "follower"
		}
		fmt.Fprintf(b, "         %-6s clock %-2d %-8s %-9s", p.name(), local, p.ph, role)
		if p.m.Leading() {
			fmt.Fprintf(b, " term %d deadline %g trusted %v", p.m.Term(), float64(p.m.Deadline().Sub(epoch))/float64(unit), p.m.Trusted(at(local)))
		}
		fmt.Fprintf(b, " v%d", p.m.Version())
		if p.paused {
			b.WriteString(" paused")
		}
		if p.work != 0 {
			fmt.Fprintf(b, " work of term %d runs", p.work)
		}
		if c := p.cur; c.op == opRead {
			fmt.Fprintf(b, " waiting: read sent %d executed %v", c.sent, c.done)
		} else if c.op != opNone {
			fmt.Fprintf(b, " waiting: %s sent %d from v%d executed %v", c.op, c.sent, c.from, c.done)
		}
		for _, o := range p.orphans {
			if o.op != opNone {
				fmt.Fprintf(b, " abandoned: %s sent %d from v%d", o.op, o.sent, o.from)
			}
		}
		b.WriteByte('\n')
	}
}

// node is a visited state: how it was reached.
type node struct {
	parent int32
	ev     event
}

// result is what a search found.
type result struct {
	states    int
	depth     int
	elapsed   time.Duration
	violation string
	trace     string
	truncated bool // the depth bound, the frontier bound or the term bound cut the search
	capped    bool // the frontier or state bound cut it: some states within the depth were not explored
}

// progress, when set, is told of each level of the search.
var progress func(depth, frontier, seen int)

// maxStates and maxFrontier bound a search's memory (a state is about 4 KB; a
// level of the search keeps two frontiers).
const (
	maxStates   = 3_000_000
	maxFrontier = 250_000
)

// explore searches sc's states breadth-first, up to its depth bound, and stops at
// the first violation, whose trace is the shortest.
func explore(sc *scenario) result {
	start := time.Now()
	init := initial(sc)
	seen := map[uint64]struct{}{init.hash(): {}}
	nodes := []node{{parent: -1}}
	frontier, ids := []state{init}, []int32{0}
	// next is the level being built; its storage is the level before the
	// current one, reused (a level holds up to maxFrontier states of 4 KB).
	var next []state
	var nextIDs []int32
	res := result{}
	for depth := 0; len(frontier) > 0; depth++ {
		res.depth = depth
		if sc.depth > 0 && depth >= sc.depth {
			res.truncated = true
			break
		}
		if len(seen) > maxStates {
			res.truncated, res.capped = true, true
			break
		}
		if progress != nil {
			progress(depth, len(frontier), len(seen))
		}
		next, nextIDs = next[:0], nextIDs[:0]
		for i := range frontier {
			for _, e := range frontier[i].events(sc) {
				s := frontier[i]
				s.apply(sc, e)
				msg := s.check()
				if s.overflow {
					res.truncated = true
					continue
				}
				h := s.hash()
				if _, ok := seen[h]; ok && msg == "" {
					continue
				}
				seen[h] = struct{}{}
				nodes = append(nodes, node{parent: ids[i], ev: e})
				if msg != "" {
					res.states, res.elapsed = len(seen), time.Since(start)
					res.violation, res.trace = msg, replay(sc, nodes, int32(len(nodes)-1))
					return res
				}
				if sc.live && msg == "" && s.eligible() {
					if cont, ok := s.continuation(sc); !ok {
						res.states, res.elapsed = len(seen), time.Since(start)
						res.violation = fmt.Sprintf("no process leads within %d steps of a fault-free continuation", len(cont))
						res.trace = liveTrace(sc, nodes, int32(len(nodes)-1), cont, res.violation)
						return res
					}
				}
				if len(next) >= maxFrontier {
					res.truncated, res.capped = true, true
					continue
				}
				next, nextIDs = append(next, s), append(nextIDs, int32(len(nodes)-1))
			}
		}
		frontier, ids, next, nextIDs = next, nextIDs, frontier, ids
	}
	res.states, res.elapsed = len(seen), time.Since(start)
	return res
}

// replay prints the trace that leads to node n, step by step.
func replay(sc *scenario, nodes []node, n int32) string {
	var b strings.Builder
	s := initial(sc)
	fmt.Fprintf(&b, "scenario %s\n", sc.name)
	s.show(&b)
	for i, e := range pathTo(nodes, n) {
		fmt.Fprintf(&b, "%3d. %s\n", i+1, s.describe(e))
		s.apply(sc, e)
		msg := s.check()
		s.show(&b)
		if msg != "" {
			fmt.Fprintf(&b, "VIOLATION: %s\n", msg)
		}
	}
	return b.String()
}

// pathTo returns the steps from the initial state to node n.
func pathTo(nodes []node, n int32) []event {
	var path []event
	for ; nodes[n].parent >= 0; n = nodes[n].parent {
		path = append(path, nodes[n].ev)
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}
