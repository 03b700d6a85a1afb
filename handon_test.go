package worqr

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// blockFinishes makes every finish wait until the returned func is called
// (once), and counts the finishes that reached Redis's door.
func blockFinishes(t *testing.T, c *Client) (release func(), entered func() int) {
	t.Helper()
	gate := make(chan struct{})
	var mu sync.Mutex
	n := 0
	c.core.Store.SetFault(func(ctx context.Context, op store.Op, _ string) error {
		if op != store.OpFinish {
			return nil
		}
		mu.Lock()
		n++
		mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return release, func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// A handler's slot is handed on when it returns, not when Redis has its
// outcome: with one slot, the next task starts while the first one's
// finish is still on its way. The outcomes in writing are bounded by the
// slots: with one slot, a third task waits until a finish is written.
func TestSlotIsHandedOnWhenTheHandlerReturns(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	release, entered := blockFinishes(t, c)
	started := make(chan string, 10)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		started <- string(p.Task())
		return nil
	}, HandleOptions{Concurrency: 1}))
	enqueueNumbered(t, c, "q", 3)

	assert.Equal(t, "t0000", recv(t, started, 5*time.Second, "the first task"))
	assert.Equal(t, "t0001", recv(t, started, 5*time.Second, "the second task, while the first one's finish waits"))
	eventually(t, 5*time.Second, "the first finish at Redis's door", func() bool { return entered() >= 1 })
	w.core.Lock()
	r := w.core.Served()["q"].Runtime
	w.core.Unlock()
	eventually(t, 5*time.Second, "both outcomes being written", func() bool {
		busy, settling := r.Counts()
		return busy == 0 && settling == 2
	})
	assert.Equal(t, 0, r.Free(), "no slot while a slot's worth of outcomes is unwritten")
	n, err := c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the third task still waits")
	select {
	case s := <-started:
		t.Fatalf("task %s started with two outcomes unwritten", s)
	default:
	}

	release()
	assert.Equal(t, "t0002", recv(t, started, 5*time.Second, "the third task, once the finishes are written"))
	settledQueue(t, c, "q")
	require.NoError(t, w.Shutdown(ctx))
	_, settling := r.Counts()
	assert.Zero(t, settling)
}

// Shutdown waits for the outcomes being written, not only for the
// handlers: a finish that Redis has not answered yet still lands.
func TestShutdownWaitsForOutcomesBeingWritten(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	release, entered := blockFinishes(t, c)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{Concurrency: 2}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("t"))))
	eventually(t, 5*time.Second, "the finish at Redis's door", func() bool { return entered() == 1 })

	done := make(chan error, 1)
	go func() { done <- w.Shutdown(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a finish unwritten", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	require.NoError(t, recv(t, done, 10*time.Second, "shutdown"))
	settledQueue(t, c, "q")
}
