package casleadertest

import "golang.org/x/sys/unix"

// Mono returns the host's CLOCK_MONOTONIC in nanoseconds: one timeline for every
// process on the host, which the history's stamps use.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // cannot happen on Linux
	}
	return ts.Nano()
}
