package worqr

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// TaskInfo describes a task, for inspection.
type TaskInfo struct {
	// ID is the task's id, given when it was enqueued: unique in its queue
	// for ever, even across the queue's deletion. It is the Redis clock in
	// microseconds at the enqueue, in hex (bumped by one when taken), so
	// ids sort in enqueue order when compared as numbers.
	ID string
	// Queue is the queue the task is in.
	Queue string
	// Attempts counts the times the task was started (dequeued).
	Attempts int
	// EnqueuedAt is when the task was enqueued, by the Redis clock (read
	// from its id).
	EnqueuedAt time.Time
	// DueAt is, for a delayed task, when it is due, by the Redis clock.
	DueAt time.Time
	// MaxAttempts is the task's own attempt budget (0: its queue's;
	// negative: no limit).
	MaxAttempts int
	// Weight is the concurrency slots the task holds in flight (see the
	// Weight enqueue option): 1 unless it was enqueued with more.
	Weight int
	// Payload is the task's bytes.
	Payload []byte
}

func taskInfo(queue string, t store.Task) TaskInfo {
	info := TaskInfo{ID: t.ID, Queue: queue, Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, Weight: max(t.Weight, 1), Payload: []byte(t.Payload)}
	if t.ID != "" {
		info.EnqueuedAt = t.EnqueuedAt()
	}
	return info
}

// Queues lists the queues that exist: enqueued to, or served by a worker,
// and not deleted since. It reads the registry, never KEYS or SCAN.
func (c *Client) Queues(ctx context.Context) ([]string, error) {
	if err := c.validateCtx(ctx, "queues"); err != nil {
		return nil, err
	}
	names, err := c.store.Queues(ctx)
	if err != nil {
		return nil, c.fail("queues", "", err)
	}
	return names, nil
}

// QueueLen returns the number of tasks waiting in a queue.
func (c *Client) QueueLen(ctx context.Context, queue string) (int64, error) {
	if err := c.validate(ctx, "queue length", queue); err != nil {
		return 0, err
	}
	n, err := c.store.QueueLen(ctx, queue)
	if err != nil {
		return 0, c.fail("queue length", queue, err)
	}
	return n, nil
}

// Peek returns the payload of the task that would be dequeued next, or
// ErrNoTask.
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

// Range returns the payloads of waiting tasks in dequeue order, from
// position start to stop inclusive, where 0 is the next task out.
// Negative positions count from the back, as in LRANGE (-1 is the last
// task). Tasks returns the same with ids and metadata.
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

// Tasks returns waiting tasks in dequeue order, as Range does, with their
// ids and metadata.
func (c *Client) Tasks(ctx context.Context, queue string, start, stop int64) ([]TaskInfo, error) {
	if err := c.validate(ctx, "range", queue); err != nil {
		return nil, err
	}
	ts, err := c.store.Range(ctx, queue, start, stop)
	if err != nil {
		return nil, c.fail("range", queue, err)
	}
	out := make([]TaskInfo, len(ts))
	for i, t := range ts {
		out[i] = taskInfo(queue, t)
	}
	return out, nil
}

// Delayed returns a queue's delayed tasks in due order (TaskInfo.DueAt),
// from position start to stop inclusive, where 0 is the next due; negative
// positions count from the last.
func (c *Client) Delayed(ctx context.Context, queue string, start, stop int64) ([]TaskInfo, error) {
	if err := c.validate(ctx, "delayed", queue); err != nil {
		return nil, err
	}
	ds, err := c.store.Delayed(ctx, queue, start, stop)
	if err != nil {
		return nil, c.fail("delayed", queue, err)
	}
	out := make([]TaskInfo, len(ds))
	for i, d := range ds {
		out[i] = taskInfo(queue, d.Task)
		out[i].DueAt = time.UnixMicro(d.Due)
	}
	return out, nil
}

