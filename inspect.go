package worqr

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/inspect"
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
	// Kind is the task's kind (see the Kind enqueue option), "" if it has
	// none.
	Kind string
	// Group is the task's group key (see Group), "" if it has none.
	Group string
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
	// Payload is the task's bytes: their first bytes only when the call
	// was given PayloadPrefix.
	Payload []byte
	// Size is the payload's whole size in bytes: len(Payload), unless
	// PayloadPrefix cut it.
	Size int
	// Workflow and Step are the workflow whose step the task runs and the
	// step's name (see Client.EnqueueWorkflow), "" for a task that is no
	// workflow's step.
	Workflow, Step string
}

func taskInfo(queue string, t store.Task) TaskInfo {
	info := TaskInfo{ID: t.ID, Queue: queue, Kind: t.Kind, Group: t.Group, Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, Weight: max(t.Weight, 1), Payload: []byte(t.Payload), Size: t.Size}
	info.Workflow, info.Step, _ = strings.Cut(t.Flow, ".")
	if t.ID != "" {
		info.EnqueuedAt = t.EnqueuedAt()
	}
	return info
}

// InspectOption changes what the inspection calls (Tasks, Delayed,
// Processes, DeadLetters, Outcomes and FindTask) return.
type InspectOption func(*inspectOptions)

type inspectOptions struct {
	cut int // bytes of each payload; < 0: whole
}

// PayloadPrefix makes an inspection call return only the first n bytes of
// each payload (n = 0: none), cut in Redis, so that the reply, and the
// caller's memory, grow with n and not with the payloads: for listings
// that show a preview. TaskInfo.Size (ProcessInfo.TaskSize) still gives
// the whole size. A prefix may end inside a UTF-8 sequence. n must not be
// negative (ErrInvalidOptions).
func PayloadPrefix(n int) InspectOption {
	return func(o *inspectOptions) { o.cut = n }
}

// inspectCut is the cut the options ask for (-1: whole), or
// ErrInvalidOptions.
func inspectCut(op, queue string, opts []InspectOption) (int, error) {
	o := inspectOptions{cut: -1}
	set := false
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
			set = true
		}
	}
	if set && o.cut < 0 {
		return 0, fmt.Errorf("worqr: %s %q: payload prefix %d: %w", op, queue, o.cut, ErrInvalidOptions)
	}
	return o.cut, nil
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

// QueueLen returns the number of tasks waiting in a queue, those waiting
// in groups (see Group) included.
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
	if err := c.validate(ctx, "range", queue); err != nil {
		return nil, err
	}
	cut, err := inspectCut("range", queue, opts)
	if err != nil {
		return nil, err
	}
	ts, err := c.store.Range(ctx, queue, start, stop, cut)
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
// positions count from the last. With PayloadPrefix their payloads are
// cut in Redis.
func (c *Client) Delayed(ctx context.Context, queue string, start, stop int64, opts ...InspectOption) ([]TaskInfo, error) {
	if err := c.validate(ctx, "delayed", queue); err != nil {
		return nil, err
	}
	cut, err := inspectCut("delayed", queue, opts)
	if err != nil {
		return nil, err
	}
	ds, err := c.store.Delayed(ctx, queue, start, stop, cut)
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
	// TaskKind is its task's kind, "" if it has none.
	TaskKind string
	// Task is the task's payload: its first bytes only when the call was
	// given PayloadPrefix.
	Task []byte
	// TaskSize is the payload's whole size in bytes: len(Task), unless
	// PayloadPrefix cut it.
	TaskSize int
	// Weight is the concurrency slots it holds (see the Weight enqueue
	// option): 1 unless its task was enqueued with more.
	Weight int
	// Progress is the process's last progress report (see
	// Process.ReportProgress), nil if it made none.
	Progress *TaskProgress
	// Workflow and Step are the workflow whose step its task runs and the
	// step's name, "" for a task that is no workflow's step.
	Workflow, Step string
}

func processInfo(queue string, p store.Proc) ProcessInfo {
	info := ProcessInfo{ID: p.PID, Queue: queue, Owner: p.Owner, State: stateOf(p.State), TaskID: p.Task.ID, Attempt: p.Task.Attempts, TaskKind: p.Task.Kind, Task: []byte(p.Task.Payload), TaskSize: p.Task.Size, Weight: max(p.Task.Weight, 1)}
	info.Workflow, info.Step, _ = strings.Cut(p.Task.Flow, ".")
	if p.Progress != nil {
		tp := taskProgress(p.Task.ID, *p.Progress)
		info.Progress = &tp
	}
	return info
}

