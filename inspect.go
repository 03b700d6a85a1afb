package worqr

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/internal/inspect"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// The read side's values are worqrtype's, named again here.
type (
	// TaskInfo describes a task, for inspection (see worqrtype.TaskInfo).
	TaskInfo = worqrtype.TaskInfo
	// ProcessState is what has happened to an in-flight process (see
	// worqrtype.ProcessState).
	ProcessState = worqrtype.ProcessState
	// ProcessInfo describes an in-flight process, for inspection (see
	// worqrtype.ProcessInfo).
	ProcessInfo = worqrtype.ProcessInfo
	// TaskLocation is where FindTask found a task (see
	// worqrtype.TaskLocation).
	TaskLocation = worqrtype.TaskLocation
	// WorkerInfo describes a live worker (see worqrtype.WorkerInfo).
	WorkerInfo = worqrtype.WorkerInfo
	// QueueSlots is how many handler slots a worker has in a queue (see
	// worqrtype.QueueSlots).
	QueueSlots = worqrtype.QueueSlots
	// KeptOutcome is an outcome in a listing (see worqrtype.KeptOutcome).
	KeptOutcome = worqrtype.KeptOutcome
	// ScheduleInfo is what Redis keeps of one periodic schedule of a
	// queue (see worqrtype.ScheduleInfo).
	ScheduleInfo = worqrtype.ScheduleInfo
)

// Process states, as stored in Redis (see worqrtype.StateActive).
const (
	StateActive    = worqrtype.StateActive    // a process being worked on
	StateCancelled = worqrtype.StateCancelled // a process whose task was cancelled
	StateDeleted   = worqrtype.StateDeleted   // a process whose queue was deleted
)

// InspectOption changes what the inspection calls (Tasks, Delayed,
// Processes, DeadLetters, Outcomes and FindTask) return.
type InspectOption func(*inspectOptions)

type inspectOptions = inspect.Options

// PayloadPrefix makes an inspection call return only the first n bytes of
// each payload (n = 0: none), cut in Redis, so that the reply, and the
// caller's memory, grow with n and not with the payloads: for listings
// that show a preview. TaskInfo.Size (ProcessInfo.TaskSize) still gives
// the whole size. A prefix may end inside a UTF-8 sequence. n must not be
// negative (ErrInvalidOptions).
func PayloadPrefix(n int) InspectOption {
	return func(o *inspectOptions) { o.Cut = n }
}

// Queues lists the queues that exist: enqueued to, or served by a worker,
// and not deleted since. It reads the registry, never KEYS or SCAN.
func (c *Client) Queues(ctx context.Context) ([]string, error) {
	if err := c.core.ValidateCtx(ctx, "queues"); err != nil {
		return nil, err
	}
	names, err := c.core.Store.Queues(ctx)
	if err != nil {
		return nil, c.core.Fail("queues", "", err)
	}
	return names, nil
}

// QueueLen returns the number of tasks waiting in a queue, those waiting
// in groups (see Group) included.
func (c *Client) QueueLen(ctx context.Context, queue string) (int64, error) {
	if err := c.core.Validate(ctx, "queue length", queue); err != nil {
		return 0, err
	}
	n, err := c.core.Store.QueueLen(ctx, queue)
	if err != nil {
		return 0, c.core.Fail("queue length", queue, err)
	}
	return n, nil
}

// Peek returns the payload of the first waiting task in Range's order, or
// ErrNoTask: the task that would be dequeued next, unless tasks wait in
// groups (see Range).
func (c *Client) Peek(ctx context.Context, queue string) ([]byte, error) {
	tasks, err := c.Range(ctx, queue, 0, 0)
	if err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("worqr: peek %q: %w", queue, ErrNoTask)
	}
	return tasks[0], nil
}

// Range returns the payloads of waiting tasks, from position start to stop
// inclusive, where 0 is the first listed. Negative positions count from
// the back, as in LRANGE (-1 is the last task). Tasks returns the same
// with ids and metadata.
//
// The order: first the tasks without a group, in dequeue order (high,
// normal, then low priority; 0 is the next out), then the tasks waiting
// in groups (see Group), group by group, each group's tasks in the order
// they are to start; dequeues interleave the groups, so the grouped part
// is not dequeue order across groups (docs/flow-control.md tells the
// order of the groups). A call reads only the positions it asks for:
// reaching a position among the grouped tasks costs O(log N).
func (c *Client) Range(ctx context.Context, queue string, start, stop int64) ([][]byte, error) {
	tasks, err := c.Tasks(ctx, queue, start, stop)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(tasks))
	for i, t := range tasks {
		out[i] = t.Payload
	}
	return out, nil
}

