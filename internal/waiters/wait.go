package waiters

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// Outcome is Wait in the public types: the outcome of the task id of
// queue, and its progress reports given to onProgress (if not nil).
func (ws *Waiters) Outcome(ctx context.Context, queue, id string, onProgress func(worqrtype.TaskProgress), fail func(op, queue string, err error) error) (worqrtype.TaskOutcome, error) {
	var heard func(store.ProgressRecord)
	if onProgress != nil {
		heard = func(r store.ProgressRecord) { onProgress(r.Report(id)) }
	}
	r, err := ws.Wait(ctx, queue, id, heard, fail)
	if err != nil {
		return worqrtype.TaskOutcome{}, err
	}
	return r.Outcome(queue), nil
}

// Wait waits until the task id of queue has an outcome kept and returns
// it, or until it is known that none will come (the error says why),
// ctx ends or the client closes. onProgress, if not nil, is called on
// the caller's goroutine with the task's progress reports meanwhile:
// the one kept in Redis after every (re)subscription, then each one
// heard, never the same one twice in a row. fail wraps a failed read's
// error.
func (ws *Waiters) Wait(ctx context.Context, queue, id string, onProgress func(store.ProgressRecord), fail func(op, queue string, err error) error) (store.Result, error) {
	w := ws.Add(queue, id, onProgress != nil)
	defer ws.Remove(queue, id, w)
	var last store.ProgressRecord // the last report given to onProgress
	pending := false              // a read saw the task pending its outcome
	deliver := func(r store.ProgressRecord) {
		if r != last {
			last = r
			onProgress(r)
		}
	}
	for {
		select {
		case <-w.Wake():
		case <-w.Progress(): // nil without onProgress: never ready
			if r := w.TakeReport(); r != nil {
				deliver(*r)
			}
			continue
		case <-ctx.Done():
			return store.Result{}, fmt.Errorf("worqr: wait %q %s: %w", queue, id, ctx.Err())
		case <-w.Closed():
			return store.Result{}, fmt.Errorf("worqr: wait %q %s: %w", queue, id, errs.ErrClientClosed)
		}
		// Why the task may have gone without an outcome, if an event
		// said so before this read: taken now, so that it speaks only of
		// what the read can see, and trusted only if an earlier read saw
		// the task pending, so that it explains that task's going (an
		// event can reach a waiter that began after it was published).
		gone := w.TakeGone()
		r, state, err := ws.store.TaskOutcome(ctx, queue, id, true)
		if err != nil {
			return store.Result{}, fail("wait", queue, err)
		}
		switch state {
		case store.OutcomeKept:
			return r, nil
		case store.OutcomeComing:
			pending = true
		case store.OutcomeUnkept:
			return store.Result{}, fmt.Errorf("worqr: wait %q %s: %w", queue, id, errs.ErrNotRetained)
		case store.OutcomeCanceled:
			return store.Result{}, fmt.Errorf("worqr: wait %q %s: %w", queue, id, errs.ErrTaskCancelled)
		case store.OutcomeDeleted:
			return store.Result{}, fmt.Errorf("worqr: wait %q %s: %w", queue, id, errs.ErrQueueDeleted)
		default:
			if gone == nil || !pending {
				gone = errs.ErrNoTask
			}
			return store.Result{}, fmt.Errorf("worqr: wait %q %s: %w", queue, id, gone)
		}
		if onProgress != nil {
			// (Re)subscribed: a report may have been missed.
			r, ok, err := ws.store.Progress(ctx, queue, id)
			if err != nil {
				return store.Result{}, fail("wait", queue, err)
			}
			if ok {
				deliver(r)
			}
		}
	}
}
