package members_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casleader/casleader/internal/members"
	"github.com/casleader/casleader/store"
)

// readable is a members table that other candidates write: hi writes its row of
// every key every period (a lease) from the start (its Age grows between writes).
type readable struct {
	fake
	start time.Time
	lease time.Duration
	reads [][]string // keys of each MembersOf call
}

func (r *readable) MembersOf(ctx context.Context, keys []string, within time.Duration) ([]store.Member, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads = append(r.reads, keys)
	age := time.Since(r.start) % members.Period(r.lease)
	var out []store.Member
	for _, k := range keys {
		out = append(out, store.Member{Key: k, ID: "hi", Role: members.RoleFollower, Priority: 5, Age: age})
	}
	return out, nil
}

var _ members.Store = (*readable)(nil)

type handover struct {
	key, to string
	term    int64
	at      time.Duration
}

// TestLeaderHandsOverOnceTheTargetWasLiveForALease: Run reads the members of the
// keys led (one batched read per period, only those keys) and hands each over a
// lease after the target was first seen, then a lease later again if the term has
// not ended; a key no longer led is not handed over.
func TestLeaderHandsOverOnceTheTargetWasLiveForALease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 10 * time.Second
		start := time.Now()
		r := &readable{start: start, lease: lease}
		var mu sync.Mutex
		led := map[string]int64{"a": 7, "b": 9}
		var got []handover
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			members.Run(ctx, members.Config{
				Store: r, ID: "me", Lease: lease, Priority: 1,
				Snapshot: snapshot, Logger: slog.New(slog.DiscardHandler),
				Leading: func() map[string]int64 {
					mu.Lock()
					defer mu.Unlock()
					out := map[string]int64{}
					for k, v := range led {
						out[k] = v
					}
					return out
				},
				Handover: func(key string, term int64, to string) {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, handover{key, to, term, time.Since(start)})
					delete(led, "a") // a's term ends; b's goes on (its handover did not happen)
				},
			})
		}()
		time.Sleep(lease + lease/4)
		mu.Lock()
		assert.Equal(t, []handover{{"a", "hi", 7, lease}, {"b", "hi", 9, lease}}, got, "both keys a lease after the first read")
		mu.Unlock()
		time.Sleep(lease)
		mu.Lock()
		assert.Equal(t, []handover{{"a", "hi", 7, lease}, {"b", "hi", 9, lease}, {"b", "hi", 9, 2 * lease}}, got,
			"b again a lease later; a, no longer led, not again")
		mu.Unlock()
		cancel()
		<-done
		r.mu.Lock()
		defer r.mu.Unlock()
		assert.Equal(t, []string{"a", "b"}, r.reads[0], "one read of the keys led")
		assert.Equal(t, []string{"b"}, r.reads[len(r.reads)-1], "only the keys still led")
	})
}
