package worqrtype

import (
	"time"
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
	// (see Attempt): nil for a task that never failed. With Partial, the
	// history may lack the latest attempt, kept in the task's entry.
	History []Attempt
	// Partial is set when the search stopped at one of its bounds before
	// the end (see FindTask): the task may be where it did not look, and
	// History may lack its latest attempt.
	Partial bool
}

// Found says whether the task was found anywhere.
func (l TaskLocation) Found() bool {
	return l.Waiting != nil || l.Delayed != nil || l.Process != nil || l.Dead != nil
}

// KeptOutcome is an outcome in a listing (Outcomes): with PayloadPrefix
// its Result, or its Error, is cut, and Size is the whole size of either.
type KeptOutcome struct {
	TaskOutcome
	Size int
}

// DeadLetter is a task that went to its queue's dead letters: its handler
// returned a Permanent error, it failed on its last allowed attempt, or
// Process.DeadLetter was called. A queue keeps its dead letters within
// Options.DeadLetters until they are requeued or deleted.
type DeadLetter struct {
	// TaskInfo is the task as it died. Attempts counts its starts, the
	// one that failed last included.
	TaskInfo
	// DiedAt is when the task went to the dead letters, by the Redis
	// clock (to the millisecond).
	DiedAt time.Time
	// Worker is the id of the worker that held the task when it died.
	Worker string
	// Reason says why the task died (its kind, TaskInfo.Kind, says what
	// it is): the one its error was given with WithReason, else
	// ReasonPermanent, ReasonExhausted, ReasonPanic, ReasonManual,
	// ReasonTimeout, ReasonPoison, ReasonDecode or ReasonUnroutable.
	Reason string
	// Error is the text of the error the last attempt failed with (at
	// most 4,096 bytes), "" if none was recorded.
	Error string
}

// TaskOutcome is a retained task's outcome (see Retain): how its last
// process ended, which ended the task.
type TaskOutcome struct {
	ID    string
	Queue string
	// Status is OutcomeSucceeded (its handler returned nil, or Finish was
	// called) or OutcomeDead (it went to the dead letters): the outcomes
	// that end a task.
	Status Outcome
	// Attempts counts the task's starts, the last one included.
	Attempts int
	// EnqueuedAt, StartedAt (its last attempt) and EndedAt are by the
	// Redis clock; ExpiresAt is when the outcome is forgotten.
	EnqueuedAt, StartedAt, EndedAt, ExpiresAt time.Time
	// Result is what the handler set with Process.SetResult (succeeded).
	Result []byte
	// Error and Reason say why it died (dead): Reason is its dead
	// letter's (see DeadLetter.Reason).
	Error  string
	Reason string
}

// TaskProgress is the last progress report of a task in flight (see
// Process.ReportProgress).
type TaskProgress struct {
	TaskID string
	// ProcessID is the process that reported it.
	ProcessID string
	// Percent is 0 to 100.
	Percent int
	Note    string
	// At is when it was written, by the Redis clock.
	At time.Time
}

// AttemptEnd is how a failed attempt at a task ended (see Attempt).
type AttemptEnd string

// How attempts end, in a task's history.
const (
	// AttemptRetried: the attempt failed and the task went back to wait,
	// at once or after a delay, for another.
	AttemptRetried AttemptEnd = "retried"
	// AttemptDead: the attempt failed and the task went to the dead
	// letters (with its reason, DeadLetter.Reason).
	AttemptDead AttemptEnd = "dead"
	// AttemptReclaimed: the worker that held the process was lost (its
	// lease ran out) and a peer, or Client.Check's repair, gave the task
	// back to its queue.
	AttemptReclaimed AttemptEnd = "reclaimed"
)

// Attempt is one failed attempt at a task, in its history
// (TaskLocation.History). A task keeps its last MaxAttemptHistory failed
// attempts, written by the same script that retries, buries or reclaims
// it, and they go with the task: when it finishes, is cancelled or
// deleted, or its dead letter is requeued, deleted or trimmed. A task
// that never failed has none, and costs nothing more.
type Attempt struct {
	// EndedAt is when the attempt ended, by the Redis clock (to the
	// millisecond).
	EndedAt time.Time
	// End says how it ended.
	End AttemptEnd
	// Worker is the id of the worker that held it.
	Worker string
	// Error is the error it failed with, its first MaxAttemptErrorLen
	// bytes; "" for none (a reclaimed attempt has none).
	Error string
}

// Outcome is how a process ended: observers are told each one, and a
// retained task's outcome (TaskOutcome.Status) is that of the process that
// ended the task, OutcomeSucceeded or OutcomeDead.
type Outcome string

// Outcomes.
const (
	// OutcomeSucceeded: finished (a handler returned nil, or Finish).
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeRetried: the task went back to its queue to run again, at
	// once or after a delay (a handler error, Requeue or Retry).
	OutcomeRetried Outcome = "retried"
	// OutcomeDead: the task went to the dead letters (a Permanent error,
	// an exhausted attempt budget, or DeadLetter).
	OutcomeDead Outcome = "dead"
	// OutcomeCancelled: the task was cancelled while it ran.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeDeleted: its queue was deleted while it ran.
	OutcomeDeleted Outcome = "deleted"
	// OutcomeLost: the process stopped being this worker's (fenced, given
	// back by StopWork or Close, or shutdown returned it to the front).
	OutcomeLost Outcome = "lost"
)
