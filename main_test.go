package worqr

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the tests: every
// worker, subscription and client the tests start must be stopped by
// Close (or by the crash and freeze helpers, which stop them too).
//
// rueidis's cluster client lets two timers of its own run out after Close
// (it closes replaced connections and retries a topology refresh after a
// delay); they are not ours and end by themselves within seconds.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
	)
}
