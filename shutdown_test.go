package worqr

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Shutdown with a context already over, and no handler running, has
// nothing to report: no handler outlasted the grace period.
func TestShutdownWithNothingRunningAndNoGrace(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	dead, cancel := context.WithCancel(ctx)
	cancel()
	for i := range 100 {
		w := newWorker(t, c, WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{}))
		require.NoError(t, w.Shutdown(dead), "round %d", i)
	}
	// With a handler running it is reported.
	w := newWorker(t, c, WorkerOptions{})
	started := make(chan struct{})
	require.NoError(t, w.Handle(ctx, "q", func(hctx context.Context, _ *Process) error {
		close(started)
		<-hctx.Done()
		return hctx.Err()
	}, HandleOptions{}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	recv(t, started, 5*time.Second, "handler running")
	assert.ErrorIs(t, w.Shutdown(dead), context.Canceled)
	assert.Equal(t, []string{"x"}, waiting(t, c, "q"), "its task went back")
}
