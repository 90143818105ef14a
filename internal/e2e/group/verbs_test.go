package group_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
)

// verbTimings are patient timings for the handover tests on a loaded machine: a
// key changes hands only when the test hands it over (a renewal would have to
// fail for four seconds to lose one); a handed key is claimed at the next read
// (PollInterval) at the latest.
func verbTimings(c *casleader.GroupConfig) {
	c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval = 6*time.Second, 4*time.Second, 200*time.Millisecond, 500*time.Millisecond
}

// stamp is a start (leading) or end of a term of one key, as OnChange reports
// it, with the time it was reported.
type stamp struct {
	leading bool
	token   int64
	at      time.Time
}

// stamps records the OnChange calls of one group for one key.
type stamps struct {
	mu  sync.Mutex
	all []stamp
}

func (s *stamps) onChange(key string) func(string, bool, int64) {
	return func(k string, leading bool, token int64) {
		if k == key {
			s.mu.Lock()
			s.all = append(s.all, stamp{leading, token, time.Now()})
			s.mu.Unlock()
		}
	}
}

// first returns the first stamp with leading, and whether there is one.
func (s *stamps) first(leading bool) (stamp, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.all {
		if st.leading == leading {
			return st, true
		}
	}
	return stamp{}, false
}

// listener collects the statuses of a Listen channel until it is closed.
type listener struct {
	mu     sync.Mutex
	got    []casleader.Status
	closed chan struct{}
}

func listen(ch <-chan casleader.Status) *listener {
	l := &listener{closed: make(chan struct{})}
	go func() {
		defer close(l.closed)
		for s := range ch {
			l.mu.Lock()
			l.got = append(l.got, s)
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *listener) statuses() []casleader.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]casleader.Status(nil), l.got...)
}

func (l *listener) last() casleader.Status {
	ss := l.statuses()
	if len(ss) == 0 {
		return casleader.Status{}
	}
	return ss[len(ss)-1]
}

// sampler watches IsLeader of one key on two groups until stopped (and the new
// one was seen leading), and records
// when each was last and first seen leading, and any sample with both leading.
type sampler struct {
	stop           chan struct{}
	done           chan struct{}
	lastOld, newAt time.Time
	both           int
}

func sample(old, nu *casleader.Group, key string) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				if !s.newAt.IsZero() { // stopped once the new leader leads
					return
				}
			default:
			}
			o := old.IsLeader(key)
			n := nu.IsLeader(key)
			now := time.Now()
			if o && n {
				s.both++
			}
			if o {
				s.lastOld = now
			}
			if n && s.newAt.IsZero() {
				s.newAt = now
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	return s
}

func (s *sampler) end() {
	close(s.stop)
	<-s.done
}

