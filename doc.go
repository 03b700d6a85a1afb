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
// stats.go (a queue's stats, and writing the counts the client holds),
// typed.go (typed payloads: Codec, EnqueueJSON, HandleJSON, Typed),
// router.go (a handler per kind), check.go (the consistency check: Check
// and its report), observer.go, trace.go (the Tracer that carries a trace
// across the queue), workflow.go (workflows: EnqueueWorkflow, their
// state, cancel and wait, a step's parents' results) and flows.go
// (what internal/flows takes of the client, and the carries a requeue or
// a cancel makes).
//
// The worker, one component per file: worker.go (the Worker over its
// engine's core, NewWorker),
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
// (Shutdown and Close, over the engine's closer) and signals.go (the test signals of the engine's
// components). engine.go
// gives each component under internal/ what it takes of the client and
// the worker, and workerHost, the engine's core's host: what only the
// root has (the public types, the client's parts).
//
// The engine's components under internal/, each with tests of its own:
// engine (the worker's core, engine.Core: its mu, lifecycle, sessions,
// pools, life and the components below, and the lock order of every
// mutex, over the root as its host, engine.CoreHost, and the one host
// of its components, engine.WorkerHost; a process's record, shared with
// the public Process in one allocation; starting and stopping work on a queue, engine.Serve and
// engine.Unserve, and on a HandleQueues pool's, engine.ServePool; the worker's sessions by queue, engine.Sessions, and its
// closer, engine.Closer, draining and closing it over the worker as its
// host, engine.CloserHost; a served queue's session, engine.Session: its
// gate, its dispatcher (the queue's events applied to its books and told
// to the application, and the catch-up after each subscription), its
// timer of delayed tasks, leaving its queue, the runtimes a stop drains
// (engine.Runtimes), its fence, rejoin and reconciliation, over the worker as their host, engine.SessionHost (each
// component's host is small, over the worker's mu, lifecycle and
// sessions, engine.Locked, which the core's one adapter implements), and
// its two halves, each a type and a file of its own: its books of
// processes, engine.Books, and its side of its lease, engine.Lease
// (where it stands, the deadline, the renewals' answers, and the
// decisions over both halves at once, but for a process's adoption,
// which sits with the books and their drop of it); the lease keeper's side,
// engine.Keeper: its membership of the client's beat, what a round
// renews and its answers, the loop that registers a fenced worker again,
// the worker's fencing deadline, engine.Deadline (of its
// registry lease, and the timer that fences the worker or a session when
// a lease may have run out), the fence of the whole worker, the evidence
// of a lease gone, and the pass reconciling the sessions unsure of their
// processes; the worker's registry entry, engine.Registry (its registration, the queues and slots recorded, the
// lock serialising changes to what it serves); the
// scripts that end it and write its progress, with
// their batched sends; the settler deciding and writing a handler's
// outcome: retry, dead letter, finish; the Handle runtime, a file each:
// Runtime, a queue a scheduler serves, its periods of taking work and
// the signal that ends each; Scheduler, the slots of a Handle or
// HandleQueues call and the loop that fills them; a member's share of
// those slots, its cap and the signal that its handlers have all ended
// (memberSlots, guarded by the scheduler's lock); Starter, a member's
// start of a process, whether a dequeue's reply or an enqueue's hand-off
// brought its task:
// the slot a hand-off claims, or holds for the dequeue in flight, the
// choice of the earlier task when they race, adoption, give-back, the
// handler goroutines and runJob; Batcher, a HandleBatch's handler calls
// gathered into batches; Dequeue, and what its reply makes of a
// runtime: an empty queue, the queue's limits and their
// wake-up, a failed call's backoff), lifecycle (the worker's state and a session's: their named
// transitions), proc (a process's state machine: how it ends, its
// result, its handler's context, and the throttle of its progress
// writes; the retry policy's arithmetic, and the persistence of the
// writes that end a process), pacer (a runtime member's timers: a failed
// dequeue's backoff and the rate limit's wake-up),
// beat (the client's beat, renewing its workers' leases in joint
// scripts), reclaim (the reclaimer of dead peers, one per client and
// options), checker (one run of the consistency check and its repair),
// enqueue (an enqueue's options, their checks, a trace context's check
// and the arguments the store sends, the error of a task over the size limit, and a typed
// payload's kind),
// workflow (a workflow's plan: its id, its steps' checks and graph,
// their dependency order, what a step's task is enqueued with, a
// page of the steps of a workflow read whole, and a workflow's and a
// page's views as worqrtype gives them),
// delayed (a queue's timer that moves its delayed tasks when
// they are due, and the worker's estimate of the Redis clock), periodic
// (a periodic schedule's loop and tick.lua, Every's ticks, a schedule's
// checks, and the worker's set of them), subscription (a queue's
// listener and the dispatcher of its events), waiters (Wait's
// subscriptions, its wait for an outcome and progress reports, and
// WaitWorkflow's for a workflow's end), flows (carrying workflow tasks' notices to their
// workflows: at a task's end, and the sweeper, running while the client
// has workers; the enqueue of the steps a release made ready; how a
// step is released exactly once across slots),
// statsflush (the writes of idle queues' stats counts), inspect (a
// groups report and its picks, the order of a queue's processes and
// FindTask's bounds),
// slotpolicy (the slot scheduler's policy: free slots, their sharing
// among a pool's queues, and what a failed dequeue makes of its queue),
// coalesce (joining overlapping calls into one script call), outage (one
// log line when Redis goes out of reach, one when it is back), backoff
// (the loops retrying Redis), writedeadline (the bound on outcome
// writes), members (the workers a client-wide loop serves), startstop
// (the lifecycle of every loop), clock (the engine's clock, and a fake
// one for tests), errs (the sentinel errors the engine returns, which the
// package re-exports), testsignal (the components' test signals), queuestats
// (the stats readers), connect (opening the Redis connection from
// Options.Addr, and sorting its failures), testenv (the sub-packages' tests' Redis and
// clients) and doccheck (tests only: the README's and docs/' Go blocks
// compile, their links resolve, and this map matches the tree).
//
// Redis is reached only through internal/store, one method per script
// with typed results, their records' conversions to worqrtype's values
// and the wrapping of its errors (store.Fail); the scripts are in internal/scripts, one file per
// operation, and the helpers they share in internal/scripts/common/, a
// subject to a file. docs/guarantees.md has the guarantees and the failure
// modes, docs/key-layout.md the key layout.
package worqr
