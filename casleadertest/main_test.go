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
		casleadertest.Main(m, sendInvoices, renderAndSendInvoices, sendInvoicesUnguarded) // a candidate process of the process tests
	}
	// toxiproxy (the candidates' proxies of a ProcessCluster) leaves the goroutine
	// of a link's last stub blocked on its channel once the proxy stopped: its
	// own, and bounded by the proxies of the run.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"))
}
