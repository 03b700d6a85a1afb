package flows

import (
	"context"
	"errors"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/workflow"
)

// Release enqueues the steps of workflows that their parents' ends, or
// the workflow's creation, made ready.
type Release struct {
	Store *store.Store
	// Fail makes a store error the client's (op, queue).
	Fail func(op, queue string, err error) error
	// Enqueued tells the client's observer of the tasks added to a queue.
	Enqueued func(ctx context.Context, queue string, ids []string)
	// Cancel cancels a task in its queue, as the client's CancelTask.
	Cancel func(ctx context.Context, queue, id string) error
}

// Enqueue enqueues workflows' ready steps, each to its queue with a
// unique key of its own (idempotent), then marks them queued; those
// cancelled meanwhile have their tasks cancelled. A step of a workflow at
// home in its queue's slot is enqueued only while ready and marked in the
// same call (store.MarkedOnEnqueue), its state the token: one not ready
// any more adds nothing. It returns an error per workflow.
func (r *Release) Enqueue(ctx context.Context, wfs []Ready) []error {
	errs := make([][]error, len(wfs))
	var tasks []store.EnqueueOne
	var of []int // the workflow of each task
	var steps []store.ReadyStep
	for w, f := range wfs {
		for _, rs := range f.Steps {
			t, err := workflow.StepTask(f.ID, rs)
			if err != nil {
				errs[w] = append(errs[w], err)
				continue
			}
			tasks = append(tasks, t)
			of, steps = append(of, w), append(steps, rs)
		}
	}
	queued := make([][]store.QueuedStep, len(wfs))
	if len(tasks) > 0 {
		// One round trip for them all (one per node on a cluster): a
		// fan-out of thousands is released at once.
		ids, errsOf := r.Store.EnqueueSteps(ctx, tasks)
		added := make(map[string][]string) // task ids by queue, for the observer
		marked := make(map[[2]string]bool) // by workflow and queue: store.MarkedOnEnqueue, judged once
		for i, t := range tasks {
			switch err := errsOf[i]; {
			case err == nil:
				added[t.Queue] = append(added[t.Queue], ids[i])
			case errors.Is(err, store.ErrStepNotReady):
				continue
			case !errors.Is(err, store.ErrDuplicate): // a duplicate was enqueued before: its id is the task's
				errs[of[i]] = append(errs[of[i]], r.Fail("enqueue", t.Queue, err))
				continue
			}
			at := [2]string{wfs[of[i]].ID, t.Queue}
			m, ok := marked[at]
			if !ok {
				m = r.Store.MarkedOnEnqueue(t)
				marked[at] = m
			}
			if m {
				continue
			}
			queued[of[i]] = append(queued[of[i]], store.QueuedStep{Name: steps[i].Name, TaskID: ids[i], Spec: steps[i].Spec})
		}
		for q, ids := range added {
			r.Enqueued(ctx, q, ids)
		}
	}
	out := make([]error, len(wfs))
	for w, f := range wfs {
		if len(queued[w]) > 0 {
			cancelled, err := r.Store.StepsEnqueued(ctx, f.ID, queued[w])
			if err != nil {
				errs[w] = append(errs[w], r.Fail("enqueue workflow", "", err))
			} else {
				errs[w] = append(errs[w], r.CancelSteps(ctx, cancelled))
			}
		}
		out[w] = errors.Join(errs[w]...)
	}
	return out
}

// CancelSteps cancels the tasks of steps in their queues.
func (r *Release) CancelSteps(ctx context.Context, steps []store.QueuedStep) error {
	var errs []error
	for _, st := range steps {
		queue, ok := workflow.SpecQueue(st.Spec)
		if !ok || st.TaskID == "" {
			continue
		}
		if err := r.Cancel(ctx, queue, st.TaskID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
