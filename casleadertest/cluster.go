package casleadertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/faultstore"
	"github.com/casleader/casleader/store"
)

// PauseLeader is the fault of a [Cluster] that holds the leader's action after it
// began, as a packet held in the network or a process frozen inside the driver
// would: the first statement of its action on [DB.SQL] that would change the
// database waits, for 2 to 3 leases and until another candidate has led and
// acted, and is then delivered whatever its context says; the leader's election
// store's calls fail meanwhile (see "The pause" in the package doc). A pause that
// finds no such statement is not applied. (A Cluster injects [KillLeader] and
// [RefuseLeader] too, in this process; a [ProcessCluster] injects the other kinds,
// on real processes.)
const PauseLeader = "pause-leader"

// RestartDatabase is the fault of a [Cluster] that restarts the database server
// under the running candidates: the server is stopped (its fast shutdown drops
// every connection), kept down for [Cluster.Down] and started again on the same
// data (see [DB.Restart]); the fault heals when the server answers again, and a
// leader must be back within the liveness bound from then on. It needs a database
// of [NewRestartableDB]: the kit restarts only a server it started for the test
// alone.
const RestartDatabase = "restart-database"

// ErrKilled is what [Candidate.Act] returns, without running the action, once the
// candidate was killed by a [KillLeader] fault.
var ErrKilled = errors.New("casleadertest: the candidate was killed")

// Cluster runs candidates of the application's leader code in this process, on one
// election of a real database, injects faults on the leader and checks the
// history. Its zero value but DB and Lead is usable.
type Cluster struct {
	// DB is the database the election and the application run on ([NewDB]).
	DB *DB
	// Lead is the application's code that runs while a candidate leads: it is
	// OnStartedLeading (see casleader.Config), handed the candidate, whose Token
	// is the term's fencing token. It must call [Candidate.Act] around each action
	// it takes, and should return once ctx ends.
	Lead func(ctx context.Context, c *Candidate)
	// Candidates is how many candidates run at any time. Default 3.
	Candidates int
	// Key is the election key. Default "casleadertest".
	Key string
	// Lease is the lease duration. The renew deadline is 3/5 of it, the
	// heartbeat 1/6 and the poll interval 1/5. Default 500 ms.
	Lease time.Duration
	// Trials is how many faults to inject, one after the other: every kind of
	// Kinds once, in a shuffled order, before any comes again. Default, and at
	// least, the number of Kinds.
	Trials int
	// Kinds are the fault kinds to inject, each at least once (a run that
	// could not apply one fails): [PauseLeader]; [KillLeader], which
	// in this process ends the leader without releasing its lease (its store's
	// calls fail, its actions are refused from then on, and a fresh candidate
	// takes its place); [RefuseLeader], which makes the leader's election store and
	// guard fail for longer than its lease (a database it cannot reach). Default
	// all three. [RestartDatabase], which restarts the database server under every
	// candidate, only when asked for, on a database of [NewRestartableDB].
	Kinds []string
	// Down is how long a [RestartDatabase] fault keeps the server down, from the
	// moment it no longer answers until it is started again (its start takes a
	// while more). Default: from Lease/2 to 2 × Lease, at random.
	Down time.Duration
	// Slack is added to Lease + poll interval for the bound within which a leader
	// must be back after each fault heals. Default 2 × Lease.
	Slack time.Duration
	// Seed fixes the fault schedule. Default: from the clock (logged).
	Seed uint64
}

// Candidate is one candidate of a [Cluster], as its Lead function sees it.
type Candidate struct {
	ID      string
	Token   int64              // the fencing token of the term it leads in
	Elector *casleader.Elector // for Guard, Fence, IsLeader
	// DB is the database: the Cluster's, or in a candidate process of a
	// [ProcessCluster] the same database reached through the candidate's proxy
	// (SQL, on which faults cut, slow or refuse the link).
	DB *DB

	node   *node                              // in-process: pauses and kills
	record func(check, done int64, err error) // reports an action
}