// TestHandoverToPassesOneKeyAndLeavesTheOthers: two groups over the same keys;
// the leader hands one key to the other group, which then leads it in a greater
// term. The old group stops acting on the key before the new one starts (by
// OnChange's stamps and by sampling IsLeader), the other keys stay where they
// were in the same terms, and both groups' streams of the key report the change.
func TestHandoverToPassesOneKeyAndLeavesTheOthers(t *testing.T) {
	t.Parallel()
	for _, d := range membersDatabases() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			cs, _, _ := openMembers(t, d.open)
			st := cs.membersStore
			ks := keys(4)
			key := ks[0]
			var sa, sb stamps
			a := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) { verbTimings(c); c.OnChange = sa.onChange(key) })
			t.Cleanup(running(t, a))
			require.Eventually(t, func() bool { return count(a, ks) == len(ks) }, 30*time.Second, 10*time.Millisecond, "a leads every key")
			b := newGroup(t, st, "b", ks, func(c *casleader.GroupConfig) { verbTimings(c); c.OnChange = sb.onChange(key) })
			lctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			cha := a.Listen(lctx, key)
			aFirst := <-cha // later ones may replace each other
			la, lb := listen(cha), listen(b.Listen(lctx, key))
			t.Cleanup(running(t, b))
			require.Eventually(t, func() bool { return b.Leader(key) == "a" }, 30*time.Second, 10*time.Millisecond, "b follows a's lease")
			before := map[string]int64{}
			for _, k := range ks {
				before[k] = a.Token(k)
				require.NotZero(t, before[k], "a leads %s", k)
			}

			watch := sample(a, b, key)
			require.NoError(t, a.HandoverTo(t.Context(), key, "b"))
			assert.False(t, a.IsLeader(key), "a stopped acting before HandoverTo returned")
			require.Eventually(t, func() bool { return b.IsLeader(key) }, 30*time.Second, 10*time.Millisecond, "b leads the key it was handed")
			watch.end()
			assert.Greater(t, b.Token(key), before[key], "b's term on the key is newer")
			assert.Zero(t, watch.both, "samples with both groups leading the key")
			assert.True(t, watch.lastOld.Before(watch.newAt), "a last seen leading at %v, b first at %v", watch.lastOld, watch.newAt)
			aEnd, ok := sa.first(false)
			require.True(t, ok, "a's OnChange reported the end of its term")
			bStart, ok := sb.first(true)
			require.True(t, ok, "b's OnChange reported its term")
			assert.Equal(t, before[key], aEnd.token)
			assert.Equal(t, b.Token(key), bStart.token)
			assert.True(t, aEnd.at.Before(bStart.at), "a stopped at %v, b started at %v", aEnd.at, bStart.at)
			for _, k := range ks[1:] {
				assert.Equal(t, before[k], a.Token(k), "key %s stays with a in the same term", k)
				assert.False(t, b.IsLeader(k), "key %s", k)
			}

			// Only a key's leader hands it over.
			assert.ErrorIs(t, a.HandoverTo(t.Context(), key, "b"), casleader.ErrNotLeader)
			assert.ErrorIs(t, b.HandoverTo(t.Context(), ks[1], "b"), casleader.ErrNotLeader)
			assert.ErrorIs(t, a.HandoverTo(t.Context(), "not-a-key", "b"), casleader.ErrInvalidKey)
			assert.ErrorIs(t, a.HandoverTo(t.Context(), ks[1], ""), casleader.ErrInvalidConfig)
			assert.NoError(t, a.HandoverTo(t.Context(), ks[1], "a"), "to itself: it leads already")
			assert.Equal(t, before[ks[1]], a.Token(ks[1]))

			// The streams: a led the key, then stopped with b named; b leads it.
			require.Eventually(t, func() bool {
				s := lb.last()
				return s.Leading && s.Leader == "b"
			}, 30*time.Second, 10*time.Millisecond, "b's stream reports its term; got %+v", lb.statuses())
			require.Eventually(t, func() bool { return la.last().Leader == "b" }, 30*time.Second, 10*time.Millisecond,
				"a's stream names b; got %+v", la.statuses())
			cancel()
			for _, l := range []*listener{la, lb} {
				select {
				case <-l.closed:
				case <-time.After(30 * time.Second):
					t.Fatal("a Listen channel is still open after its context ended")
				}
			}
			as, bs := append([]casleader.Status{aFirst}, la.statuses()...), lb.statuses()
			assert.Equal(t, casleader.Status{Seq: aFirst.Seq, Leading: true, Token: before[key], Leader: "a", Time: aFirst.Time}, aFirst, "a's first status")
			assert.Equal(t, casleader.Status{Seq: as[len(as)-1].Seq, Leader: "b", Time: as[len(as)-1].Time}, as[len(as)-1], "a's last status")
			assert.Equal(t, casleader.Status{Seq: bs[len(bs)-1].Seq, Leading: true, Token: b.Token(key), Leader: "b", Time: bs[len(bs)-1].Time}, bs[len(bs)-1], "b's last status")
			assert.False(t, bs[0].Leading, "b's first status")
			for _, ss := range [][]casleader.Status{as, bs} {
				for i := 1; i < len(ss); i++ {
					assert.Greater(t, ss[i].Seq, ss[i-1].Seq, "statuses in order: %+v", ss)
					assert.False(t, ss[i].Time.Before(ss[i-1].Time), "times in order: %+v", ss)
				}
			}
		})
	}
}

