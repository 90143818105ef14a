package sqlstore

import (
	"database/sql"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/store"
)

// FuzzDecode feeds decode every combination of NULLs and values a corrupt or
// hostile row could hold. It must never panic, must reject with store.ErrInvalidRow
// anything casleader cannot have written, and what it accepts must be a Record the
// election logic can trust.
func FuzzDecode(f *testing.F) {
	f.Add("k", true, int64(1), true, "a", true, int64(1), true, int64(0), true, "", true, int64(0))
	f.Add("k", true, int64(9), true, "", true, int64(3), true, int64(5_000_000), true, "b", true, int64(1))
	f.Add("k", false, int64(0), true, "a", true, int64(1), true, int64(0), true, "", true, int64(0))
	f.Add("k", true, int64(-1), true, "a", true, int64(1), true, int64(0), true, "", true, int64(0))
	f.Add("k", true, int64(2), true, "a", true, int64(3), true, int64(0), true, "", true, int64(0))
	f.Add("k", true, int64(2), true, "a", true, int64(1), true, int64(-3_600_000_000), true, "", true, int64(0))
	f.Add("k", true, int64(2), true, "a", true, int64(1), true, int64(math.MaxInt64), true, "", true, int64(0))
	f.Add("k", true, int64(math.MaxInt64), true, "a", true, int64(math.MaxInt64), true, int64(math.MinInt64), true, "", true, int64(-7))
	f.Add("k", true, int64(2), true, "a", true, int64(1), true, int64(-30_700_000_000_000_000), true, "", true, int64(0)) // tick_time in the year 3000
	f.Fuzz(func(t *testing.T, key string, vOK bool, v int64, lOK bool, leader string, tOK bool, term int64,
		aOK bool, ageMicros int64, hOK bool, handover string, sOK bool, stepdown int64) {
		rec, err := decode(key,
			sql.NullInt64{Int64: v, Valid: vOK}, sql.NullString{String: leader, Valid: lOK},
			sql.NullInt64{Int64: term, Valid: tOK}, sql.NullInt64{Int64: ageMicros, Valid: aOK},
			sql.NullString{String: handover, Valid: hOK}, sql.NullInt64{Int64: stepdown, Valid: sOK})
		if err != nil {
			if !errors.Is(err, store.ErrInvalidRow) {
				t.Fatalf("decode error %v is not store.ErrInvalidRow", err)
			}
			if !strings.Contains(err.Error(), "fix") {
				t.Fatalf("decode error %q does not say what to do", err)
			}
			return
		}
		if !vOK || !lOK || !tOK || !aOK || !hOK || !sOK {
			t.Fatalf("a NULL column was accepted: %+v", rec)
		}
		if rec.Version < 1 || rec.Version >= rules.VersionLimit || rec.Term < 0 || rec.Term > rec.Version {
			t.Fatalf("accepted version %d term %d", rec.Version, rec.Term)
		}
		if ageMicros < -rules.FutureTolerance.Microseconds() {
			t.Fatalf("a tick_time %d µs in the future was accepted as age %v", -ageMicros, rec.Age)
		}
		if rec.Age < 0 {
			t.Fatalf("negative age %v from %d µs", rec.Age, ageMicros)
		}
		if want := time.Duration(max(-ageMicros, 0)) * time.Microsecond; rec.Ahead != want {
			t.Fatalf("ahead %v from %d µs, want %v", rec.Ahead, ageMicros, want)
		}
		if ageMicros > 0 && ageMicros <= math.MaxInt64/1000 && rec.Age != time.Duration(ageMicros)*time.Microsecond {
			t.Fatalf("age %v from %d µs", rec.Age, ageMicros)
		}
		// An age too large for a Duration is an old lease, never a live one.
		if ageMicros > math.MaxInt64/1000 && !rec.Expired(time.Hour) {
			t.Fatalf("age of %d µs (wrapped to %v) reads as a live lease", ageMicros, rec.Age)
		}
		if rec.Key != key || rec.LeaderID != leader || rec.HandoverTo != handover || rec.StepDown != (stepdown != 0) {
			t.Fatalf("decode changed a value: %+v", rec)
		}
	})
}

// FuzzValidateName: what validateName accepts every database stores and compares

func TestNotifyPayloadRoundTrips(t *testing.T) {
	ho := notify.HandedOver
	for _, tc := range []struct {
		table, payload string
		want           Payload
		ok             bool
	}{
		{"t", NotifyPayload("t", 42, "k"), Payload{Version: 42, Key: "k"}, true},
		{"t", NotifyPayload("t", 0, "a key with spaces"), Payload{Key: "a key with spaces"}, true},
		{"s.t", NotifyPayload("s.t", 7, "k"), Payload{Version: 7, Key: "k"}, true},
		{"t", NotifyPayload("other", 42, "k"), Payload{}, false},
		{"t", "t k", Payload{}, false},                                           // no version
		{"t", "t x k", Payload{}, false},                                         // not a number
		{"t", NotifyPayload("t", ho, "k"), Payload{Version: ho, Key: "k"}, true}, // a handover, target not named
		{"t", "t -2 k", Payload{}, false},                                        // negative, not a handover
		{"t", "t 5 ", Payload{}, false},                                          // no key
		{"t", "tt 5 k", Payload{}, false},                                        // another table with the same prefix
		{"t", "casleader-selftest 0123", Payload{}, false},
		// Handovers name their target by its length in characters: IDs may hold
		// spaces and any UTF-8, keys too.
		{"t", HandoverPayload("t", "node-2", "k"), Payload{Version: ho, Key: "k", To: "node-2"}, true},
		{"t", HandoverPayload("t", "a b", "c d"), Payload{Version: ho, Key: "c d", To: "a b"}, true},
		{"t", HandoverPayload("t", "nœud 2 é", "clé 1"), Payload{Version: ho, Key: "clé 1", To: "nœud 2 é"}, true},
		{"t", "t -1/6 node-2 k", Payload{Version: ho, Key: "k", To: "node-2"}, true}, // as PostgreSQL writes it
		{"t", "t -1/7 node-2 k", Payload{}, false},                                   // no space after the target
		{"t", "t -1/6 node-2 ", Payload{}, false},                                    // no key
		{"t", "t -1/6 node-2", Payload{}, false},
		{"t", "t -1/9 node-2 k", Payload{}, false}, // shorter than its length
		{"t", "t -1/0  k", Payload{}, false},
		{"t", "t -1/06 node-2 k", Payload{}, false},
		{"t", "t -1/x node-2 k", Payload{}, false},
		{"t", "t -1/-3 abc k", Payload{}, false},
	} {
		got, ok := ParseNotifyPayload(tc.table, tc.payload)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseNotifyPayload(%q, %q) = %+v, %v; want %+v, %v", tc.table, tc.payload, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseNotifyPayload: any payload parses without a panic, and a handover's
// payload parses back to what was written.
func FuzzParseNotifyPayload(f *testing.F) {
	f.Add("node-2", "k", "t -1/3 abc k")
	f.Add("a b", "c d", "t 5 k")
	f.Fuzz(func(t *testing.T, to, key, raw string) {
		_, _ = ParseNotifyPayload("t", raw)
		if rules.NameRule(to) != "" || rules.NameRule(key) != "" {
			return
		}
		got, ok := ParseNotifyPayload("t", HandoverPayload("t", to, key))
		if !ok || got != (Payload{Version: notify.HandedOver, Key: key, To: to}) {
			t.Fatalf("handover to %q of %q parsed as %+v, %v", to, key, got, ok)
		}
	})
}
