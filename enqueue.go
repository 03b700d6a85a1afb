package worqr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// EnqueueOption changes how Enqueue and EnqueueBatch add tasks.
type EnqueueOption func(*enqueueOptions)

// enqueueOptions are the options of one Enqueue or EnqueueBatch call.
type enqueueOptions = enqueue.Options

// MaxKindLen is the longest task kind, in bytes (see Kind).
const MaxKindLen = 64

// The limits are internal/enqueue's, which checks them: a constant
// conversion of a negative difference to uint does not compile, so these
// fail the build when a limit here and its check there part.
const (
	_ = uint(MaxKindLen-enqueue.MaxKindLen) + uint(enqueue.MaxKindLen-MaxKindLen)
	_ = uint(MaxGroupLen-enqueue.MaxGroupLen) + uint(enqueue.MaxGroupLen-MaxGroupLen)
	_ = uint(MaxAggregateKeyLen-enqueue.MaxAggregateKeyLen) + uint(enqueue.MaxAggregateKeyLen-MaxAggregateKeyLen)
	_ = uint(MaxWeight-enqueue.MaxWeight) + uint(enqueue.MaxWeight-MaxWeight)
)

// AtFront adds the tasks at the front of the queue, to be dequeued next
// (a batch keeps its order there), instead of at the back. A delayed task
// joins the back when it is due.
func AtFront() EnqueueOption { return func(o *enqueueOptions) { o.Front = true } }

// In delays the tasks: they wait in the queue's delayed set and join the
// back of the queue d after the enqueue, by the Redis clock, never
// earlier (docs/scheduling.md tells how, without polling).
func In(d time.Duration) EnqueueOption { return func(o *enqueueOptions) { o.In = d } }

// At delays the tasks until t, as In does; a time in the past means now,
// and with In as well the later wins (docs/scheduling.md tells the
// clocks).
func At(t time.Time) EnqueueOption { return func(o *enqueueOptions) { o.At = t } }

// MaxAttempts gives the tasks an attempt budget of their own, overriding
// the queue's RetryPolicy.MaxAttempts: a task whose n-th attempt fails
// goes to the dead letters (see RetryPolicy.MaxAttempts for what counts).
// As in RetryPolicy, negative means no limit (the task is retried until
// it succeeds, fails with a Permanent error, or is dead-lettered by
// hand), and 0 means the queue's budget.
func MaxAttempts(n int) EnqueueOption { return func(o *enqueueOptions) { o.MaxAttempts = n } }

// HighPriority puts the tasks at their queue's high priority: dequeues
// take high-priority tasks first, then those of normal priority (without
// HighPriority or LowPriority), then low-priority ones, FIFO within a
// priority. The last of HighPriority and LowPriority given wins.
// docs/queue-controls.md tells what a priority costs and risks.
func HighPriority() EnqueueOption { return func(o *enqueueOptions) { o.Priority = "h" } }

// LowPriority puts the tasks at their queue's low priority: they are
// dequeued after every high and normal one (see HighPriority).
func LowPriority() EnqueueOption { return func(o *enqueueOptions) { o.Priority = "l" } }

// MaxWeight is the largest task weight (see Weight).
const MaxWeight = 1 << 20

// Weight gives the tasks a weight, 0 to MaxWeight: each holds n of its
// queue's concurrency slots (SetConcurrency) while in flight, instead of
// one; 0 and 1 mean one (ErrInvalidOptions otherwise). Only the fleet-wide limit counts it; Task
// weights in docs/queue-controls.md tells how weighted tasks start.
func Weight(n int) EnqueueOption {
	if n == 1 {
		n = 0 // the default: such calls can still be joined (see Enqueue)
	}
	return func(o *enqueueOptions) { o.Weight = n }
}

