package worqr

import (
	"context"

	"github.com/worqr/worqr/internal/observe"
	"github.com/worqr/worqr/worqrtype"
)

// Observers: Options.Observer is any value, and worqr calls the methods of
// the interfaces below that it implements, so a metrics package can
// implement only what it counts. Methods are called synchronously on the
// goroutine of the operation they describe: they must be quick and must
// not block (hand the event off if it needs I/O), and must not call the
// Worker's or Client's methods (a finish may be reported while the worker
// holds its locks). A method that panics takes the operation's goroutine
// down with it. ObserveFence alone is called on a goroutine of its own,
// as WorkerOptions.OnFenced is, and may call anything.
//
// Tracing a handler's run is middleware's job (see Middleware): an
// observer sees what middleware cannot, such as enqueues, reclaims and
// fencing.

// What observers are told is worqrtype's.
type (
	// EnqueueEvent describes one enqueue call (see worqrtype.EnqueueEvent).
	EnqueueEvent = worqrtype.EnqueueEvent
	// StartEvent describes a process that starts (see
	// worqrtype.StartEvent).
	StartEvent = worqrtype.StartEvent
	// FinishEvent describes a process that ended (see
	// worqrtype.FinishEvent).
	FinishEvent = worqrtype.FinishEvent
	// ReclaimEvent describes the reclaim of one dead worker (see
	// worqrtype.ReclaimEvent).
	ReclaimEvent = worqrtype.ReclaimEvent
)

// EnqueueObserver is told of every Enqueue and EnqueueBatch that reached
// Redis or failed trying.
type EnqueueObserver interface {
	ObserveEnqueue(ctx context.Context, e EnqueueEvent)
}

// StartObserver is told of every process a worker dequeued, by Dequeue or
// by its Handle runtime.
type StartObserver interface {
	ObserveStart(ctx context.Context, e StartEvent)
}

// FinishObserver is told once of the end of every process a worker
// started: how it ended, and after how long.
type FinishObserver interface {
	ObserveFinish(ctx context.Context, e FinishEvent)
}

// Outcome is how a process ended (see worqrtype.Outcome).
type Outcome = worqrtype.Outcome

// Outcomes (see worqrtype.OutcomeSucceeded).
const (
	OutcomeSucceeded = worqrtype.OutcomeSucceeded // finished
	OutcomeRetried   = worqrtype.OutcomeRetried   // back to its queue to run again
	OutcomeDead      = worqrtype.OutcomeDead      // to the dead letters
	OutcomeCancelled = worqrtype.OutcomeCancelled // cancelled while it ran
	OutcomeDeleted   = worqrtype.OutcomeDeleted   // its queue deleted while it ran
	OutcomeLost      = worqrtype.OutcomeLost      // it stopped being this worker's
)

// ReclaimObserver is told when a worker returned a dead peer's tasks.
type ReclaimObserver interface {
	ObserveReclaim(ctx context.Context, e ReclaimEvent)
}

// FenceObserver is told when a worker fenced itself, or one of its queues
// (the same event WorkerOptions.OnFenced gets).
type FenceObserver interface {
	ObserveFence(e FenceEvent)
}

// The observer interfaces above are internal/observe's, which finds and
// tells them: the same method sets, both ways, or the build fails.
var (
	_ observe.EnqueueObserver = EnqueueObserver(nil)
	_ observe.StartObserver   = StartObserver(nil)
	_ observe.FinishObserver  = FinishObserver(nil)
	_ observe.ReclaimObserver = ReclaimObserver(nil)
	_ EnqueueObserver         = observe.EnqueueObserver(nil)
	_ StartObserver           = observe.StartObserver(nil)
	_ FinishObserver          = observe.FinishObserver(nil)
	_ ReclaimObserver         = observe.ReclaimObserver(nil)
)
