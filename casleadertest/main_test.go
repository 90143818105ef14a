//go:build linux

package casleadertest_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/casleader/casleader/casleadertest"
)

func TestMain(m *testing.M) {
	if os.Getenv(casleadertest.EnvChild) == "1" {
		casleadertest.Main(m, sendInvoices) // a candidate process of TestNightlyInvoiceUnderProcessFaults
	}
	goleak.VerifyTestMain(m)
}
