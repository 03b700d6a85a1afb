// Package worqr runs work across many programs and machines with Redis as
// the only moving part.
//
// # The model
//
// A task is an opaque byte string in a FIFO queue, with an id given when it
// is enqueued. A Worker holds a lease in Redis that it renews; it dequeues
// tasks into processes that it owns, then finishes or requeues them. When a
// worker's lease expires its peers put its processes back at the front of
// their queues and wake the queue, so nobody runs a separate cleaner. Every
// state change is one Lua script whose keys share one hash tag, and
// notifications are published from inside the same script.
//
// Most programs use Worker.Handle, which serves a queue with a Handler,
// rather than Dequeue and Finish by hand:
//
//	client, err := worqr.New(worqr.Options{Addr: "127.0.0.1:6379"})
//	worker, err := client.NewWorker(ctx, worqr.WorkerOptions{})
//	err = worker.Handle(ctx, "emails", send, worqr.HandleOptions{Concurrency: 20})
//	id, err := client.Enqueue(ctx, "emails", []byte(`{"to":"ada"}`))
//	...
//	<-ctx.Done() // Handle returns at once; main waits, then shuts down
//	err = worker.Shutdown(shutdownCtx)
//
// Worker.HandleQueues serves several queues from one pool of handler
// slots, in strict or shared order.
//
// # Words
//
// Each of these words means one thing, in the code and in the docs:
//
//   - task: an opaque payload with an id, enqueued to a queue; what the
//     system keeps until the work is done.
//   - queue: a named FIFO of tasks, waiting, delayed and in flight, with
//     its own dead letters, controls and channel.
//   - kind: what a task is ("email.welcome"; the Kind enqueue option),
//     which a Router dispatches on. Only a task has a kind.
//   - worker: a Worker, one member of the fleet, with an id and a lease,
//     taking tasks from the queues it serves.
//   - lease: a worker's claim in Redis, renewed while it lives and gone
//     after its TTL (WorkerOptions.TTL) when it does not.
//   - session: a worker's service of one queue, from StartWork (or Handle,
//     HandleQueues) to StopWork or the worker's shutdown: the lease on
//     that queue, the processes held there and the queue's events. A
//     worker has one session per queue it serves.
//   - process: one attempt at a task, held by one worker (a Process),
//     from its dequeue to its end. An operating-system process is a
//     program.
//   - handler: the function that runs a process's task (Handler), called
//     by a worker's runtime (Worker.Handle, HandleQueues).
//   - fence: a worker whose lease ran out stops itself: it takes no more
//     work and drops its processes, which belong to its peers now. A
//     session whose queue lease ran out fences alone, and rejoins.
//   - reclaim: peers put the processes of a worker whose lease is gone
//     back at the front of their queues.
//   - dead letter: a task that will not run again unless requeued
//     (DeadLetter): its handler gave up on it, its attempts ran out, or
//     DeadLetter was called.
//   - reason: why a task died (DeadLetter.Reason; WithReason,
//     ReasonPermanent, ReasonExhausted...), never called its kind.
//   - outcome: how a process ended (Outcome: succeeded, retried, dead,
//     cancelled, deleted, lost); a retained task's outcome (TaskOutcome)
//     is that of the process that ended it, succeeded or dead.
//   - state: where a process in flight stands in Redis (ProcessState:
//     active, cancelled, deleted), asked with Process.Status.
//   - result: the bytes a handler sets for a retained task
//     (Process.SetResult), read with its outcome.
//   - priority: a task's place among its queue's tasks (HighPriority,
//     LowPriority, or normal).
//   - weight: the slots of its queue's concurrency limit
//     (Client.SetConcurrency) a task holds while in flight (Weight).
//   - share: a queue's part of a pool's handler slots under OrderShared
//     (QueueSpec.Share).
//   - turns: a group's picks in a row among its queue's groups
//     (SetGroupTurns): its part of the starts while groups have work.
//   - turn size: the most tasks one turn of a group starts
//     (SetGroupTurnSize), 1 by default: the groups alternate task by task.
//   - workflow: a set of tasks enqueued together with dependencies
//     between them (EnqueueWorkflow), with its own state in Redis.
//   - step: one task of a workflow, named in it (Step); its parents are
//     the steps it waits for, its children those that wait for it.
//   - notice: the record a workflow task's end leaves in its queue, until
//     the workflow has recorded that end (see docs/workflows.md).
//   - gathering: the tasks enqueued with one aggregation key (Aggregate)
//     on one queue, waiting outside it until they go to it as one
//     aggregated task, whose members they are then.
//   - slot: room for one handler to run (HandleOptions.Concurrency,
//     PoolOptions.Concurrency), or one unit of a queue's concurrency
//     limit, held by a task's weight.
//
// # Where the rest is told
//
// The guide, docs/README.md, tells each part of the API in full: the
// embedded and worqrtest packages (an in-process Redis, handlers tested
// without one: docs/testing.md), typed payloads and Router
// (docs/handlers.md), outcomes and Wait (docs/results.md), workflows
// (docs/workflows.md), middleware, observers, Slots and the Tracer
// (docs/observability.md), and the errors and limits (docs/errors.md).
//
// # Map of the files
//
// doc.go is this text. The plain data types the client returns and
// observers are told (TaskInfo, QueueInfo, Stats, CheckReport,
// WorkflowInfo, FinishEvent...) are package worqrtype's, a public leaf
// package that imports only the standard library, with their docs and
// methods; each file below names again those of its calls. The client: worqr.go (options, errors, New,
// Close), enqueue.go (Enqueue, options, Cancel, DeleteQueue), inspect.go
// (queues, tasks, delayed tasks, processes, workers), attempts.go (a
// task's attempt history), controls.go (pause, limits, QueueInfo),
// groups.go (groups of a queue: the Group option, their limits and rates),
// aggregate.go (aggregation: the Aggregate option, a queue's settings, an
// aggregated task's members),
// groupsinfo.go (Groups: the top groups and those held back, picked by
// internal/inspect), dead.go
// (listing, requeuing and deleting dead letters), reasons.go (why a
// task died: reasons, dead-letter bounds, the poison limit), outcome.go (TaskResult, Wait),
// stats.go (a queue's stats),
// typed.go (typed payloads: Codec, EnqueueJSON, HandleJSON, Typed),
// router.go (a handler per kind), check.go (the consistency check: Check
// and its report), observer.go, trace.go (the Tracer that carries a trace
// across the queue), workflow.go (workflows: EnqueueWorkflow, their
// state, cancel and wait, a step's parents' results) and flows.go
// (the period and the age of the workflow sweeps).
//
// The worker, one component per file: worker.go (the Worker over its
// engine's core, NewWorker), keepalive.go (the lease's defaults, and
// where its renewals are made),
// periodic.go (periodic schedules: Periodic and Every; their checks and
// the worker's set of them are internal/periodic's),
// membership.go (StartWork and StopWork, over
// the engine's Serve and Unserve), dequeue.go (Dequeue and DequeueN, over the engine's
// dequeue), events.go (the
// application's callbacks for a queue's events), runtime.go (Handle: a queue served
// by the engine's runtime, with the application's handler and options),
// handler.go
// (Handler, HandleOptions, middleware), pool.go (HandleQueues and its
// options, and the pools' snapshot, Slots),
// batch.go (HandleBatch: a Handle whose handler calls the engine's
// batcher gathers into batches),
// settle.go (the retry policy: RetryPolicy, its backoffs, RetryAfter),
// process.go and progress.go (a Process, its methods and its progress
// reports, over the engine's record of it in internal/engine, and the
// worker's side of that record, procHost, and the process a dequeue or
// a hand-off makes), shutdown.go
// (Shutdown and Close, over the engine's closer). internal/wiring
// builds the client's components and gives each component under
// internal/ what it takes of the client and the worker, the engine's
// core's host included; the root gives it what only the root has (the
// public processes, the application's fence callback).
//
// The engine's components are under internal/, a package each with
// tests of its own; docs/internals.md maps them. Redis is reached only
// through internal/store, one method per script; docs/guarantees.md has
// the guarantees and the failure modes, docs/key-layout.md the key
// layout.
package worqr
