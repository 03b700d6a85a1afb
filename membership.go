package worqr

import (
	"context"

	"github.com/worqr/worqr/internal/engine"
)

// StartWork makes the worker serve a queue: it records the queue in the
// registry, takes a lease on it, subscribes to its events, and then raises
// a Work event if tasks are already waiting.
func (w *Worker) StartWork(ctx context.Context, queue string, events Events) error {
	return engine.Serve(ctx, w.core.Host(), &w.core.Env, queue, engine.Events(events), nil)
}

// StopWork stops serving a queue: it unsubscribes, returns every task the
// worker holds in that queue to the front of the queue, and gives up the
// lease. Processes it held end with ErrProcessLost. On a queue served by
// Handle it first cancels the running handlers (cause ErrShutdown) and
// gives them ShutdownCancelWait to return, so none still holds a task a
// peer may take. If giving the tasks back fails, the queue stays served.
func (w *Worker) StopWork(ctx context.Context, queue string) error {
	return engine.Unserve(ctx, w.core.Host(), queue)
}
