package casleadertest

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Mono returns the host's CLOCK_MONOTONIC in nanoseconds: one timeline for every
// process on the host, which the history's stamps use. A candidate process whose
// clocks are offset (see [ProcessConfig.ClockOffsets]) subtracts its offset, which
// only the harness's own stamps use: the elector in that process sees the offset
// clock.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // cannot happen on Linux
	}
	return ts.Nano() - monoOffset
}

// monoOffset is this process's envMonoOffset (0 in the parent).
var monoOffset, _ = strconv.ParseInt(os.Getenv(envMonoOffset), 10, 64)
