package worqrtype

import "time"

// EnqueueEvent describes one enqueue call (one joined Enqueue batch counts
// once, with all its tasks).
type EnqueueEvent struct {
	Queue string
	// TaskIDs are the ids of the tasks enqueued, in order; empty on error.
	TaskIDs []string
	// Err is the error the callers got, if any.
	Err error
}

// StartEvent describes a process that starts.
type StartEvent struct {
	Queue     string
	TaskID    string
	ProcessID string
	WorkerID  string
	// Kind is the task's kind (Process.Kind), "" if it has none. Kinds
	// are the producers' to choose: a metric labelled with them needs a
	// bound on how many it keeps apart.
	Kind string
	// Attempt is the task's attempt this is: 1 for the first start.
	Attempt int
	// EnqueuedAt is when the task was enqueued, by the Redis clock: the
	// wait time is the difference from now, if the two clocks agree.
	EnqueuedAt time.Time
}

// FinishEvent describes a process that ended.
type FinishEvent struct {
	Queue     string
	TaskID    string
	ProcessID string
	WorkerID  string
	// Kind is the task's kind (Process.Kind), "" if it has none.
	Kind    string
	Attempt int
	Outcome Outcome
	// Reason is why the task died, for OutcomeDead: the dead letter's
	// reason (DeadLetter.Reason), one of the Reason constants or an
	// application's own (WithReason). It is "" for every other outcome.
	// Reasons an application gives are its own to choose: a metric
	// labelled with them needs a bound on how many it keeps apart.
	Reason string
	// Duration is how long the process ran, from its dequeue on the
	// worker's clock.
	Duration time.Duration
	// Err is the handler's error, or why the process was lost.
	Err error
}

// ReclaimEvent describes the reclaim of one dead worker.
type ReclaimEvent struct {
	// DeadWorker is the id of the worker whose lease expired.
	DeadWorker string
	// Tasks counts the tasks that went back to the front of their queues.
	Tasks int64
	// Poison counts the tasks the poison-pill guard sent to the dead
	// letters, reason ReasonPoison, instead (see Options.PoisonLimit).
	Poison int64
	// Dropped counts the tasks dropped instead: cancelled, or of a deleted
	// queue.
	Dropped int64
}

// EnqueueStart describes an enqueue call to a Tracer.
type EnqueueStart struct {
	// Queue is the queue's name.
	Queue string
	// Kind is the tasks' kind, "" if none.
	Kind string
	// Tasks counts the tasks: 1 for Enqueue.
	Tasks int
}