// Unique makes the task unique by key while it lives: if a task enqueued
// with the same key is waiting, delayed or in flight, nothing is added and
// Enqueue returns that task's id with an error wrapping ErrDuplicate. The
// key is given up when the task ends (docs/queue-controls.md tells the
// rest). Enqueue only: EnqueueBatch refuses it.
func Unique(key string) EnqueueOption {
	return func(o *enqueueOptions) { o.Unique, o.UniqueTTL, o.UniqueSet = key, 0, true }
}

// UniqueFor is Unique for ttl from the enqueue, whether the task has ended
// or not (at most one task per key per period).
func UniqueFor(key string, ttl time.Duration) EnqueueOption {
	return func(o *enqueueOptions) { o.Unique, o.UniqueTTL, o.UniqueSet = key, ttl, true }
}

// Retain keeps each task's outcome for d after it ends, finished (with
// the result its handler set: Process.SetResult) or dead (with its error):
// Client.TaskResult reads it by id, and Client.Wait waits for it. Nothing
// is kept for tasks without it, and Wait returns ErrNotRetained for them
// at once.
func Retain(d time.Duration) EnqueueOption { return func(o *enqueueOptions) { o.Retain = d } }

// Persistent marks the tasks as persistent ones, whose handlers hold them
// until their context ends (an open connection, a subscription): the
// poison-pill guard (Options.PoisonLimit) never counts their holders'
// deaths. A task requeued from the dead letters loses the mark.
// Persistent cannot be combined with Aggregate (ErrInvalidOptions).
// docs/persistent-tasks.md tells the rest.
func Persistent() EnqueueOption { return func(o *enqueueOptions) { o.Persistent = true } }

// Kind gives the tasks a kind: a short name of what they are, such as
// "email.welcome", which a Router serving their queue dispatches on
// (Process.Kind). A kind is 1 to MaxKindLen bytes of ASCII letters,
// digits and "-_./" (ErrInvalidOptions otherwise); "" means none, as
// without the option. Kinds in docs/enqueueing.md tells the rest.
func Kind(name string) EnqueueOption { return func(o *enqueueOptions) { o.Kind = name } }

// Timeout bounds the run of each attempt of the tasks, overriding the
// queue's HandleOptions.Timeout (whole milliseconds; at least 1 ms).
func Timeout(d time.Duration) EnqueueOption { return func(o *enqueueOptions) { o.Timeout = d } }

// Enqueue adds a task at the back of a queue, wakes its workers, and
// returns the task's id: unique in its queue, for ever (see TaskInfo.ID).
// Overlapping calls on a queue without options (or with only a Kind) go
// out as one script call, in the order they arrived (docs/enqueueing.md).
//
// If Enqueue returns an error wrapping ErrUnavailable the task may or may
// not have been queued (the reply was lost); retrying can queue it twice.
// The same holds when ctx ends while the call waits for its reply.
func (c *Client) Enqueue(ctx context.Context, queue string, task []byte, opts ...EnqueueOption) (id string, err error) {
	if err := c.core.Validate(ctx, "enqueue", queue); err != nil {
		return "", err
	}
	if len(task) > c.core.MaxTaskSize {
		return "", fmt.Errorf("worqr: enqueue %q: %w", queue, c.tooLarge(-1, len(task)))
	}
	o := enqueue.Collect(opts)
	if err := o.Check(); err != nil {
		return "", fmt.Errorf("worqr: enqueue %q: %w", queue, err)
	}
	end, err := enqueue.Trace(ctx, c.core.Tracer, queue, &o, 1)
	if err != nil {
		return "", fmt.Errorf("worqr: enqueue %q: %w", queue, err)
	}
	defer func() {
		var ids []string
		if id != "" {
			ids = []string{id}
		}
		end(ids, err)
	}()
	if !o.Plain() && !o.KindOnly() {
		ids, err := c.core.Enqueue(ctx, queue, [][]byte{task}, o)
		if errors.Is(err, ErrDuplicate) {
			return ids[0], err
		}
		if err != nil {
			return "", err
		}
		return ids[0], nil
	}
	if o.Plain() {
		id, err = c.core.Enqueues.Do(ctx, queue, task)
	} else {
		// A kind never holds a NUL byte: the key splits at the first.
		id, err = c.core.KindEnqueues.Do(ctx, o.Kind+"\x00"+queue, task)
	}
	if err != nil {
		if err == ctx.Err() { // gave up waiting for a batch
			return "", fmt.Errorf("worqr: enqueue %q: %w", queue, err)
		}
		return "", err
	}
	return id, nil
}