// Processes lists the in-flight processes of a queue with their owners,
// in dequeue order. With PayloadPrefix their tasks' payloads are cut in
// Redis.
func (c *Client) Processes(ctx context.Context, queue string, opts ...InspectOption) ([]ProcessInfo, error) {
	if err := c.validate(ctx, "processes", queue); err != nil {
		return nil, err
	}
	cut, err := inspectCut("processes", queue, opts)
	if err != nil {
		return nil, err
	}
	ps, err := c.store.Procs(ctx, queue, cut)
	if err != nil {
		return nil, c.fail("processes", queue, err)
	}
	inspect.SortProcs(ps)
	out := make([]ProcessInfo, len(ps))
	for i, p := range ps {
		out[i] = processInfo(queue, p)
	}
	return out, nil
}

// TaskLocation is where FindTask found a task: each of Waiting, Delayed,
// Process and Dead is nil unless the task is there (a task is in one place
// at a time, but FindTask looks in every place).
type TaskLocation struct {
	// Waiting is the task if it waits, Position its place in Range's
	// order (0: the first listed), grouped tasks included.
	Waiting  *TaskInfo
	Position int64
	// Delayed is the task if it is delayed (TaskInfo.DueAt says until
	// when).
	Delayed *TaskInfo
	// Process is the task's process if it is in flight.
	Process *ProcessInfo
	// Dead is the task's dead letter.
	Dead *DeadLetter
	// History is the task's failed attempts, oldest first, wherever it is
	// (see Attempt): nil for a task that never failed.
	History []Attempt
	// Partial is set when the search stopped at one of its bounds before
	// the end (see FindTask): the task may be where it did not look.
	Partial bool
}

// Found says whether the task was found anywhere.
func (l TaskLocation) Found() bool {
	return l.Waiting != nil || l.Delayed != nil || l.Process != nil || l.Dead != nil
}