// node is a candidate's elector and its fault state.
type node struct {
	id     string
	rec    *recorder
	faults *faultstore.Store
	el     *casleader.Elector
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	trap   *trap // a pause armed, waiting for a statement to hold; nil if none
	killed bool
}

// recorder keeps the history of a run.
type recorder struct {
	mu    sync.Mutex
	key   string
	hist  History
	open  map[term]Interval // beliefs not ended yet
	seq   int64
	lives sync.WaitGroup // beliefs not closed yet
}

// Act runs do, one action of the leader, and records it: when do returns nil, the
// action took effect in the term of c.Token, between the moment Act called do and
// the moment do returned. do's error is returned as it is; a refused action (an
// error matching casleader.ErrNotLeader or store.ErrFenced) is counted as such.
// do must run its statements on [DB.SQL] with the ctx it is given (or one derived
// from it, context.WithoutCancel included): that is where a [PauseLeader] fault
// holds the action's statement. An action whose held statement took effect is
// recorded as having begun when the kit let the statement through, whatever do
// returned. After a [KillLeader] fault Act returns [ErrKilled].
func (c *Candidate) Act(ctx context.Context, do func(ctx context.Context) error) error {
	if c.node != nil && c.node.isKilled() {
		return ErrKilled
	}
	a := &act{n: c.node}
	check := Mono()
	err := do(context.WithValue(ctx, actKey{}, a))
	rerr := err
	if a.applied.Load() {
		rerr = nil
	}
	c.record(max(check, a.released.Load()), Mono(), rerr)
	return err
}

// rejection names the reason of a refused action for [History.Rejected].
func rejection(err error) string {
	switch {
	case errors.Is(err, store.ErrFenced):
		return "database"
	case errors.Is(err, casleader.ErrNotLeader):
		return "local"
	}
	return "error"
}

// act records an action of candidate id in the term of token.
func (r *recorder) act(id string, token, check, done int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.hist.Rejected[rejection(err)]++
		return
	}
	r.seq++
	r.hist.Actions = append(r.hist.Actions, Action{ID: r.seq, Token: token, Cand: id, Check: check, Done: done, Key: r.key})
}

// term names a belief: candidate id in the term of token.
type term struct {
	id    string
	token int64
}

func (r *recorder) begin(id string, token int64, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lives.Add(1)
	r.open[term{id, token}] = Interval{Cand: id, Token: token, Start: at, Key: r.key}
}

// follow records candidate id's belief in the term of token, whose leadership
// context is ctx, as the kit's candidate processes do: from the first to the last
// instant el was seen leading in that term, sampled every millisecond, each stamp
// taken before the look. So the recorded interval lies inside the real one; a stamp
// taken when ctx ended would come late on a loaded machine.
func (r *recorder) follow(ctx context.Context, id string, token int64, el *casleader.Elector) {
	first, last := int64(-1), int64(-1)
	for {
		now := Mono()
		switch {
		case el.IsLeader() && el.Token() == token:
			if first < 0 {
				first = now
				r.begin(id, token, first)
			}
			last = now
		case first >= 0:
			r.end(id, token, last)
			return
		case ctx.Err() != nil:
			return // never seen leading: the term ended before its callback ran
		}
		time.Sleep(time.Millisecond)
	}
}

// end ends the beliefs of candidate id (in the term of token; every term for 0).
func (r *recorder) end(id string, token int64, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, b := range r.open {
		if k.id != id || token != 0 && k.token != token {
			continue
		}
		delete(r.open, k)
		b.End = max(at, b.Start)
		r.hist.Beliefs = append(r.hist.Beliefs, b)
		r.lives.Done()
	}
}

// leader returns the id of the candidate that believes it leads, or "".
func (r *recorder) leader() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var id string
	var at int64
	for k, b := range r.open {
		if id == "" || b.Start > at {
			id, at = k.id, b.Start
		}
	}
	return id
}

