// Package protocoltest is the protocol suite of an Elector: one leader among
// racing candidates, takeover only after the lease or a release, fencing tokens
// that strictly increase, observers, pauses, independent keys. It runs on any
// store: the root package's tests run it on the in-memory store, internal/e2e on
// each database, so the suite is written once and the root package's tests
// import no database driver.
package protocoltest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/store"
)

// Short timings keep the suite fast: L = 400 ms, R = 250 ms, H = 60 ms, P = 100 ms.
const (
	Lease     = 400 * time.Millisecond
	RenewDL   = 250 * time.Millisecond
	Heartbeat = 60 * time.Millisecond
	Poll      = 100 * time.Millisecond
	// Settle bounds how long a liveness property may take: generous, never a speed claim.
	Settle = 10 * time.Second
)

const (
	lease, renewDL, heartbeat, poll, settle = Lease, RenewDL, Heartbeat, Poll, Settle
)

// Store is a store that can create its table: every store.Driver.
type Store = store.Driver

// Dialect opens stores on one database. Every store Open returns for one table
// shares that table's rows. tzOffsetHours, when not zero, opens the store on a
// session whose time zone is offset from UTC (a candidate configured with another
// clock setting); a store without sessions ignores it.
type Dialect struct {
	Name string
	Open func(t *testing.T, table string, tzOffsetHours int) Store
}

// recorder wraps a store and records, per candidate, what the protocol suite checks.
type recorder struct {
	store.Driver
	mu          sync.Mutex
	lastRenewAt time.Time // send time of the last successful renewal
	electedAt   time.Time // reply time of a won election or insert
	releasedAt  time.Time // reply time of a successful release
	releasedTo  int64     // the row's version after a successful release
	electFrom   []int64   // versions of won elections
	electTerms  []int64   // terms of won elections
	// beforeRenew, when set, runs before each renewal is sent.
	beforeRenew func(ctx context.Context)
}

func (r *recorder) Renew(ctx context.Context, key, id string, v int64) (bool, error) {
	if r.beforeRenew != nil {
		r.beforeRenew(ctx)
	}
	sent := time.Now()
	ok, err := r.Driver.Renew(ctx, key, id, v)
	if ok && err == nil {
		r.mu.Lock()
		r.lastRenewAt = sent
		r.mu.Unlock()
	}
	return ok, err
}

func (r *recorder) Elect(ctx context.Context, key string, cand store.Candidate, v int64) (int64, bool, error) {
	term, ok, err := r.Driver.Elect(ctx, key, cand, v)
	if ok && err == nil {
		r.mu.Lock()
		r.electedAt = time.Now()
		r.electFrom = append(r.electFrom, v)
		r.electTerms = append(r.electTerms, term)
		r.mu.Unlock()
	}
	return term, ok, err
}

// ElectReleased records a won election of a released row with version 0: the
// version it was won from is not named (a wake-up without one, MySQL's named locks).
func (r *recorder) ElectReleased(ctx context.Context, key string, cand store.Candidate) (int64, bool, error) {
	term, ok, err := r.Driver.ElectReleased(ctx, key, cand)
	if ok && err == nil {
		r.mu.Lock()
		r.electedAt = time.Now()
		r.electFrom = append(r.electFrom, 0)
		r.electTerms = append(r.electTerms, term)
		r.mu.Unlock()
	}
	return term, ok, err
}

func (r *recorder) Release(ctx context.Context, key, id string, v int64) (bool, error) {
	ok, err := r.Driver.Release(ctx, key, id, v)
	if ok && err == nil {
		r.mu.Lock()
		r.releasedAt = time.Now()
		r.releasedTo = v + 1
		r.mu.Unlock()
	}
	return ok, err
}

// PutMembers writes no members rows: no candidate of the suite knows another as
// a successor, so that a resign or a stop releases the row (the path the suite
// checks) rather than hands it over, whatever the timing of the members reads.
func (r *recorder) PutMembers(context.Context, []store.Member) error { return nil }

