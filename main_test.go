package worqr

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the tests: every
// worker, subscription and client the tests start must be stopped by
// Close (or by the crash and freeze helpers, which stop them too).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