// Tasks returns waiting tasks in Range's order, with their ids and
// metadata (TaskInfo.Group names a grouped task's group). With PayloadPrefix their payloads are cut in Redis.
func (c *Client) Tasks(ctx context.Context, queue string, start, stop int64, opts ...InspectOption) ([]TaskInfo, error) {
	if err := c.core.Validate(ctx, "range", queue); err != nil {
		return nil, err
	}
	cut, err := inspect.Cut("range", queue, opts)
	if err != nil {
		return nil, err
	}
	ts, err := c.core.Store.Range(ctx, queue, start, stop, cut)
	if err != nil {
		return nil, c.core.Fail("range", queue, err)
	}
	return inspect.Each(ts, func(t store.Task) TaskInfo { return t.Info(queue) }), nil
}

// Delayed returns a queue's delayed tasks in due order (TaskInfo.DueAt),
// from position start to stop inclusive, where 0 is the next due; negative
// positions count from the last. With PayloadPrefix their payloads are
// cut in Redis.
func (c *Client) Delayed(ctx context.Context, queue string, start, stop int64, opts ...InspectOption) ([]TaskInfo, error) {
	if err := c.core.Validate(ctx, "delayed", queue); err != nil {
		return nil, err
	}
	cut, err := inspect.Cut("delayed", queue, opts)
	if err != nil {
		return nil, err
	}
	ds, err := c.core.Store.Delayed(ctx, queue, start, stop, cut)
	if err != nil {
		return nil, c.core.Fail("delayed", queue, err)
	}
	return inspect.Each(ds, func(d store.DelayedTask) TaskInfo { return d.Info(queue) }), nil
}

// DelayedLen returns the number of a queue's delayed tasks.
func (c *Client) DelayedLen(ctx context.Context, queue string) (int64, error) {
	if err := c.core.Validate(ctx, "delayed length", queue); err != nil {
		return 0, err
	}
	n, err := c.core.Store.DelayedLen(ctx, queue)
	if err != nil {
		return 0, c.core.Fail("delayed length", queue, err)
	}
	return n, nil
}

// Processes lists the in-flight processes of a queue with their owners,
// in dequeue order. With PayloadPrefix their tasks' payloads are cut in
// Redis.
func (c *Client) Processes(ctx context.Context, queue string, opts ...InspectOption) ([]ProcessInfo, error) {
	if err := c.core.Validate(ctx, "processes", queue); err != nil {
		return nil, err
	}
	cut, err := inspect.Cut("processes", queue, opts)
	if err != nil {
		return nil, err
	}
	ps, err := c.core.Store.Procs(ctx, queue, cut)
	if err != nil {
		return nil, c.core.Fail("processes", queue, err)
	}
	inspect.SortProcs(ps)
	return inspect.Each(ps, func(p store.Proc) ProcessInfo { return p.Info(queue) }), nil
}