// FindTask looks a task up by id in a queue: in flight, delayed, dead or
// waiting (its retained outcome is TaskResult's). Tasks are not indexed
// by id, so this is a scan, O(n) in the tasks it looks at, done in one
// script on the server, which returns only the task found, its payload
// cut as PayloadPrefix says: the caller's memory does not grow with the
// queue or its payloads. Redis serves nothing else meanwhile, so the scan
// is bounded: in each of the four places it looks at 20,000 tasks and 16
// MiB of them at most, and past a bound sets TaskLocation.Partial
// (docs/manual.md tells its cost, and how grouped tasks are looked for).
// An unknown id is not an error: nothing is found. An empty id is
// ErrInvalidOptions.
func (c *Client) FindTask(ctx context.Context, queue, id string, opts ...InspectOption) (TaskLocation, error) {
	if err := c.validate(ctx, "find task", queue); err != nil {
		return TaskLocation{}, err
	}
	if id == "" {
		return TaskLocation{}, fmt.Errorf("worqr: find task %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	cut, err := inspectCut("find task", queue, opts)
	if err != nil {
		return TaskLocation{}, err
	}
	f, err := c.store.FindTask(ctx, queue, id, cut, inspect.FindBounds)
	if err != nil {
		return TaskLocation{}, c.fail("find task", queue, err)
	}
	l := TaskLocation{Position: f.Position, Partial: f.Partial, History: attemptHistory(f.Attempts)}
	if f.Waiting != nil {
		t := taskInfo(queue, *f.Waiting)
		l.Waiting = &t
	}
	if f.Delayed != nil {
		t := taskInfo(queue, f.Delayed.Task)
		t.DueAt = time.UnixMicro(f.Delayed.Due)
		l.Delayed = &t
	}
	if f.Proc != nil {
		p := processInfo(queue, *f.Proc)
		l.Process = &p
	}
	if f.Dead != nil {
		d := deadLetter(queue, *f.Dead)
		l.Dead = &d
	}
	return l, nil
}

// WorkerInfo describes a live worker.
type WorkerInfo struct {
	ID string
	// LeaseLeftMillis is how long its lease has left, by the Redis clock.
	LeaseLeftMillis int64
	// Host is the name of the machine the worker's program runs on, PID
	// the program's operating-system process id, and StartedAt when the
	// worker registered, by the Redis clock: as it registered them, so
	// empty or zero for a worker of a release that did not.
	Host      string
	PID       int
	StartedAt time.Time
	// Slots are its handler slots in each queue it handles, by queue
	// name: a Handle's Concurrency, or the size of the HandleQueues pool
	// that serves the queue (shared with the pool's other queues). The
	// worker records them as Handle or HandleQueues starts on a queue and
	// StopWork ends one, so they are known for the workers of every
	// process; none for a queue served with StartWork alone, or by a
	// worker of a release that did not record them.
	Slots []QueueSlots
}

// QueueSlots is how many handler slots a worker has in a queue (see
// WorkerInfo.Slots).
type QueueSlots struct {
	Queue string // the queue's name
	Slots int    // the handlers that may run at once there
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
		out[i] = WorkerInfo{ID: l.ID, LeaseLeftMillis: l.LeftMsec, Host: l.Host, PID: l.PID}
		if l.StartedMs > 0 {
			out[i].StartedAt = time.UnixMilli(l.StartedMs)
		}
		for _, s := range l.Slots {
			out[i].Slots = append(out[i].Slots, QueueSlots{Queue: s.Queue, Slots: s.Slots})
		}
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

// KeptOutcome is an outcome in a listing (Outcomes): with PayloadPrefix
// its Result, or its Error, is cut, and Size is the whole size of either.
type KeptOutcome struct {
	TaskOutcome
	Size int
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
	if err := c.validate(ctx, "outcomes", queue); err != nil {
		return nil, err
	}
	if offset < 0 || limit <= 0 || limit > maxOutcomesLimit {
		return nil, fmt.Errorf("worqr: outcomes %q: offset %d, limit %d: %w", queue, offset, limit, ErrInvalidOptions)
	}
	cut, err := inspectCut("outcomes", queue, opts)
	if err != nil {
		return nil, err
	}
	rs, err := c.store.Outcomes(ctx, queue, offset, limit, cut)
	if err != nil {
		return nil, c.fail("outcomes", queue, err)
	}
	out := make([]KeptOutcome, len(rs))
	for i, r := range rs {
		out[i] = KeptOutcome{TaskOutcome: taskOutcome(queue, r.Result), Size: r.Size}
	}
	return out, nil
}

// FindOutcome returns the outcome a queue keeps for a task, by id, as
// Outcomes lists it: TaskResult with, given PayloadPrefix, its Result or
// its Error cut in Redis and Size the whole size of either. It returns
// ErrNoTask when no outcome is kept (the task has not ended, did not ask
// to be retained, or its retention ran out); an empty id is
// ErrInvalidOptions.
func (c *Client) FindOutcome(ctx context.Context, queue, id string, opts ...InspectOption) (KeptOutcome, error) {
	if err := c.validate(ctx, "find outcome", queue); err != nil {
		return KeptOutcome{}, err
	}
	if id == "" {
		return KeptOutcome{}, fmt.Errorf("worqr: find outcome %q: empty task id: %w", queue, ErrInvalidOptions)
	}
	cut, err := inspectCut("find outcome", queue, opts)
	if err != nil {
		return KeptOutcome{}, err
	}
	r, ok, err := c.store.OutcomeCut(ctx, queue, id, cut)
	if err != nil {
		return KeptOutcome{}, c.fail("find outcome", queue, err)
	}
	if !ok {
		return KeptOutcome{}, fmt.Errorf("worqr: find outcome %q %s: %w", queue, id, ErrNoTask)
	}
	return KeptOutcome{TaskOutcome: taskOutcome(queue, r.Result), Size: r.Size}, nil
}

// ScheduleInfo is what Redis keeps of one periodic schedule of a queue
// (see Worker.Periodic): the schedule itself lives in the workers that
// register it.
type ScheduleInfo struct {
	Name  string
	Queue string
	// LastTick is the last tick enqueued, by the Redis clock, or when the
	// schedule was first seen if none was yet.
	LastTick time.Time
	// TaskID is the id of the last tick's task, "" if none is known (no
	// tick yet, or one enqueued by a release that did not keep it).
	TaskID string
	// NextTick is the schedule's tick after LastTick, as the worker that
	// enqueued the last tick (or registered the schedule) computed it: the
	// schedule lives in the workers, so this is what the fleet last said.
	// Zero if unknown (a schedule with no more ticks, or one last ticked
	// by a release that did not keep it).
	NextTick time.Time
}

// Schedules lists a queue's periodic schedules, by name.
func (c *Client) Schedules(ctx context.Context, queue string) ([]ScheduleInfo, error) {
	if err := c.validate(ctx, "schedules", queue); err != nil {
		return nil, err
	}
	ss, err := c.store.Schedules(ctx, queue)
	if err != nil {
		return nil, c.fail("schedules", queue, err)
	}
	out := make([]ScheduleInfo, len(ss))
	for i, s := range ss {
		out[i] = ScheduleInfo{Name: s.Name, Queue: queue, LastTick: time.UnixMilli(s.Last), TaskID: s.TaskID}
		if s.Next > 0 {
			out[i].NextTick = time.UnixMilli(s.Next)
		}
	}
	return out, nil
}