// candidate is one running elector.
type candidate struct {
	*casleader.Elector
	rec    *recorder
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // what Run returned
	tokens chan int64
}

// stop ends Run and waits for it.
func (c *candidate) stop(t *testing.T) {
	t.Helper()
	c.cancel()
	select {
	case <-c.done:
		require.NoError(t, c.err)
	case <-time.After(settle):
		t.Fatal("Run did not return after its context ended")
	}
}

type env struct {
	t     *testing.T
	d     Dialect
	table string
}

func newEnv(t *testing.T, d Dialect) *env {
	table := testdb.Name(t)
	s := d.Open(t, table, 0)
	require.NoError(t, s.CreateTable(context.Background()))
	return &env{t: t, d: d, table: table}
}

func (e *env) start(key, id string, mod func(*casleader.Config)) *candidate {
	return e.startTZ(key, id, 0, mod)
}

func (e *env) startTZ(key, id string, tz int, mod func(*casleader.Config)) *candidate {
	return e.startRec(key, id, &recorder{Driver: e.d.Open(e.t, e.table, tz)}, mod)
}

// startRec starts a candidate on the store of rec.
func (e *env) startRec(key, id string, rec *recorder, mod func(*casleader.Config)) *candidate {
	t := e.t
	c := &candidate{rec: rec, done: make(chan struct{}), tokens: make(chan int64, 100)}
	cfg := casleader.Config{
		Key: key, ID: id,
		LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll,
		Logger: testLogger(t),
		OnStartedLeading: func(ctx context.Context, token int64) {
			c.tokens <- token
			<-ctx.Done()
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	el, err := casleader.New(rec, cfg)
	require.NoError(t, err)
	c.Elector = el
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		c.err = el.Run(ctx)
		close(c.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-c.done
	})
	return c
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("CASLEADER_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}

// patient gives a candidate timings that survive a loaded CI machine, for tests
// that assert that a leader keeps its lease, or that its resign writes the release:
// L = 2 s, R = 1.2 s, H = 100 ms. A release has at most the lease to be written
// (then the lease ends by itself), and the suite's 400 ms were less than a SQLite
// release took under the race detector with two CPU hogs on 2 cores.
func patient(c *casleader.Config) {
	c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval = 2*time.Second, 1200*time.Millisecond, 100*time.Millisecond, 200*time.Millisecond
}

func leaders(cs []*candidate) []*candidate {
	var out []*candidate
	for _, c := range cs {
		if c.IsLeader() {
			out = append(out, c)
		}
	}
	return out
}

// waitLeader waits until exactly one of cs leads and returns it.
func waitLeader(t *testing.T, cs ...*candidate) *candidate {
	t.Helper()
	var l *candidate
	require.Eventually(t, func() bool {
		ls := leaders(cs)
		if len(ls) == 1 {
			l = ls[0]
		}
		return len(ls) == 1
	}, settle, 5*time.Millisecond, "no single leader emerged")
	return l
}

// maxMoveCredit caps how much later than its start waitSameLeader counts its
// wait from, however often the lease moves: a candidate that never observes the
// leader still fails the test.
const maxMoveCredit = 2 * time.Minute

// waitSameLeader requires that one of cs comes to lead and every one of cs to
// observe it, within settle. Nothing ends a term here but a renewal that missed
// its deadline (a machine or database that did not answer in time), after which
// the followers must read the new row again: the wait counts from the last time
// the lease moved (a new token, or no leader), at most maxMoveCredit later than
// from its start.
func waitSameLeader(t *testing.T, cs []*candidate) {
	t.Helper()
	start := time.Now()
	from, token, seen := start, int64(0), ""
	for {
		ls := leaders(cs)
		now := time.Now()
		switch {
		case len(ls) != 1:
			from = now
		case ls[0].Token() != token:
			from, token = now, ls[0].Token()
		}
		if len(ls) == 1 {
			seen = ls[0].ID()
			if observedBy(cs, seen) {
				return
			}
		}
		if latest := start.Add(maxMoveCredit); from.After(latest) {
			from = latest
		}
		if now.Sub(from) > settle {
			var views []string
			for _, c := range cs {
				views = append(views, c.Leader())
			}
			require.Failf(t, "every candidate observes the same leader",
				"%d leaders now (last single one %q, token %d); each candidate's view: %v", len(ls), seen, token, views)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// observedBy reports whether every one of cs observes id as the leader.
func observedBy(cs []*candidate, id string) bool {
	for _, c := range cs {
		if c.Leader() != id {
			return false
		}
	}
	return true
}

// watchSingleLeader samples cs until ctx ends and fails if two lead at once.
func watchSingleLeader(t *testing.T, cs []*candidate) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if ls := leaders(cs); len(ls) > 1 {
				t.Errorf("%d candidates believe they lead at once", len(ls))
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() { cancel(); wg.Wait() }
}

func Run(t *testing.T, ds []Dialect) {
	for _, d := range ds {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			t.Run("OneCandidateWins", func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, d)
				c := e.start("k", "solo", nil)
				waitLeader(t, c)
				tok := <-c.tokens
				rec, found, err := c.rec.Driver.Observe(context.Background(), "k")
				require.NoError(t, err)
				require.True(t, found)
				assert.Positive(t, tok)
				assert.Equal(t, rec.Term, tok, "the first leader leads in the row's first term")
				assert.Equal(t, tok, c.Token())
				assert.Equal(t, "solo", c.Leader())
			})

			t.Run("TwentyRacingCandidatesYieldExactlyOneLeader", func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, d)
				var cs []*candidate
				for i := range 20 {
					// Patient timings: twenty candidates on two cores must not turn a
					// stalled renewal into a change of leader while they settle.
					cs = append(cs, e.start("herd", fmt.Sprintf("c%02d", i), patient))
				}
				stop := watchSingleLeader(t, cs)
				waitLeader(t, cs...)
				time.Sleep(3 * lease) // renewals keep exactly one leader
				stop()
				waitSameLeader(t, cs)
			})

			t.Run("KilledLeaderIsReplacedAfterItsLeaseAndNeverBefore", func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, d)
				a := e.start("k", "a", func(c *casleader.Config) { c.KeepLeaseOnExit = true })
				waitLeader(t, a)
				b := e.start("k", "b", nil)
				// a has renewed (the lease b must wait out is a renewal's, not the
				// election's) and b follows it, however late a loaded machine runs them.
				renewed := func() time.Time {
					a.rec.mu.Lock()
					defer a.rec.mu.Unlock()
					return a.rec.lastRenewAt
				}
				require.Eventually(t, func() bool { return !renewed().IsZero() && b.Leader() == "a" }, settle, time.Millisecond,
					"a renews and b follows it")
				a.stop(t) // stops renewing without resigning, like a killed process
				assert.False(t, a.IsLeader())
				waitLeader(t, b)
				lastRenew := renewed()
				b.rec.mu.Lock()
				won := b.rec.electedAt
				b.rec.mu.Unlock()
				// The database executed a's last renewal after lastRenew and b's election
				// at least a lease later, before b saw the reply.
				assert.GreaterOrEqual(t, won.Sub(lastRenew), lease, "b took over before a's lease expired")
			})

			t.Run("ResumedTermIsLedOnlyOnceARenewalWon", func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, d)
				resumed := func(token int64) func(*casleader.Config) {
					return func(c *casleader.Config) {
						patient(c) // each restart reads the lease before it expires
						c.KeepLeaseOnExit, c.ResumeTerm = true, token
					}
				}
				a := e.start("k", "a", resumed(0))
				waitLeader(t, a)
				token := <-a.tokens
				a.stop(t)
				// Restarted with the term: it goes on leading it.
				a2 := e.start("k", "a", resumed(token))
				waitLeader(t, a2)
				require.Equal(t, token, <-a2.tokens, "the resumed term is led again")
				a2.stop(t)
				rec, found, err := a2.rec.Driver.Observe(context.Background(), "k")
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, token, rec.Term)
				// Restarted again, while the release that the run before sent is
				// still on its way: it executes between the read and the renewal.
				late := &recorder{Driver: e.d.Open(t, e.table, 0)}
				var once sync.Once
				late.beforeRenew = func(ctx context.Context) {
					once.Do(func() {
						ok, err := late.Driver.Release(ctx, "k", "a", rec.Version)
						assert.NoError(t, err)
						assert.True(t, ok, "the late release executes")
					})
				}
				a3 := e.startRec("k", "a", late, resumed(token))
				waitLeader(t, a3)
				assert.Greater(t, <-a3.tokens, token, "the released term was never led again: a new term was won")
			})

			t.Run("ResignGivesTakeoverWithoutWaitingForTheLease", func(t *testing.T) {
				t.Parallel()
				// A machine that stalls past the renew deadline just before the resign
				// ends a's term by itself, and the resign then has nothing to release;
				// so the scenario is tried again, with a fresh key, up to three times.
				// Longer timings (patient) make that rare; a release that never
				// happens fails all three.
				e := newEnv(t, d)
				for attempt := 1; ; attempt++ {
					key := fmt.Sprintf("k%d", attempt)
					a := e.start(key, "a", patient)
					waitLeader(t, a)
					b := e.start(key, "b", patient)
					require.Eventually(t, func() bool { return b.Leader() == "a" }, settle, 5*time.Millisecond)
					require.NoError(t, a.Resign(context.Background()))
					assert.False(t, a.IsLeader())
					waitLeader(t, a, b)
					a.rec.mu.Lock()
					released, releasedTo := a.rec.releasedAt, a.rec.releasedTo
					a.rec.mu.Unlock()
					if released.IsZero() && attempt < 3 {
						t.Logf("attempt %d: a's term ended before its resign (no release written); trying again", attempt)
						a.stop(t)
						b.stop(t)
						continue
					}
					require.False(t, released.IsZero(), "resign released the row")
					assert.True(t, b.IsLeader())
					b.rec.mu.Lock()
					from, terms := b.rec.electFrom, b.rec.electTerms
					b.rec.mu.Unlock()
					require.Len(t, from, 1)
					// b won from the released version, or (woken by a MySQL named lock,
					// which carries none) by an election that wins only a released row:
					// the release, not the lease's expiry, let it in.
					if from[0] != 0 {
						assert.Equal(t, releasedTo, from[0], "b elected from the version the release wrote")
					}
					rec, found, err := b.rec.Driver.Observe(context.Background(), key)
					require.NoError(t, err)
					require.True(t, found)
					assert.Equal(t, terms[0], rec.Term)
					assert.Greater(t, rec.Term, releasedTo)
					return
				}
			})

			t.Run("CandidateWithAnotherClockSettingChangesNothing", func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, d)
				// b's database session runs an hour ahead of a's (MySQL time_zone,
				// PostgreSQL TimeZone). Ages are computed by the database, so b
				// neither takes a's live lease nor waits an hour for an expired one.
				a := e.start("k", "a", func(c *casleader.Config) { patient(c); c.KeepLeaseOnExit = true })
				waitLeader(t, a)
				b := e.startTZ("k", "b", 1, patient)
				stop := watchSingleLeader(t, []*candidate{a, b})
				time.Sleep(3 * lease)
				assert.True(t, a.IsLeader(), "b took a's live lease")
				assert.False(t, b.IsLeader())
				a.stop(t)
				waitLeader(t, b)
				stop()
				c := e.startTZ("k", "c", -1, patient)
				time.Sleep(3 * lease)
				assert.True(t, b.IsLeader(), "c took b's live lease")
				assert.False(t, c.IsLeader())
			})

			t.Run("PausedCandidateNeverTakesOverUntilResumed", func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, d)
				a := e.start("k", "a", patient) // its resign must write the release
				waitLeader(t, a)
				b := e.start("k", "b", nil)
				b.Pause()
				require.NoError(t, a.ResignFor(context.Background(), time.Hour))
				time.Sleep(3 * lease)
				assert.False(t, a.IsLeader())
				assert.False(t, b.IsLeader(), "a paused candidate took over")
				b.Resume()
				waitLeader(t, a, b)
				assert.True(t, b.IsLeader())
				// Pausing the leader resigns it.
				c := e.start("k", "c", nil)
				b.Pause()
				require.Eventually(t, c.IsLeader, settle, 5*time.Millisecond, "the paused leader did not hand over")
				assert.False(t, b.IsLeader())
			})

			t.Run("ObserverReportsTheLeaderButNeverCampaigns", func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, d)
				o := e.start("k", "o", func(c *casleader.Config) { c.Observer = true })
				time.Sleep(3 * poll)
				assert.False(t, o.IsLeader())
				a := e.start("k", "a", patient) // its resign must write the release
				waitLeader(t, a)
				require.Eventually(t, func() bool { return o.Leader() == "a" }, settle, 5*time.Millisecond)
				require.NoError(t, a.ResignFor(context.Background(), time.Hour))
				time.Sleep(3 * lease)
				assert.False(t, o.IsLeader(), "an observer took the released lease")
			})

			t.Run("TwoKeysElectIndependently", func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, d)
				a1 := e.start("one", "a", patient)
				waitLeader(t, a1)
				b2 := e.start("two", "b", patient)
				waitLeader(t, b2)
				a2 := e.start("two", "a", patient)
				b1 := e.start("one", "b", patient)
				time.Sleep(2 * lease)
				assert.True(t, a1.IsLeader())
				assert.True(t, b2.IsLeader())
				require.NoError(t, a1.Resign(context.Background()))
				waitLeader(t, b1)
				assert.True(t, b2.IsLeader(), "a resign on one key moved the other")
				assert.False(t, a2.IsLeader())
			})

			t.Run("FencingTokenStrictlyIncreasesAcrossTerms", func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, d)
				var tokens []int64
				var cs []*candidate
				for i := range 4 {
					c := e.start("k", fmt.Sprintf("c%d", i), func(c *casleader.Config) { c.KeepLeaseOnExit = i%2 == 1 })
					cs = append(cs, c)
				}
				alive := cs
				// A candidate's last term, taken after it has led: on a loaded machine
				// one may lead, lose and lead again, and its first term is then not
				// the latest one.
				latest := func(c *candidate) int64 {
					if tok := c.Token(); tok != 0 {
						return tok // the term it leads now
					}
					tok := <-c.tokens
					for {
						select {
						case tok = <-c.tokens:
						default:
							return tok
						}
					}
				}
				for len(alive) > 1 {
					l := waitLeader(t, alive...)
					tokens = append(tokens, latest(l))
					l.stop(t) // half resign, half vanish keeping the lease
					var rest []*candidate
					for _, c := range alive {
						if c != l {
							rest = append(rest, c)
						}
					}
					alive = rest
				}
				l := waitLeader(t, alive...)
				tokens = append(tokens, latest(l))
				require.Len(t, tokens, 4)
				for i := 1; i < len(tokens); i++ {
					assert.Greater(t, tokens[i], tokens[i-1], "tokens %v", tokens)
				}
			})

			t.Run("LostLeadershipIsNotFatal", func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, d)
				// Both resign and must write the release.
				a := e.start("k", "a", patient)
				waitLeader(t, a)
				b := e.start("k", "b", patient)
				require.NoError(t, a.ResignFor(context.Background(), 0))
				// a campaigns again and wins back after b resigns.
				waitLeader(t, a, b)
				l := leaders([]*candidate{a, b})[0]
				require.NoError(t, l.ResignFor(context.Background(), time.Hour))
				other := a
				if l == a {
					other = b
				}
				waitLeader(t, other)
			})
		})
	}
}

// SyncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines returns what was written, one element per line.
func (s *SyncBuffer) Lines() []string {
	return strings.Split(strings.TrimSpace(s.String()), "\n")
}