// Run starts the candidates, injects the trials, stops every candidate and
// checks the history. It fails t when the cluster cannot run (bad configuration,
// no leader at all); the report says whether the application's actions held.
func (cl Cluster) Run(t testing.TB) Report {
	t.Helper()
	if cl.DB == nil || cl.Lead == nil {
		t.Fatal("casleadertest: Cluster needs DB (see NewDB) and Lead")
	}
	if cl.Candidates < 0 || cl.Lease < 0 || cl.Trials < 0 || cl.Slack < 0 || cl.Down < 0 {
		t.Fatalf("casleadertest: Cluster: Candidates (%d), Lease (%v), Trials (%d), Slack (%v) and Down (%v) must not be negative", cl.Candidates, cl.Lease, cl.Trials, cl.Slack, cl.Down)
	}
	if cl.Candidates == 0 {
		cl.Candidates = 3
	}
	if cl.Key == "" {
		cl.Key = "casleadertest"
	}
	if cl.Lease == 0 {
		cl.Lease = 500 * time.Millisecond
	}
	if len(cl.Kinds) == 0 {
		cl.Kinds = []string{PauseLeader, KillLeader, RefuseLeader}
	}
	for _, k := range cl.Kinds {
		if !slices.Contains([]string{PauseLeader, KillLeader, RefuseLeader, RestartDatabase}, k) {
			t.Fatalf("casleadertest: fault kind %q: want %s, %s, %s or %s", k, PauseLeader, KillLeader, RefuseLeader, RestartDatabase)
		}
		if k == RestartDatabase && cl.DB.server == nil {
			t.Fatalf("casleadertest: Cluster: the %s fault needs a database of NewRestartableDB, a server the kit started for the test alone; this database is %s", RestartDatabase, cl.DB.from)
		}
	}
	if cl.Slack == 0 {
		cl.Slack = 2 * cl.Lease
	}
	if cl.Seed == 0 {
		cl.Seed = uint64(time.Now().UnixNano())
	}
	t.Logf("casleadertest: seed %d", cl.Seed)
	renew, beat, poll := cl.Lease*3/5, cl.Lease/6, cl.Lease/5
	bounds := Bounds{Lease: cl.Lease, Renew: renew, Poll: poll, Slack: cl.Slack}
	rng := rand.New(rand.NewPCG(cl.Seed, cl.Seed^0x9e3779b97f4a7c15))
	rec := &recorder{key: cl.Key, open: map[term]Interval{}, hist: History{Keys: []string{cl.Key}, Rejected: map[string]int{}}}
	rec.probe(t, cl.DB, renew)

	var mu sync.Mutex
	var failures []error
	started := 0
	start := func(slot int) *node {
		started++
		n := &node{id: fmt.Sprintf("c%d.%d", slot, started), rec: rec, faults: faultstore.New(cl.DB.Store), done: make(chan struct{})}
		el, err := casleader.New(n.faults, casleader.Config{
			Key: cl.Key, ID: n.id,
			LeaseDuration: cl.Lease, RenewDeadline: renew, HeartbeatInterval: beat, PollInterval: poll,
			OnStartedLeading: func(ctx context.Context, token int64) {
				go rec.follow(ctx, n.id, token, n.el)
				cl.Lead(ctx, &Candidate{ID: n.id, Token: token, Elector: n.el, DB: cl.DB, node: n,
					record: func(check, done int64, err error) { rec.act(n.id, token, check, done, err) }})
			},
		})
		if err != nil {
			t.Fatalf("casleadertest: candidate: %v", err)
		}
		n.el = el
		ctx, cancel := context.WithCancel(context.Background())
		n.cancel = cancel
		go func() {
			defer close(n.done)
			if err := el.Run(ctx); err != nil && !n.isKilled() {
				mu.Lock()
				failures = append(failures, fmt.Errorf("candidate %s: Run: %w", n.id, err))
				mu.Unlock()
			}
		}()
		return n
	}
	nodes := make([]*node, cl.Candidates)
	for i := range nodes {
		nodes[i] = start(i)
	}
	defer func() {
		for _, n := range nodes {
			n.cancel()
			<-n.done
		}
	}()
	// waitLeader waits up to d, not counting stalls (see Stall), for a leader.
	waitLeader := func(d time.Duration) *node {
		var l *node
		waitFor(context.Background(), &rec.mu, &rec.hist.Stalls, d, func() bool {
			id := rec.leader()
			for _, n := range nodes {
				if id != "" && n.id == id {
					l = n
				}
			}
			return l != nil
		})
		return l
	}
	harness := bounds.Liveness() + 30*time.Second // a leader that does not come back at all
	if waitLeader(harness) == nil {
		t.Fatalf("casleadertest: no leader within %v of the start", harness)
	}
	errDown := fmt.Errorf("casleadertest: database unreachable: %w", store.ErrTransient)
	// A pause that found no statement to hold is tried again later in the run, at
	// most three times, so that a requested kind is applied (see untested).
	sched, retries := schedule(rng, cl.Kinds, max(cl.Trials, len(cl.Kinds))), 0
	for trial := 0; trial < len(sched); trial++ {
		kind := sched[trial]
		time.Sleep(time.Duration(3+rng.IntN(6)) * beat) // let the leader work
		waited := time.Now()
		leader := waitLeader(bounds.Liveness())
		if leader == nil {
			// No fault is active: the database is not answering in time. Wait as
			// long as after a heal, and report the stretch (History.Unled).
			t.Logf("casleadertest: trial %d: no leader within %v with no fault active; waiting", trial, bounds.Liveness())
			if leader = waitLeader(harness - bounds.Liveness()); leader != nil {
				rec.mu.Lock()
				rec.hist.Unled = append(rec.hist.Unled, time.Since(waited))
				rec.mu.Unlock()
			}
		}
		if leader == nil {
			t.Fatalf("casleadertest: trial %d: no leader to hit within %v", trial, harness)
		}
		f := Fault{Kinds: []string{kind}, Targets: []string{leader.id}, Leader: leader.id, Start: Mono()}
		d := cl.Lease + time.Duration((0.2+rng.Float64())*float64(cl.Lease))
		switch kind {
		case PauseLeader:
			// Long enough for another candidate to be elected and to act.
			d = 2*cl.Lease + time.Duration(rng.Float64()*float64(cl.Lease))
			var caught bool
			if f.Start, caught = pause(leader, rec, d, bounds.Liveness(), errDown); !caught {
				t.Logf("casleadertest: trial %d: %s on %s not applied: none of its actions sent a statement through DB.SQL within %v", trial, kind, leader.id, bounds.Liveness())
				if retries < 3 {
					retries++
					sched = append(sched, kind)
				}
				continue
			}
		case RefuseLeader:
			leader.faults.Fail(faultstore.AnyOp, errDown)
			time.Sleep(d)
			leader.faults.Fail(faultstore.AnyOp, nil)
		case RestartDatabase:
			f.Targets = nil // every candidate
			for _, n := range nodes {
				f.Targets = append(f.Targets, n.id)
			}
			d = cl.Down
			if d == 0 {
				d = cl.Lease/2 + time.Duration(rng.Float64()*float64(3*cl.Lease/2))
			}
			ctx, cancel := context.WithTimeout(context.Background(), d+2*startTimeout+stopTimeout)
			err := cl.DB.Restart(ctx, d)
			cancel()
			if err != nil {
				t.Fatalf("casleadertest: trial %d: %v", trial, err)
			}
		case KillLeader:
			d = 0
			leader.kill()
			rec.end(leader.id, 0, Mono())
			for i, n := range nodes {
				if n == leader {
					nodes[i] = start(i)
				}
			}
			<-leader.done
		}
		f.Heal = Mono()
		what := fmt.Sprintf("%s on %s for %v", kind, leader.id, d.Round(time.Millisecond))
		if kind == RestartDatabase {
			f.Note = fmt.Sprintf("down %v, answering again %v after the stop", d.Round(time.Millisecond), time.Duration(f.Heal-f.Start).Round(time.Millisecond))
			what = fmt.Sprintf("%s (leader %s), %s", kind, leader.id, f.Note)
		}
		rec.mu.Lock()
		rec.hist.Faults = append(rec.hist.Faults, f)
		rec.mu.Unlock()
		after := waitLeader(harness)
		t.Logf("casleadertest: trial %d: %s; leader %s %v after the heal", trial, what,
			nodeID(after), time.Duration(Mono()-f.Heal).Round(time.Millisecond))
		if after == nil {
			t.Fatalf("casleadertest: trial %d: no leader within %v of healing %s", trial, harness, kind)
		}
	}
	time.Sleep(cl.Lease) // a last stretch of history after the last heal
	rec.mu.Lock()
	rec.hist.End = Mono()
	rec.mu.Unlock()
	for _, n := range nodes {
		n.cancel()
		<-n.done
	}
	rec.lives.Wait()
	mu.Lock()
	defer mu.Unlock()
	if err := errors.Join(failures...); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rep := Check(rec.hist, bounds)
	rep.Violations = append(rep.Violations, untested(rec.hist, cl.Kinds)...)
	return rep
}

