package worqr

import (
	"context"
	"errors"
	"time"
)

// Close stops the worker at once: it stops taking tasks, cancels running
// handlers (cause ErrShutdown) and gives them ShutdownCancelWait to
// return, gives every task it holds back to the front of its queue and
// deregisters; processes still held end with ErrProcessLost. Use it when
// the process is going away and should not leave its work waiting a TTL
// for its peers (if Redis cannot be reached, the peers still reclaim the
// work once the lease expires). Use Shutdown to let running handlers
// finish first. A second call returns nil.
func (w *Worker) Close(ctx context.Context) error { return w.parts.Close(ctx) }

// Shutdown stops the worker gracefully, like http.Server.Shutdown: it
// stops taking tasks at once, waits for running handlers until ctx ends,
// then cancels their contexts (cause ErrShutdown) and waits a short while
// (ShutdownCancelWait) for them to return. What is still unfinished goes
// back to the front of its queue, the worker deregisters and its
// subscriptions close. It returns ctx's error if the grace period ran out.
// A second call, or Close after it, is safe. Like http.Server.Shutdown, a
// Shutdown called from a handler waits for that handler too: give it a
// context with a deadline.
func (w *Worker) Shutdown(ctx context.Context) error {
	if w.core.Closed() {
		return nil
	}
	grace := w.core.Closer.Drain(ctx)
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.TTL)
	defer cancel()
	err := w.core.Closer.Close(closeCtx, "shutdown")
	if errors.Is(err, ErrWorkerClosed) {
		err = nil
	}
	return errors.Join(grace, err)
}

// ShutdownCancelWait is how long Shutdown and Close wait for handlers
// to return once their contexts were cancelled.
const ShutdownCancelWait = time.Second