// TestListenEndsWhenTheKeyLeavesTheGroup: a key's stream is closed when the key
// is removed, after it reported the end of the group's term; a key that is not in
// the group has a closed stream.
func TestListenEndsWhenTheKeyLeavesTheGroup(t *testing.T) {
	t.Parallel()
	for _, d := range membersDatabases() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			cs, _, _ := openMembers(t, d.open)
			ks := keys(2)
			a := newGroup(t, cs.membersStore, "a", ks, verbTimings)
			t.Cleanup(running(t, a))
			require.Eventually(t, func() bool { return count(a, ks) == len(ks) }, 30*time.Second, 10*time.Millisecond, "a leads every key")
			ch := a.Listen(t.Context(), ks[1])
			first := <-ch
			l := listen(ch)
			a.Remove(ks[1])
			select {
			case <-l.closed:
			case <-time.After(30 * time.Second):
				t.Fatal("the stream of a removed key is still open")
			}
			ss := l.statuses()
			require.NotEmpty(t, ss, "the end of the term was reported")
			assert.True(t, first.Leading, "first status: leading")
			assert.False(t, ss[len(ss)-1].Leading, "last status: the term ended")
			assert.True(t, a.IsLeader(ks[0]), "the other key is still led")

			_, open := <-a.Listen(t.Context(), "not-a-key")
			assert.False(t, open, "a key not in the group has a closed stream")
		})
	}
}

// TestGroupWithoutIDGetsTheDefault: a group given no ID runs as
// casleader.DefaultID() names it, unique to the group.
func TestGroupWithoutIDGetsTheDefault(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	require.NoError(t, err)
	for _, d := range membersDatabases() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			cs, _, _ := openMembers(t, d.open)
			ks := keys(2)
			a := newGroup(t, cs.membersStore, "", ks, verbTimings)
			b := newGroup(t, cs.membersStore, "", ks, verbTimings)
			assert.True(t, strings.HasPrefix(a.ID(), host+"-"), "ID %q: hostname-pid-random", a.ID())
			assert.NotEqual(t, a.ID(), b.ID(), "each group has an ID of its own")
			t.Cleanup(running(t, a))
			require.Eventually(t, func() bool { return count(a, ks) == len(ks) }, 30*time.Second, 10*time.Millisecond, "the group leads every key")
			t.Cleanup(running(t, b))
			require.Eventually(t, func() bool { return b.Leader(ks[0]) == a.ID() }, 30*time.Second, 10*time.Millisecond,
				"the other group reads the default ID in the row")
		})
	}
}

// TestHandoverToWaitsForTheWorkToReturn: the key's work is cancelled and waited
// for before the handover is written; work that does not return within
// DrainTimeout leaves the lease to expire, and HandoverTo says so.
func TestHandoverToWaitsForTheWorkToReturn(t *testing.T) {
	for _, stuck := range []bool{false, true} {
		name := map[bool]string{false: "WorkReturns", true: "WorkStuck"}[stuck]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := memstore.New()
				ks := keys(2)
				release := make(chan struct{})
				rowAtCancel := make(chan string, 1) // the row's leader when the work was cancelled
				a := newGroup(t, st, "a", ks, func(c *casleader.GroupConfig) {
					c.OnStartedLeading = func(ctx context.Context, key string, token int64) {
						<-ctx.Done()
						if key == ks[0] {
							rec, _, err := st.Observe(context.Background(), key)
							if err == nil {
								rowAtCancel <- rec.LeaderID
							}
							if stuck {
								<-release
							}
						}
					}
				})
				stopA := running(t, a)
				time.Sleep(time.Millisecond)
				require.Equal(t, len(ks), count(a, ks))
				b := newGroup(t, st, "b", ks, nil)
				stopB := running(t, b)
				synctest.Wait() // b follows a's leases
				err := a.HandoverTo(t.Context(), ks[0], "b")
				assert.Equal(t, "a", <-rowAtCancel, "the work was cancelled before the handover was written")
				if stuck {
					require.ErrorIs(t, err, casleader.ErrNotDrained)
					close(release)
				} else {
					require.NoError(t, err)
					time.Sleep(2 * poll)
					assert.True(t, b.IsLeader(ks[0]), "b leads the key handed over")
				}
				assert.True(t, a.IsLeader(ks[1]), "the other key is still led")
				stopB()
				stopA()
				assert.ErrorIs(t, a.HandoverTo(t.Context(), ks[1], "b"), casleader.ErrNotLeader, "no Run")
			})
		})
	}
}
