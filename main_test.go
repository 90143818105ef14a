package casleader_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: Run must return
// only after everything it started has exited.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