// schedule returns the fault kinds of n trials: every kind once, in a shuffled
// order, before any kind comes again.
func schedule(rng *rand.Rand, kinds []string, n int) []string {
	var out []string
	for len(out) < n {
		round := slices.Clone(kinds)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		out = append(out, round...)
	}
	return out[:n]
}

// pause holds the next statement of n's actions that would change the database,
// fails n's election store meanwhile (a frozen process renews nothing), and lets
// the statement go on once d has passed and another candidate has completed an
// action since (waiting at most wait for that). It returns when the statement was
// caught, or false if no statement came within wait.
func pause(n *node, rec *recorder, d, wait time.Duration, errDown error) (int64, bool) {
	t := n.arm()
	defer t.release()
	bg := context.Background()
	if !waitFor(bg, &rec.mu, &rec.hist.Stalls, wait, func() bool { return closed(t.caught) }) {
		if n.disarm(t) {
			return 0, false
		}
		<-t.caught // caught as the wait ended
	}
	start := Mono()
	n.faults.Fail(faultstore.AnyOp, errDown)
	defer n.faults.Fail(faultstore.AnyOp, nil)
	time.Sleep(d)
	waitFor(bg, &rec.mu, &rec.hist.Stalls, wait, func() bool { return rec.actedSince(n.id, start) })
	return start, true
}

