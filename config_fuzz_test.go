package casleader_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/store"
)

// FuzzConfig: New never panics; it refuses with ErrInvalidConfig, naming a field,
// every configuration that cannot be safe; and what it accepts the store accepts too
// (a key or ID that passes New but that every store call refuses would make Run retry
// forever instead of failing at once).
func FuzzConfig(f *testing.F) {
	ms := int64(time.Millisecond)
	f.Add("k", "a", int64(0), int64(0), int64(0), int64(0), int64(0), false)
	f.Add("billing-cron", "host-1", 15000*ms, 10000*ms, 2000*ms, 5000*ms, 0*ms, false)
	f.Add("k", "a", 400*ms, 250*ms, 60*ms, 100*ms, 150*ms, true)
	f.Add("k", "a", 400*ms, 400*ms, 60*ms, 100*ms, 0*ms, false)  // R = L
	f.Add("k", "a", 400*ms, 250*ms, 250*ms, 100*ms, 0*ms, false) // H = R
	f.Add("k", "a", -1*ms, 0*ms, 0*ms, 0*ms, 0*ms, false)        // negative
	f.Add("k", "a", int64(999), int64(500), int64(100), int64(10), int64(-1), false)
	f.Add("k ", "a", int64(0), int64(0), int64(0), int64(0), int64(0), false)    // trailing space
	f.Add("k\x00", "a", int64(0), int64(0), int64(0), int64(0), int64(0), false) // NUL
	f.Add("k", "a\xff", int64(0), int64(0), int64(0), int64(0), int64(0), false) // invalid UTF-8
	f.Add("", "", int64(0), int64(0), int64(0), int64(0), int64(0), false)
	f.Add(strings.Repeat("k", 256), "a", int64(0), int64(0), int64(0), int64(0), int64(0), false)
	f.Add("k", "a", int64(1<<62), int64(1<<61), int64(1<<60), int64(1<<59), int64(1<<58), false)
	f.Fuzz(func(t *testing.T, key, id string, lease, renew, beat, poll, drain int64, observer bool) {
		cfg := casleader.Config{
			Key: key, ID: id,
			LeaseDuration: time.Duration(lease), RenewDeadline: time.Duration(renew),
			HeartbeatInterval: time.Duration(beat), PollInterval: time.Duration(poll),
			DrainTimeout: time.Duration(drain), Observer: observer,
		}
		el, err := casleader.New(memstore.New(), cfg)
		if err != nil {
			if !errors.Is(err, casleader.ErrInvalidConfig) {
				t.Fatalf("New error %v is not ErrInvalidConfig", err)
			}
			named := false
			for _, field := range []string{"Key", "ID", "key", "id", "LeaseDuration", "RenewDeadline", "HeartbeatInterval", "PollInterval", "DrainTimeout"} {
				named = named || strings.Contains(err.Error(), field)
			}
			if !named {
				t.Fatalf("New error %q names no field", err)
			}
			return
		}
		// The durations in effect (zero means the default) keep H < R < L.
		c := el.Config()
		L, R, H, P := c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval
		if !(H < R && R < L) || H < time.Millisecond || P < time.Millisecond || cfg.DrainTimeout < 0 {
			t.Fatalf("New accepted L=%v R=%v H=%v P=%v drain=%v", L, R, H, P, cfg.DrainTimeout)
		}
		if key != el.Key() || (id != "" && id != el.ID()) {
			t.Fatalf("New changed the key or ID: %q %q", el.Key(), el.ID())
		}
		// The store accepts the key and the ID.
		st := memstore.New()
		if _, _, err := st.Observe(context.Background(), el.Key()); errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("New accepted key %q that the store refuses: %v", el.Key(), err)
		}
		if _, _, err := st.Insert(context.Background(), "k", store.Candidate{ID: el.ID()}); errors.Is(err, store.ErrInvalidArgument) {
			t.Fatalf("New accepted ID %q that the store refuses: %v", el.ID(), err)
		}
	})
}