// tooLarge is the error for a task of size bytes (the index-th of a
// batch, unless index is negative) over the client's MaxTaskSize.
func (c *Client) tooLarge(index, size int) error {
	return enqueue.TooLarge{Index: index, Size: size, Limit: c.core.MaxTaskSize}
}

// EnqueueBatch adds tasks, in order, at the back of a queue in one round
// trip, wakes its workers once per 1,000 tasks, and returns the tasks'
// ids in the same order. Either every task is checked and sent or, on a
// validation error, none is. On ErrUnavailable the first tasks of the
// batch (whole calls of 1,000, in order) may have been queued, never
// later ones without them.
func (c *Client) EnqueueBatch(ctx context.Context, queue string, tasks [][]byte, opts ...EnqueueOption) ([]string, error) {
	if err := c.core.Validate(ctx, "enqueue", queue); err != nil {
		return nil, err
	}
	for i, t := range tasks {
		if len(t) > c.core.MaxTaskSize {
			return nil, fmt.Errorf("worqr: enqueue %q: %w", queue, c.tooLarge(i, len(t)))
		}
	}
	o, err := enqueue.Batch(queue, opts, "a unique key fits one task; use Enqueue")
	if err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return []string{}, nil
	}
	end, err := enqueue.Trace(ctx, c.core.Tracer, queue, &o, len(tasks))
	if err != nil {
		return nil, fmt.Errorf("worqr: enqueue %q: %w", queue, err)
	}
	ids, err := c.core.Enqueue(ctx, queue, tasks, o)
	end(ids, err)
	return ids, err
}

// BatchItem is one task of EnqueueBatchItems: its payload and,
// optionally, a unique key of its own.
type BatchItem struct {
	Payload []byte
	// UniqueKey makes the task unique by key, as Unique does for
	// Enqueue: "" for none.
	UniqueKey string
	// UniqueFor holds UniqueKey for this long from the enqueue, whether
	// the task has ended or not, as the UniqueFor option does; 0 holds it
	// while the task lives.
	UniqueFor time.Duration
}

// BatchResult is what EnqueueBatchItems did with one item (see
// worqrtype.BatchResult).
type BatchResult = worqrtype.BatchResult

