package worqr

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/wiring"
)

// Limits and defaults.
const (
	// DefaultPrefix is the key prefix used when Options.Prefix is empty.
	DefaultPrefix = "worqr"
	// MaxQueueNameLen is the longest queue name, in bytes. Any bytes are
	// allowed; the name is stored raw and escaped only inside key names.
	MaxQueueNameLen = 1024
	// DefaultMaxTaskSize is the largest task accepted when
	// Options.MaxTaskSize is zero. Empty tasks are allowed.
	DefaultMaxTaskSize = 1 << 20
)

// The limit is internal/enqueue's, which checks queue names: see the
// limits of enqueue.go for how this fails the build when the two part.
const _ = uint(MaxQueueNameLen-enqueue.MaxQueueNameLen) + uint(enqueue.MaxQueueNameLen-MaxQueueNameLen)

// Errors returned by worqr. Match them with errors.Is: the errors returned
// wrap them with the operation and queue. Their texts carry no "worqr:"
// prefix: an error a call returns says "worqr: " once, at its start
// ("worqr: enqueue \"q\": invalid options: negative delay -1s").
var (
	// ErrClientClosed is returned by calls on a closed Client.
	ErrClientClosed = errs.ErrClientClosed
	// ErrWorkerClosed is returned by calls on a closed or failed Worker.
	ErrWorkerClosed = errs.ErrWorkerClosed
	// ErrInvalidOptions is returned for options that cannot work,
	// including credentials that Redis refuses.
	ErrInvalidOptions = errs.ErrInvalidOptions
	// ErrInvalidQueueName is returned for an empty queue name or one longer
	// than MaxQueueNameLen.
	ErrInvalidQueueName = errs.ErrInvalidQueueName
	// ErrTaskTooLarge is returned for a task larger than Options.MaxTaskSize.
	ErrTaskTooLarge = errs.ErrTaskTooLarge
	// ErrNoTask is returned by Dequeue and Peek when the queue has no
	// waiting task, by TaskResult when no outcome of the task is kept, by
	// TaskProgress when it has none, and by Wait when the queue knows
	// nothing of the task and keeps no outcome of it (see Wait).
	ErrNoTask = errs.ErrNoTask
	// ErrNotRetained is returned by Wait for a task its queue holds
	// (waiting, delayed, in flight or dead) that was enqueued without
	// Retain: no outcome of it will be kept, so none can be waited for.
	ErrNotRetained = errs.ErrNotRetained
	// ErrNotServing is returned by Dequeue and StopWork for a queue the
	// worker has not started work on.
	ErrNotServing = errs.ErrNotServing
	// ErrAlreadyServing is returned by StartWork for a queue the worker
	// already serves.
	ErrAlreadyServing = errs.ErrAlreadyServing
	// ErrWorkerFenced is returned when the worker's lease has expired, or
	// it could not renew it in time: it takes no work until it has
	// registered again under a new id.
	ErrWorkerFenced = errs.ErrWorkerFenced
	// ErrProcessLost is returned by Finish, Requeue and Status when the
	// process no longer belongs to this worker: it was reclaimed by peers,
	// given back by StopWork, Shutdown or Close, or already finished or
	// requeued. Nothing was changed in Redis.
	ErrProcessLost = errs.ErrProcessLost
	// ErrProcessEnded is a process's Err once its own Finish, Requeue,
	// Retry or DeadLetter has ended it.
	ErrProcessEnded = errs.ErrProcessEnded
	// ErrTaskCancelled is returned by Requeue and Status for a process
	// whose task was cancelled; Requeue dropped it instead of requeuing
	// it. Wait returns it for a cancelled task (see Wait).
	ErrTaskCancelled = errs.ErrTaskCancelled
	// ErrQueueDeleted is returned by Requeue and Status for a process
	// whose queue was deleted; Requeue dropped it instead of recreating
	// the queue. Wait returns it for a task of a deleted queue (see Wait).
	ErrQueueDeleted = errs.ErrQueueDeleted
	// ErrNoQueue is returned by Pause, Resume, SetConcurrency and
	// SetRateLimit for a queue that does not exist (Queues does not list
	// it: never enqueued to nor served, or deleted since), unless they are
	// given CreateQueue. Nothing was changed.
	ErrNoQueue = errs.ErrNoQueue
	// ErrRateLimited is returned by Dequeue when the queue's rate limit
	// (Client.SetRateLimit) is used up, or when the only groups with tasks
	// waiting are held back until a time (by their rate,
	// Client.SetGroupRate, or as a sequence whose first task waits for its
	// retry delay: see Group); the error says when the next start is
	// allowed.
	ErrRateLimited = errs.ErrRateLimited
	// ErrDuplicate is returned by Enqueue with a Unique or UniqueFor key
	// that a task holds: nothing was added, and the id returned is that
	// task's.
	ErrDuplicate = errs.ErrDuplicate
	// ErrUnavailable wraps errors talking to Redis (connection refused,
	// reset, closed). The outcome of a state change that failed this way
	// may be unknown: see docs/guarantees.md on at-least-once delivery.
	ErrUnavailable = errs.ErrUnavailable
)

