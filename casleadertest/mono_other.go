//go:build !linux

package casleadertest

import "time"

var epoch = time.Now()

// Mono returns a monotonic time in nanoseconds, the timeline of the history's
// stamps. Outside Linux it is this process's own.
func Mono() int64 { return int64(time.Since(epoch)) }
