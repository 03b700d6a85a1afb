package worqr

import (
	"context"

	"github.com/worqr/worqr/internal/engine"
)

// Dequeue takes the task at the front of a queue the worker serves. It
// returns ErrNoTask when none is waiting, and ErrWorkerFenced when the
// worker's lease is not live.
func (w *Worker) Dequeue(ctx context.Context, queue string) (*Process, error) {
	ps, _, err := engine.Dequeue(ctx, w.core.Host(), queue, 1, false)
	if err != nil {
		return nil, err
	}
	return processOf(ps[0]), nil
}

// DequeueN takes up to n tasks from the front of a queue in one script
// call, in queue order. It returns ErrNoTask when none is waiting.
func (w *Worker) DequeueN(ctx context.Context, queue string, n int) ([]*Process, error) {
	ps, _, err := engine.Dequeue(ctx, w.core.Host(), queue, n, false)
	if err != nil {
		return nil, err
	}
	return processesOf(ps), nil
}