// EnqueueBatchItems is EnqueueBatch for tasks that may each have a unique
// key (BatchItem.UniqueKey): an item whose key is held is left out, and
// its result is the holder's id with Duplicate set, while the others are
// added. A batch with duplicates is no error. It returns one result per
// item, in order. opts apply to every item; Unique and UniqueFor are
// refused (ErrInvalidOptions): the keys go in the items, and so is
// Aggregate with any item's key. An item with a negative UniqueFor, or a
// payload over the limit, fails the whole call before anything is sent
// (ErrInvalidOptions, ErrTaskTooLarge, naming the item's index). As in
// EnqueueBatch, each 1,000 items are one atomic script call, and on
// ErrUnavailable the first calls may have run: a retry of the whole batch
// finds their keys held (Batches in docs/enqueueing.md).
func (c *Client) EnqueueBatchItems(ctx context.Context, queue string, items []BatchItem, opts ...EnqueueOption) ([]BatchResult, error) {
	if err := c.core.Validate(ctx, "enqueue", queue); err != nil {
		return nil, err
	}
	tasks := make([][]byte, len(items))
	var keys []store.UniqueKey
	for i, it := range items {
		if len(it.Payload) > c.core.MaxTaskSize {
			return nil, fmt.Errorf("worqr: enqueue %q: %w", queue, c.tooLarge(i, len(it.Payload)))
		}
		if it.UniqueFor < 0 {
			return nil, fmt.Errorf("worqr: enqueue %q: item %d: negative UniqueFor %v: %w", queue, i, it.UniqueFor, ErrInvalidOptions)
		}
		tasks[i] = it.Payload
		if it.UniqueKey != "" {
			if keys == nil {
				keys = make([]store.UniqueKey, len(items))
			}
			keys[i] = store.UniqueKey{Key: it.UniqueKey, TTL: it.UniqueFor}
		}
	}
	o, err := enqueue.Batch(queue, opts, "unique keys go in the items (BatchItem.UniqueKey)")
	if err != nil {
		return nil, err
	}
	if o.AggregateSet && keys != nil {
		// An aggregated task ends under an id of its own: its members'
		// keys, held by their ids, would never be given up.
		return nil, fmt.Errorf("worqr: enqueue %q: Aggregate cannot be combined with items' unique keys: %w", queue, ErrInvalidOptions)
	}
	if len(items) == 0 {
		return []BatchResult{}, nil
	}
	end, err := enqueue.Trace(ctx, c.core.Tracer, queue, &o, len(items))
	if err != nil {
		return nil, fmt.Errorf("worqr: enqueue %q: %w", queue, err)
	}
	ids, dup, err := c.core.Store.EnqueueKeyed(ctx, queue, tasks, keys, o.Args())
	if err != nil {
		err = c.core.Fail("enqueue", queue, err)
		c.core.Obs.Enqueued(ctx, EnqueueEvent{Queue: queue, Err: err})
		end(nil, err)
		return nil, err
	}
	results := make([]BatchResult, len(items))
	added := make([]string, 0, len(items))
	for i, id := range ids {
		results[i] = BatchResult{ID: id, Duplicate: dup[i]}
		if !dup[i] {
			added = append(added, id)
		}
	}
	c.core.Obs.Enqueued(ctx, EnqueueEvent{Queue: queue, TaskIDs: added})
	end(added, nil)
	return results, nil
}

// CancelResult says what Cancel found (see worqrtype.CancelResult).
type CancelResult = worqrtype.CancelResult

// CancelTask cancels the task with this id: removes it if it waits or is
// delayed, or marks its process cancelled if it is in flight and
// publishes a cancel event (docs/cancelling.md tells how its holder and a
// Wait learn of it, and docs/workflows.md what it does to a step). A task
// that already ended, or an unknown id, gives a zero result. An empty id
// is ErrInvalidOptions.
func (c *Client) CancelTask(ctx context.Context, queue, id string) (CancelResult, error) {
	n, err := c.core.CancelTask(ctx, queue, id)
	return CancelResult(n), err
}

// Cancel cancels every task of a queue whose payload is task: waiting and
// delayed ones are removed, in-flight ones are marked cancelled and their
// holders get a cancel event, as CancelTask describes. It reads every
// waiting and delayed task, those waiting in groups (see Group) too; a
// group none of whose tasks waits any more leaves the groups' turns.
func (c *Client) Cancel(ctx context.Context, queue string, task []byte) (CancelResult, error) {
	if err := c.core.Validate(ctx, "cancel", queue); err != nil {
		return CancelResult{}, err
	}
	if len(task) > c.core.MaxTaskSize {
		return CancelResult{}, fmt.Errorf("worqr: cancel %q: %w", queue, c.tooLarge(-1, len(task)))
	}
	n, notices, err := c.core.Store.CancelPayload(ctx, queue, task)
	if err != nil {
		return CancelResult{}, c.core.Fail("cancel", queue, err)
	}
	c.core.Carrier.Cancelled(ctx, queue, notices)
	return CancelResult(n), nil
}