// DelayedLen returns the number of a queue's delayed tasks.
func (c *Client) DelayedLen(ctx context.Context, queue string) (int64, error) {
	if err := c.validate(ctx, "delayed length", queue); err != nil {
		return 0, err
	}
	n, err := c.store.DelayedLen(ctx, queue)
	if err != nil {
		return 0, c.fail("delayed length", queue, err)
	}
	return n, nil
}

// ProcessState is what has happened to an in-flight process.
type ProcessState string

// Process states, as stored in Redis.
const (
	// StateActive is a process being worked on.
	StateActive ProcessState = "active"
	// StateCancelled is a process whose task was cancelled.
	StateCancelled ProcessState = "cancelled"
	// StateDeleted is a process whose queue was deleted.
	StateDeleted ProcessState = "deleted"
)

func stateOf(s store.State) ProcessState {
	switch s {
	case store.Cancelled:
		return StateCancelled
	case store.Deleted:
		return StateDeleted
	default:
		return StateActive
	}
}

// ProcessInfo describes an in-flight process, for inspection.
type ProcessInfo struct {
	// ID is the process id (see Process.ID).
	ID    string
	Queue string
	// Owner is the id of the worker that holds it.
	Owner string
	State ProcessState
	// TaskID is the id of its task.
	TaskID string
	// Attempt is the task's attempt this process runs (1 for the first).
	Attempt int
	// Task is the task's payload.
	Task []byte
	// Weight is the concurrency slots it holds (see the Weight enqueue
	// option): 1 unless its task was enqueued with more.
	Weight int
	// Progress is the process's last progress report (see
	// Process.ReportProgress), nil if it made none.
	Progress *TaskProgress
}

func processInfo(queue string, p store.Proc) ProcessInfo {
	info := ProcessInfo{ID: p.PID, Queue: queue, Owner: p.Owner, State: stateOf(p.State), TaskID: p.Task.ID, Attempt: p.Task.Attempts, Task: []byte(p.Task.Payload), Weight: max(p.Task.Weight, 1)}
	if p.Progress != nil {
		tp := taskProgress(p.Task.ID, *p.Progress)
		info.Progress = &tp
	}
	return info
}

// Processes lists the in-flight processes of a queue with their owners,
// in dequeue order.
func (c *Client) Processes(ctx context.Context, queue string) ([]ProcessInfo, error) {
	if err := c.validate(ctx, "processes", queue); err != nil {
		return nil, err
	}
	ps, err := c.store.Procs(ctx, queue)
	if err != nil {
		return nil, c.fail("processes", queue, err)
	}
	out := make([]ProcessInfo, len(ps))
	for i, p := range ps {
		out[i] = processInfo(queue, p)
	}
	sortProcessInfos(out)
	return out, nil
}

// sortProcessInfos orders processes by id, which is dequeue order.
func sortProcessInfos(ps []ProcessInfo) {
	slices.SortFunc(ps, func(a, b ProcessInfo) int {
		return cmp.Compare(store.PIDSeq(a.ID), store.PIDSeq(b.ID))
	})
}

// WorkerInfo describes a live worker.
type WorkerInfo struct {
	ID string
	// LeaseLeftMillis is how long its lease has left, by the Redis clock.
	LeaseLeftMillis int64
}

// Workers lists the workers whose lease is live.
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	if err := c.validateCtx(ctx, "workers"); err != nil {
		return nil, err
	}
	ls, err := c.store.LiveWorkers(ctx)
	if err != nil {
		return nil, c.fail("workers", "", err)
	}
	out := make([]WorkerInfo, len(ls))
	for i, l := range ls {
		out[i] = WorkerInfo{ID: l.ID, LeaseLeftMillis: l.LeftMsec}
	}
	return out, nil
}

// WorkerQueues lists the queues a worker serves.
func (c *Client) WorkerQueues(ctx context.Context, workerID string) ([]string, error) {
	if err := c.validateCtx(ctx, "worker queues"); err != nil {
		return nil, err
	}
	qs, err := c.store.WorkerQueues(ctx, workerID)
	if err != nil {
		return nil, c.fail("worker queues", "", err)
	}
	return qs, nil
}