// Options configure a Client.
type Options struct {
	// Addr is a Redis address ("host:port"), a comma-separated list of
	// them (seed nodes of a Redis Cluster, recognised from any one node),
	// or a URL ("redis://user:password@host:6379/0", "rediss://" for TLS,
	// "unix://"); docs/security.md tells the URL's TLS options, and
	// docs/testing.md how a miniredis's address is served. Ignored when
	// Redis is set.
	Addr string
	// Redis is an existing rueidis client to use instead of Addr, for
	// what a URL cannot say (a CA of your own, client certificates,
	// Sentinel). The caller owns it: Client.Close does not close it.
	// docs/cluster.md tells what a cluster client changes, and
	// docs/testing.md what a client of a miniredis needs.
	Redis rueidis.Client
	// Prefix namespaces every key and channel. Clients with different
	// prefixes never see each other's queues, workers or events. Default
	// DefaultPrefix; it must not contain '{' or '}'.
	Prefix string
	// Logger receives worqr's logs (docs/operations.md tells them).
	// Default slog.Default().
	Logger *slog.Logger
	// MaxTaskSize is the largest task in bytes. Default DefaultMaxTaskSize.
	MaxTaskSize int
	// PoisonLimit is the poison-pill guard: a task whose holding workers
	// died soon after starting it this many times in a row goes to the
	// dead letters, reason ReasonPoison, instead of killing worker after
	// worker (Poison pills in docs/retries.md tells which deaths count).
	// 0 means DefaultPoisonLimit; negative turns the guard off. Give every
	// client of a fleet the same.
	PoisonLimit int
	// DeadLetters bound each queue's dead letters; the zero value is the
	// default (DefaultDeadLetterMaxCount, DefaultDeadLetterMaxAge).
	DeadLetters DeadLetterOptions
	// Observer is told what happens to tasks, for metrics and tracing: any
	// value, of which worqr calls the methods of the observer interfaces
	// it implements (EnqueueObserver, StartObserver, FinishObserver,
	// ReclaimObserver, FenceObserver). Nil observes nothing.
	Observer any
	// NoStats turns off the per-queue stats (see Client.Stats) that this
	// client's calls keep in Redis: its calls then count nothing. Give
	// every client of a fleet the same setting, or the stats count only
	// what the others do. docs/operations.md tells what stats cost.
	NoStats bool
	// Tracer, if set, gives each Enqueue and EnqueueBatch call a trace
	// context its tasks carry to their handlers (Process.Trace); the otel
	// module's NewTracer makes one.
	Tracer Tracer

	// clock is the engine's time; tests in this package set a Fake.
	clock clock.Clock
}

// Client enqueues, cancels and inspects work, and creates Workers. It is
// safe for concurrent use.
type Client struct {
	// core is the client's components, wired together (internal/wiring):
	// its store, every call to Redis, its coalescers, workflow carries,
	// stats, waiters, reclaimers, beats, and its workers.
	core *wiring.Client
}

// New creates a Client: NewContext with a context that never ends, so
// bounded only by rueidis's dial timeout (5 s an address) and the
// server's answer to the handshake.
func New(opts Options) (*Client, error) {
	return NewContext(context.Background(), opts)
}

// NewContext creates a Client. Options are checked first (ErrInvalidOptions),
// Addr included, before anything is dialled. Given Addr, it connects at
// once: it fails with ErrUnavailable if Redis cannot be reached or does
// not speak the Redis protocol, and with ErrInvalidOptions if Redis
// refuses the URL's credentials. ctx bounds only the connecting: when it
// ends, a dial or handshake under way is abandoned and the error wraps
// ctx's error as well as ErrUnavailable. Given Options.Redis it does not
// contact Redis, except to ask a Redis Cluster once whether it has
// sharded pub/sub. docs/errors.md tells the connecting in full.
func NewContext(ctx context.Context, opts Options) (*Client, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("worqr: %w: prefix %q must not contain '{' or '}'", ErrInvalidOptions, opts.Prefix)
	}
	if opts.MaxTaskSize == 0 {
		opts.MaxTaskSize = DefaultMaxTaskSize
	}
	if opts.MaxTaskSize < 0 {
		return nil, fmt.Errorf("worqr: %w: negative MaxTaskSize", ErrInvalidOptions)
	}
	if opts.DeadLetters.MaxCount < 0 || opts.DeadLetters.MaxAge < 0 {
		return nil, fmt.Errorf("worqr: %w: negative DeadLetters bound", ErrInvalidOptions)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	core, err := wiring.New(ctx, wiring.Config{
		Redis:            opts.Redis,
		Addr:             opts.Addr,
		Prefix:           opts.Prefix,
		Logger:           opts.Logger,
		MaxTaskSize:      opts.MaxTaskSize,
		PoisonLimit:      poisonLimit(opts.PoisonLimit),
		DeadBounds:       opts.DeadLetters.bounds(),
		Observer:         opts.Observer,
		Tracer:           opts.Tracer,
		NoStats:          opts.NoStats,
		Clock:            opts.clock,
		TTL:              DefaultTTL,
		RenewInterval:    DefaultRenewInterval,
		MaxAttempts:      DefaultMaxAttempts,
		ProgressInterval: ProgressInterval,
		CancelWait:       ShutdownCancelWait,
		SweepEvery:       FlowSweepEvery,
		SweepAge:         FlowSweepAge,
	})
	if err != nil {
		return nil, err
	}
	return &Client{core: core}, nil
}

// Close closes every Worker created by this client that is still running
// (see Worker.Close), writes the stats counts it holds (see Client.Stats),
// then closes the Redis connection if the client opened it. Further calls
// return ErrClientClosed. Close is safe to call twice.
func (c *Client) Close(ctx context.Context) error { return c.core.Close(ctx) }