// RunNow moves a delayed task, a retry waiting out its backoff or one
// enqueued to run later, to the back of its queue now, and wakes the
// queue's workers. It reports false, with no error, when the queue has no
// delayed task of that id (it ran already, or was never delayed). The
// delayed set is not indexed by id: this is a scan of it, in one script.
func (c *Client) RunNow(ctx context.Context, queue, id string) (bool, error) {
	if err := c.core.Validate(ctx, "run now", queue); err != nil {
		return false, err
	}
	if id == "" {
		return false, fmt.Errorf("worqr: run now %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	ok, err := c.core.Store.RunNow(ctx, queue, id)
	if err != nil {
		return false, c.core.Fail("run now", queue, err)
	}
	return ok, nil
}

// WaitingSelection chooses the waiting tasks CancelWaiting removes: those
// with IDs if any are given (at most MaxCancelIDs), else those of Kind if
// it is set, else all of them.
type WaitingSelection struct {
	IDs  []string
	Kind string
}

// MaxCancelIDs bounds WaitingSelection.IDs.
const MaxCancelIDs = 1000

// cancelWaitingLimit bounds the entries one CancelWaiting looks at.
const cancelWaitingLimit = 10000

// CancelWaiting removes waiting tasks of a queue in bulk, in one script:
// those sel chooses, each as CancelTask removes one (its unique key
// freed; a Wait for it returns ErrTaskCancelled). Delayed and in-flight
// tasks are left alone. It looks at 10,000 waiting tasks at most, in
// dequeue order, so that Redis is held up for a bounded time: more
// reports that it stopped there, leaving the tasks further back
// unlooked at (a call without IDs or Kind, which removes all it looks
// at, goes on where the last stopped). It returns how many it removed.
func (c *Client) CancelWaiting(ctx context.Context, queue string, sel WaitingSelection) (removed int64, more bool, err error) {
	if err := c.core.Validate(ctx, "cancel waiting", queue); err != nil {
		return 0, false, err
	}
	if len(sel.IDs) > MaxCancelIDs {
		return 0, false, fmt.Errorf("worqr: cancel waiting %q: %d ids, limit %d: %w", queue, len(sel.IDs), MaxCancelIDs, ErrInvalidOptions)
	}
	for _, id := range sel.IDs {
		if id == "" {
			return 0, false, fmt.Errorf("worqr: cancel waiting %q: empty task id: %w", queue, ErrInvalidOptions)
		}
	}
	if err := enqueue.CheckKind(sel.Kind); err != nil {
		return 0, false, fmt.Errorf("worqr: cancel waiting %q: %w", queue, err)
	}
	removed, more, notices, err := c.core.Store.CancelWaiting(ctx, queue, store.CancelSelection{IDs: sel.IDs, Kind: sel.Kind}, cancelWaitingLimit)
	if err != nil {
		return removed, more, c.core.Fail("cancel waiting", queue, err)
	}
	c.core.Carrier.Cancelled(ctx, queue, notices)
	return removed, more, nil
}

// DeleteQueue removes a queue's waiting tasks and the queue itself, and
// publishes a delete event. Processes already in flight can still finish;
// requeuing them, or reclaiming them from a dead worker, drops them
// instead of bringing the queue back. It returns the number of waiting
// tasks dropped. Its stats go too. A later Enqueue creates the queue
// afresh. Workflow steps whose tasks it drops, waiting or in flight, end
// cancelled, and their workflows are told before it returns (see
// docs/workflows.md).
func (c *Client) DeleteQueue(ctx context.Context, queue string) (int64, error) {
	if err := c.core.Validate(ctx, "delete", queue); err != nil {
		return 0, err
	}
	n, notices, err := c.core.Store.DeleteQueue(ctx, queue)
	if err != nil {
		return 0, c.core.Fail("delete", queue, err)
	}
	c.core.Carrier.Cancelled(ctx, queue, notices)
	return n, nil
}
