package sqlstore

import (
	"database/sql"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/casleader/casleader/notify"
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
		if rec.Version < 1 || rec.Version >= store.VersionLimit || rec.Term < 0 || rec.Term > rec.Version {
			t.Fatalf("accepted version %d term %d", rec.Version, rec.Term)
		}
		if ageMicros < -store.FutureTolerance.Microseconds() {
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
	for _, tc := range []struct {
		table, payload string
		version        int64
		key            string
		ok             bool
	}{
		{"t", NotifyPayload("t", 42, "k"), 42, "k", true},
		{"t", NotifyPayload("t", 0, "a key with spaces"), 0, "a key with spaces", true},
		{"s.t", NotifyPayload("s.t", 7, "k"), 7, "k", true},
		{"t", NotifyPayload("other", 42, "k"), 0, "", false},
		{"t", "t k", 0, "", false},   // no version
		{"t", "t x k", 0, "", false}, // not a number
		{"t", NotifyPayload("t", notify.HandedOver, "k"), notify.HandedOver, "k", true},
		{"t", "t -2 k", 0, "", false}, // negative, not a handover
		{"t", "t 5 ", 0, "", false},   // no key
		{"t", "tt 5 k", 0, "", false}, // another table with the same prefix
		{"t", "casleader-selftest 0123", 0, "", false},
	} {
		v, k, ok := ParseNotifyPayload(tc.table, tc.payload)
		if v != tc.version || k != tc.key || ok != tc.ok {
			t.Errorf("ParseNotifyPayload(%q, %q) = %d, %q, %v; want %d, %q, %v", tc.table, tc.payload, v, k, ok, tc.version, tc.key, tc.ok)
		}
	}
}
