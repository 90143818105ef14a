//go:build linux

package casleadertest

import (
	"os"
	"testing"
)

// Main is the TestMain of a test binary whose tests run a [ProcessCluster]: in a
// candidate process (the binary re-executed with [EnvChild] set) it runs the
// candidate ([RunChild]), else the tests. It does not return.
//
//	func TestMain(m *testing.M) { casleadertest.Main(m) }
func Main(m *testing.M) {
	if os.Getenv(EnvChild) == "1" {
		os.Exit(RunChild())
	}
	os.Exit(m.Run())
}
