package worqr

import (
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/controls"
	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/internal/inspect"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// MaxAggregateKeyLen is the longest aggregation key, in bytes (see
// Aggregate).
const MaxAggregateKeyLen = 1024

// Aggregate gathers the tasks under an aggregation key instead of queuing
// them: the tasks enqueued with the same key on the same queue wait in
// its gathering until MaxSize of them have arrived, or MaxDelay has
// passed since the first (the queue's AggregateSettings), and then go to
// the back of the queue together as one aggregated task, whose handler
// reads them with Process.Aggregated. Each keeps the id its enqueue
// returned, which Aggregated reports with its payload. A gathering is
// flushed once, by one script, never lost, with no leader; MaxDelay runs
// only while a worker serves the queue. The aggregated task takes the
// options of the first task of its gathering and is one task from then
// on (CancelTask takes its id, which Process.TaskID gives). Tasks still
// gathering are not waiting tasks: QueueInfo counts them apart
// (Gatherings, Gathering). docs/handlers.md tells how gatherings are
// flushed, sized and inspected.
//
// A key is 1 to MaxAggregateKeyLen bytes, without a NUL byte. Aggregate
// cannot be combined with AtFront, In, At, Unique, UniqueFor, Retain,
// Group or Persistent, nor with items' unique keys (EnqueueBatchItems),
// nor given to a workflow's step (ErrInvalidOptions): a task that waits to
// be gathered has none of those to honour, and the aggregated task takes
// the first member's header, so one member's mark would be another's.
//
// Aggregation is unrelated to Group, which limits a key's tasks' flow
// without joining them.
func Aggregate(key string) EnqueueOption {
	return func(o *enqueueOptions) { o.Aggregate, o.AggregateSet = key, true }
}

// Default aggregation settings, for a queue without its own (see
// SetAggregation).
const (
	DefaultAggregateMaxSize  = 100
	DefaultAggregateMaxDelay = time.Minute
)

// AggregateSettings say when a queue's gatherings are flushed (see
// worqrtype.AggregateSettings).
type AggregateSettings = worqrtype.AggregateSettings

// SetAggregation sets a queue's aggregation settings for the whole fleet,
// kept in Redis; zero fields put back the defaults. A gathering already
// open keeps the deadline it got from its first task; one holding
// MaxSize tasks or more is flushed by its next task, MaxSize at a time.
// MaxSize must be in 0..MaxLimit and MaxDelay a whole number of
// milliseconds in 0..MaxLimit ms (ErrInvalidOptions). A queue that does
// not exist gives ErrNoQueue, unless CreateQueue is given.
func (c *Client) SetAggregation(ctx context.Context, queue string, s AggregateSettings, opts ...ControlOption) error {
	if s.MaxSize < 0 || int64(s.MaxSize) > MaxLimit || s.MaxDelay < 0 || s.MaxDelay%time.Millisecond != 0 || s.MaxDelay.Milliseconds() > MaxLimit {
		return fmt.Errorf("worqr: set aggregation %q: max size %d, max delay %v (the size in 0..%d, the delay whole milliseconds): %w", queue, s.MaxSize, s.MaxDelay, int64(MaxLimit), ErrInvalidOptions)
	}
	return controls.Run(ctx, c.core.Validate, "set aggregation", queue, opts, func(create bool) error {
		return c.core.Store.ControlAggregation(ctx, queue, s.MaxSize, s.MaxDelay, create)
	})
}

// AggregateMember is one task an aggregated task gathers (see
// worqrtype.AggregateMember).
type AggregateMember = worqrtype.AggregateMember

// Aggregated returns the tasks an aggregated task gathers (see
// Aggregate), in the order they were enqueued, and true; for any other
// task, nil and false. The members' payloads share the process's task
// bytes: they are the handler's to read, not to keep past its return
// unless copied.
//
// Process.Task holds them encoded, each as
// '<task id>,<payload length, decimal>:<payload>', one after the other.
func (p *Process) Aggregated() ([]AggregateMember, bool) {
	if p.rec.Aggregated == 0 {
		return nil, false
	}
	return store.ParseAggregated(p.rec.Task)
}

// AggregatedHandler is a handler of an aggregated task's members decoded
// into values of type T (see TypedAggregated).
type AggregatedHandler[T any] func(ctx context.Context, p *Process, members []T) error

// TypedAggregated is a Handler of aggregated tasks (see Aggregate) that
// decodes each member's payload with codec (JSON when nil) and calls h
// with them, in the order they were enqueued. A task that is not
// aggregated is taken as a gathering of one. A member that does not decode
// sends the whole aggregated task to the dead letters at once, with reason
// ReasonDecode.
func TypedAggregated[T any](codec Codec[T], h AggregatedHandler[T]) Handler {
	if h == nil {
		return nil
	}
	if codec == nil {
		codec = JSON[T]{}
	}
	return func(ctx context.Context, p *Process) error {
		ms, ok := p.Aggregated()
		if !ok {
			ms = []AggregateMember{{TaskID: p.TaskID(), Task: p.Task()}}
		}
		vs := make([]T, len(ms))
		for i, m := range ms {
			if err := codec.Unmarshal(m.Task, &vs[i]); err != nil {
				return WithReason(ReasonDecode, Permanent(fmt.Errorf("%w: task %s into %s: %w", ErrDecode, m.TaskID, enqueue.TypeName[T](), err)))
			}
		}
		return h(ctx, p, vs)
	}
}

// HandleAggregatedJSON serves a queue, as Worker.Handle does, with a
// handler of aggregated tasks whose members are JSON values of type T
// (see TypedAggregated, EnqueueJSON with Aggregate).
func HandleAggregatedJSON[T any](ctx context.Context, w *Worker, queue string, h AggregatedHandler[T], opts HandleOptions) error {
	return w.Handle(ctx, queue, TypedAggregated(JSON[T]{}, h), opts)
}

// MaxGatheringsRead bounds the gatherings one Gatherings call returns.
const MaxGatheringsRead = 1000

// GatheringInfo is one open gathering of a queue, for operators (see
// worqrtype.GatheringInfo).
type GatheringInfo = worqrtype.GatheringInfo

// Gatherings lists a queue's open gatherings (see Aggregate), the next to
// be flushed by its deadline first: up to limit of them from position
// start (0 is the next to flush), with how many are open. A page costs
// O(limit log N) and reads no task: a gathering's tasks and bytes are
// counted, not read. start must be 0 or more and limit in
// 1..MaxGatheringsRead (ErrInvalidOptions).
func (c *Client) Gatherings(ctx context.Context, queue string, start int64, limit int) ([]GatheringInfo, int64, error) {
	const op = "gatherings"
	if err := c.core.Validate(ctx, op, queue); err != nil {
		return nil, 0, err
	}
	if start < 0 || limit < 1 || limit > MaxGatheringsRead {
		return nil, 0, fmt.Errorf("worqr: %s %q: start %d, limit %d (start 0 or more, limit in 1..%d): %w", op, queue, start, limit, MaxGatheringsRead, ErrInvalidOptions)
	}
	gs, open, err := c.core.Store.Gatherings(ctx, queue, start, limit)
	if err != nil {
		return nil, 0, c.core.Fail(op, queue, err)
	}
	return inspect.Each(gs, store.Gathering.Info), open, nil
}
