package timing

import (
	"testing"
	"time"
)

func TestFillKeepsTheDefaultsRatios(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	for _, tc := range []struct {
		name                   string
		lease, renew, beat     time.Duration
		wantL, wantR, wantBeat time.Duration
	}{
		{"NothingSetGivesTheDefaults", 0, 0, 0, 15 * s, 10 * s, 2 * s},
		{"LeaseOnlyScalesTheRest", 3 * s, 0, 0, 3 * s, 2 * s, 400 * ms},
		{"LongLease", time.Minute, 0, 0, time.Minute, 40 * s, 8 * s},
		{"DerivedValuesTruncatedToTheMillisecond", s, 0, 0, s, 666 * ms, 133 * ms},
		{"HeartbeatFollowsAGivenRenew", 3 * s, 2500 * ms, 0, 3 * s, 2500 * ms, 500 * ms},
		{"RenewFollowsTheLeaseNotTheHeartbeat", 30 * s, 0, 5 * s, 30 * s, 20 * s, 5 * s},
		{"GivenValuesAreKeptEvenWhenWrong", 3 * s, 5 * s, 2 * s, 3 * s, 5 * s, 2 * s},
		{"TinyLeaseStaysPositive", 3 * ms, 0, 0, 3 * ms, 2 * ms, 400 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, r, h := Fill(tc.lease, tc.renew, tc.beat)
			if l != tc.wantL || r != tc.wantR || h != tc.wantBeat {
				t.Errorf("Fill(%v, %v, %v) = %v, %v, %v; want %v, %v, %v",
					tc.lease, tc.renew, tc.beat, l, r, h, tc.wantL, tc.wantR, tc.wantBeat)
			}
		})
	}
}
