// Package timing holds the one rule that fills in the election's durations left
// unset, for the library's Config, the group's and the command's flags alike: the
// defaults of client-go's leader election (lease 15 s, renew deadline 10 s,
// heartbeat 2 s), kept in proportion when only some are given.
package timing

import "time"

// DefaultLease is the lease duration when none is given.
const DefaultLease = 15 * time.Second

// DefaultPoll is the longest time between two reads of the row by a follower when
// none is given.
const DefaultPoll = 5 * time.Second

// Fill returns lease, renew and heartbeat with each zero value replaced: the lease
// by [DefaultLease], the renew deadline by 2/3 of the lease, the heartbeat
// interval by 1/5 of the renew deadline. With nothing set this gives the defaults
// (15 s, 10 s, 2 s); with only the lease set, the others keep the defaults'
// ratios (a 3 s lease: 2 s, 400 ms). A value set is never changed, so a bad
// combination stays an error for the caller's validation. Derived values are
// truncated to the millisecond when that leaves them at least 1 ms.
func Fill(lease, renew, heartbeat time.Duration) (time.Duration, time.Duration, time.Duration) {
	if lease == 0 {
		lease = DefaultLease
	}
	if renew == 0 {
		renew = ms(lease * 2 / 3)
	}
	if heartbeat == 0 {
		heartbeat = ms(renew / 5)
	}
	return lease, renew, heartbeat
}

// ms truncates d to the millisecond, unless that leaves less than 1 ms.
func ms(d time.Duration) time.Duration {
	if t := d.Truncate(time.Millisecond); t >= time.Millisecond {
		return t
	}
	return d
}
