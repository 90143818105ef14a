package casleader_test

import (
	"testing"

	"github.com/casleader/casleader/internal/protocoltest"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: Run must return
// only after everything it started has exited.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer = protocoltest.SyncBuffer