// FindTask looks a task up by id in a queue: in flight, delayed, dead or
// waiting (its retained outcome is TaskResult's). Tasks are not indexed
// by id, so this is a scan, O(n) in the tasks it looks at, done in one
// script on the server, which returns only the task found, its payload
// cut as PayloadPrefix says: the caller's memory does not grow with the
// queue or its payloads. Redis serves nothing else meanwhile, so the scan
// is bounded: in each of the four places it looks at 20,000 tasks and 16
// MiB of them at most, and past a bound sets TaskLocation.Partial
// (docs/manual.md tells its cost, and how grouped tasks are looked for);
// with Partial, the history may lack the latest attempt, kept in the
// task's entry.
// An unknown id is not an error: nothing is found. An empty id is
// ErrInvalidOptions.
func (c *Client) FindTask(ctx context.Context, queue, id string, opts ...InspectOption) (TaskLocation, error) {
	if err := c.core.Validate(ctx, "find task", queue); err != nil {
		return TaskLocation{}, err
	}
	if id == "" {
		return TaskLocation{}, fmt.Errorf("worqr: find task %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	cut, err := inspect.Cut("find task", queue, opts)
	if err != nil {
		return TaskLocation{}, err
	}
	f, err := c.core.Store.FindTask(ctx, queue, id, cut, inspect.FindBounds)
	if err != nil {
		return TaskLocation{}, c.core.Fail("find task", queue, err)
	}
	return f.Location(queue), nil
}

// Workers lists the workers whose lease is live.
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	if err := c.core.ValidateCtx(ctx, "workers"); err != nil {
		return nil, err
	}
	ls, err := c.core.Store.LiveWorkers(ctx)
	if err != nil {
		return nil, c.core.Fail("workers", "", err)
	}
	return inspect.Each(ls, store.WorkerLease.Info), nil
}

// WorkerQueues lists the queues a worker serves.
func (c *Client) WorkerQueues(ctx context.Context, workerID string) ([]string, error) {
	if err := c.core.ValidateCtx(ctx, "worker queues"); err != nil {
		return nil, err
	}
	qs, err := c.core.Store.WorkerQueues(ctx, workerID)
	if err != nil {
		return nil, c.core.Fail("worker queues", "", err)
	}
	return qs, nil
}

// maxOutcomesLimit bounds one Outcomes call.
const maxOutcomesLimit = 1000

// Outcomes lists the outcomes a queue keeps (of tasks enqueued with
// Retain that ended, until their retention runs out), latest to expire
// first, so the latest to end first among tasks retained alike: up to
// limit of them (1 to 1,000), after skipping offset. Offsets shift as
// outcomes come and expire, as DeadLetters' do. With PayloadPrefix each
// result or error is cut in Redis.
func (c *Client) Outcomes(ctx context.Context, queue string, offset, limit int, opts ...InspectOption) ([]KeptOutcome, error) {
	if err := c.core.Validate(ctx, "outcomes", queue); err != nil {
		return nil, err
	}
	if offset < 0 || limit <= 0 || limit > maxOutcomesLimit {
		return nil, fmt.Errorf("worqr: outcomes %q: offset %d, limit %d: %w", queue, offset, limit, ErrInvalidOptions)
	}
	cut, err := inspect.Cut("outcomes", queue, opts)
	if err != nil {
		return nil, err
	}
	rs, err := c.core.Store.Outcomes(ctx, queue, offset, limit, cut)
	if err != nil {
		return nil, c.core.Fail("outcomes", queue, err)
	}
	return inspect.Each(rs, func(r store.KeptOutcome) KeptOutcome { return r.Kept(queue) }), nil
}

// FindOutcome returns the outcome a queue keeps for a task, by id, as
// Outcomes lists it: TaskResult with, given PayloadPrefix, its Result or
// its Error cut in Redis and Size the whole size of either. It returns
// ErrNoTask when no outcome is kept (the task has not ended, did not ask
// to be retained, or its retention ran out); an empty id is
// ErrInvalidOptions.
func (c *Client) FindOutcome(ctx context.Context, queue, id string, opts ...InspectOption) (KeptOutcome, error) {
	if err := c.core.Validate(ctx, "find outcome", queue); err != nil {
		return KeptOutcome{}, err
	}
	if id == "" {
		return KeptOutcome{}, fmt.Errorf("worqr: find outcome %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	cut, err := inspect.Cut("find outcome", queue, opts)
	if err != nil {
		return KeptOutcome{}, err
	}
	r, ok, err := c.core.Store.OutcomeCut(ctx, queue, id, cut)
	if err != nil {
		return KeptOutcome{}, c.core.Fail("find outcome", queue, err)
	}
	if !ok {
		return KeptOutcome{}, fmt.Errorf("worqr: find outcome %q %s: %w", queue, id, ErrNoTask)
	}
	return r.Kept(queue), nil
}

// Schedules lists a queue's periodic schedules, by name.
func (c *Client) Schedules(ctx context.Context, queue string) ([]ScheduleInfo, error) {
	if err := c.core.Validate(ctx, "schedules", queue); err != nil {
		return nil, err
	}
	ss, err := c.core.Store.Schedules(ctx, queue)
	if err != nil {
		return nil, c.core.Fail("schedules", queue, err)
	}
	return inspect.Each(ss, func(s store.ScheduleState) ScheduleInfo { return s.Info(queue) }), nil
}