// actedSince reports whether a candidate other than id began an action after at.
func (r *recorder) actedSince(id string, at int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.hist.Actions {
		if a.Cand != id && a.Check > at {
			return true
		}
	}
	return false
}

// untested returns the verdicts on a run that proved less than it was asked to:
// one without any action recorded, one in which a requested fault kind was never
// applied.
func untested(h History, kinds []string) []Violation {
	var vs []Violation
	if len(h.Actions) == 0 {
		detail := "no action was recorded: the Lead function must perform its writes through Act, or the run proves nothing"
		refused := 0
		for _, n := range h.Rejected {
			refused += n
		}
		if refused > 0 {
			detail += fmt.Sprintf(" (%d actions were refused or failed)", refused)
		}
		vs = append(vs, Violation{Property: "untested", Detail: detail})
	}
	applied := map[string]bool{}
	for _, f := range h.Faults {
		for _, k := range f.Kinds {
			applied[k] = true
		}
	}
	for _, k := range kinds {
		if applied[k] {
			continue
		}
		applied[k] = true // one verdict per kind
		detail := fmt.Sprintf("the %s fault was requested and never applied", k)
		if k == PauseLeader {
			detail += ": no action of a paused leader sent a statement that changes the database through DB.SQL with the ctx Act gives it, so no statement could be held"
		}
		vs = append(vs, Violation{Property: "untested", Detail: detail})
	}
	return vs
}

func nodeID(n *node) string {
	if n == nil {
		return "none"
	}
	return n.id
}

func (n *node) isKilled() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.killed
}

// kill ends the node without a release: its store fails from now on, its actions
// are refused, its elector is stopped.
func (n *node) kill() {
	n.faults.Fail(faultstore.AnyOp, errors.New("casleadertest: the candidate was killed"))
	n.mu.Lock()
	n.killed = true
	n.mu.Unlock()
	n.cancel()
}
