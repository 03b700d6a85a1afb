package worqr

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/testsignal"
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

// A StopWork whose handler outlives its cancel and whose release fails
// leaves the queue served, and a goroutine still waiting for that handler.
// When the handler returns and the restarted loop starts the next one,
// that waiter must not be in the way: with a sync.WaitGroup the restarted
// loop's first Add came while the old Wait had not returned (misuse, which
// -race reports, and which can panic "reused before previous Wait has
// returned").
func TestARestartedLoopStartsHandlersWhileAnOldStopStillWaits(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	w := newWorker(t, c, WorkerOptions{})
	unstick := make(chan struct{})
	started := make(chan string, 10)
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		started <- string(p.Task())
		if string(p.Task()) == "stuck" {
			<-unstick // ignores its context
		}
		return nil
	}, HandleOptions{Concurrency: 1}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("stuck"))))
	recv(t, started, 5*time.Second, "the stuck handler")
	// StopWork cancels the handler and waits ShutdownCancelWait for it
	// on the client's clock, moved once that wait's timer is set.
	k.advanceOnceSet(k.clk.Timers()+1, ShutdownCancelWait)
	r := failStopWork(t, c, w, "q")
	close(unstick)
	// The stuck handler's outcome is written (or found lost), and the old
	// waiter sees no handler running.
	recv(t, r.Drained(), 5*time.Second, "the stuck handler done")
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("next"))))
	assert.Equal(t, "next", recv(t, started, 5*time.Second, "the restarted loop's handler"))
}

// Shutdown waits for the handlers on its own goroutine: one that outlasts
// the grace period and the wait after its cancel leaves nothing of
// Shutdown's behind waiting for it. Not parallel: it looks at every
// goroutine. On a Fake clock, which times the wait after the cancel.
func TestShutdownLeavesNoWaiterOnAHandlerThatOutlastsIt(t *testing.T) {
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	w := newWorker(t, c, WorkerOptions{})
	started, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the worker's Close
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		close(started)
		<-release // deaf to its context
		return nil
	}, HandleOptions{}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	recv(t, started, 5*time.Second, "handler running")
	mark := k.clk.Mark()
	grace, cancel := context.WithCancel(ctx)
	cancel() // over before Shutdown begins: the handler outlasts it
	shut := make(chan error, 1)
	go func() { shut <- w.Shutdown(grace) }()
	// The wait after the handler's cancel, and not another component's
	// timer, set before or meanwhile.
	wait, done := context.WithTimeout(ctx, testsignal.Wait)
	defer done()
	require.NoError(t, k.clk.WaitTimerAt(wait, mark, k.clk.Now().Add(ShutdownCancelWait)), "the wait after the cancel set")
	k.advance(ShutdownCancelWait)
	assert.ErrorIs(t, recv(t, shut, testsignal.Wait, "Shutdown returned"), context.Canceled)
	assert.Empty(t, goroutinesRunning(func(frame string) bool {
		return strings.Contains(frame, "internal/engine.Runtimes.Stop")
	}), "a goroutine of Shutdown still waits for the handler")
}
