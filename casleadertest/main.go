//go:build linux

package casleadertest

import (
	"context"
	"os"
	"reflect"
	"runtime"
	"testing"
)

// leads are the Lead functions a candidate process may run, by name.
var leads = map[string]func(ctx context.Context, c *Candidate){}

// funcName names a function the same way in every process of one binary.
func funcName(f any) string { return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name() }

// Main is the TestMain of a test binary whose tests run a [ProcessCluster]: in a
// candidate process (the binary re-executed with [EnvChild] set) it runs the
// candidate ([RunChild]), else the tests. leads are the functions that
// [ProcessConfig.Lead] may name: a candidate process finds its own among them. It
// does not return.
//
//	func TestMain(m *testing.M) { casleadertest.Main(m, sendInvoices) }
func Main(m *testing.M, lead ...func(ctx context.Context, c *Candidate)) {
	if os.Getenv(EnvChild) == "1" {
		for _, f := range lead {
			leads[funcName(f)] = f
		}
		os.Exit(RunChild())
	}
	os.Exit(m.Run())
}
