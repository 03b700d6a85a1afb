package enqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// MaxQueueNameLen is the longest queue name, in bytes (the root's, by the
// same name).
const MaxQueueNameLen = 1024

// CheckQueue is the error of a call op on a queue of a name that cannot
// be: empty, or over MaxQueueNameLen bytes.
func CheckQueue(op, queue string) error {
	if queue == "" {
		return fmt.Errorf("worqr: %s: empty name: %w", op, errs.ErrInvalidQueueName)
	}
	if len(queue) > MaxQueueNameLen {
		return fmt.Errorf("worqr: %s: name is %d bytes, limit %d: %w", op, len(queue), MaxQueueNameLen, errs.ErrInvalidQueueName)
	}
	return nil
}

// Send sends checked tasks to queue and tells the observer (told) of the
// call: a unique key held is ErrDuplicate, with the holder's id first
// among the ids.
func Send(ctx context.Context, st *store.Store, told func(context.Context, worqrtype.EnqueueEvent), queue string, tasks [][]byte, o Options) ([]string, error) {
	ids, err := st.Enqueue(ctx, queue, tasks, o.Args())
	if errors.Is(err, store.ErrDuplicate) {
		err = fmt.Errorf("worqr: enqueue %q: unique key %q is held by task %s: %w", queue, o.Unique, ids[0], errs.ErrDuplicate)
		told(ctx, worqrtype.EnqueueEvent{Queue: queue, Err: err})
		return ids, err
	}
	if err != nil {
		err = store.Fail("enqueue", queue, err)
	}
	told(ctx, worqrtype.EnqueueEvent{Queue: queue, TaskIDs: ids, Err: err})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// Tracer is the root's Tracer, by its method.
type Tracer interface {
	StartEnqueue(ctx context.Context, e worqrtype.EnqueueStart) (trace string, end func(ids []string, err error))
}

// Trace asks t, if not nil, for the trace context of an enqueue call of n
// tasks, sets it in o, and returns the func to call with the call's
// result (never nil).
func Trace(ctx context.Context, t Tracer, queue string, o *Options, n int) (func([]string, error), error) {
	if t == nil {
		return func([]string, error) {}, nil
	}
	trace, end := t.StartEnqueue(ctx, worqrtype.EnqueueStart{Queue: queue, Kind: o.Kind, Tasks: n})
	if end == nil {
		end = func([]string, error) {}
	}
	if err := CheckTrace(trace); err != nil {
		end(nil, err)
		return nil, err
	}
	o.Trace = trace
	return end, nil
}
