package worqr

// The runtime under Handle: its drain, as a worker's handler holds it
// (internal/engine tests the runtime on its own).

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// drained is closed at once while no handler runs, and, asked while one
// runs, once it has returned and its outcome is written.
func TestRuntimeDrained(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	started, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		close(started)
		<-release
		return nil
	}, HandleOptions{Concurrency: 1}))
	r := sessionOf(w, "q").Runtime
	assert.True(t, isClosed(r.Drained()), "no handler yet")

	enqueueNumbered(t, c, "q", 1)
	recv(t, started, 5*time.Second, "the handler")
	d := r.Drained()
	assert.False(t, isClosed(d), "a handler runs")
	assert.False(t, r.Idle())
	close(release)
	recv(t, d, 5*time.Second, "drained")
	assert.True(t, r.Idle())
	assert.Zero(t, queueHolds(t, c, "q"), "its Finish was written before the drain")
}
