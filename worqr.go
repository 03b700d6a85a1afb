package worqr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/coalesce"
	"github.com/worqr/worqr/internal/connect"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/flows"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/reclaim"
	"github.com/worqr/worqr/internal/statsflush"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/waiters"
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
	// maxTasksPerScript bounds the tasks of one enqueue or finish script
	// call; larger batches are split and pipelined in the same round trip.
	maxTasksPerScript = store.MaxTasksPerScript
)

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
	rdb         rueidis.Client
	ownsRedis   bool
	store       *store.Store // every call to Redis goes through it
	log         *slog.Logger
	clock       clock.Clock // every time.Now and timer of the engine
	signals     signals     // for tests (signals.go)
	maxTaskSize int
	obs         observers
	tracer      Tracer
	deadBounds  store.DeadBounds
	poisonLimit int // 0: the guard is off
	// outage logs Redis going out of reach, and coming back, once for
	// the failures of all the calls the client makes on its own.
	outage *outage.Outage

	// enqueues, finishes and retries merge overlapping Enqueue, Finish
	// and Retry calls (a handler's error included) on a queue.
	enqueues *coalesce.Coalescer[[]byte, string]
	finishes *coalesce.Coalescer[*engine.Proc, store.Outcome]
	retries  *coalesce.Coalescer[store.RetryRef, store.Outcome]
	// kindEnqueues joins Enqueue calls with a kind and no other option,
	// per kind and queue (see enqueueKindJoined).
	kindEnqueues *coalesce.Coalescer[[]byte, string]

	waiters *waiters.Waiters // Wait's subscriptions
	flows   *flows.Flows     // workflow tasks' notices carried to their workflows
	carrier *flows.Carrier   // what a carry of notices does
	release *flows.Release   // the enqueue of workflows' ready steps
	// statsFlusher writes the stats counts of queues that went idle.
	statsFlusher *statsflush.Flusher

	// reclaimers reclaim dead peers for the client's workers, one for
	// the workers of each TTL and RenewInterval (see internal/reclaim).
	reclaimers *reclaim.Reclaimers[reclaimMember]
	// beats renew the leases of the client's workers, one for the
	// workers of each TTL and RenewInterval (see internal/beat).
	beats *beat.Beats[engine.Renewal, engine.BeatMember]

	closed  atomic.Bool
	mu      sync.Mutex           // guards workers
	workers map[*Worker]struct{} // guarded by mu
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
	var dialOpt rueidis.ClientOption
	if opts.Redis == nil {
		var err error
		if dialOpt, err = connect.Options(opts.Addr); err != nil {
			return nil, err
		}
	}
	clk := clock.Or(opts.clock)
	born := clk.Now() // the client's beats count from it
	c := &Client{
		rdb:         opts.Redis,
		log:         opts.Logger,
		clock:       clk,
		maxTaskSize: opts.MaxTaskSize,
		obs:         newObservers(opts.Observer),
		tracer:      opts.Tracer,
		deadBounds:  opts.DeadLetters.bounds(),
		poisonLimit: poisonLimit(opts.PoisonLimit),
		outage:      outage.New(opts.Logger, clk, proc.Retryable),
		workers:     make(map[*Worker]struct{}),
	}
	c.enqueues = coalesce.New(maxTasksPerScript, c.enqueueJoined)
	c.kindEnqueues = coalesce.New(maxTasksPerScript, c.enqueueKindJoined)
	c.finishes = coalesce.New(maxTasksPerScript, func(ctx context.Context, queue string, ps []*engine.Proc) ([]store.Outcome, error) {
		return engine.FinishJoined(ctx, c.store, queue, ps)
	})
	c.retries = coalesce.New(maxTasksPerScript, func(ctx context.Context, queue string, refs []store.RetryRef) ([]store.Outcome, error) {
		return c.store.Retry(ctx, queue, refs)
	})
	if c.rdb == nil {
		rdb, err := connect.Dial(ctx, dialOpt, opts.Addr, opts.Logger)
		if err != nil {
			return nil, err
		}
		c.rdb, c.ownsRedis = rdb, true
	}
	sharded := store.DetectSharded(ctx, c.rdb, opts.Prefix+":probe")
	if err := ctx.Err(); err != nil && c.rdb.Mode() == rueidis.ClientModeCluster {
		// The probe's answer is unknown: guessing could make this client
		// deaf to its peers' events.
		if c.ownsRedis {
			c.rdb.Close()
		}
		return nil, fmt.Errorf("worqr: asking the cluster for sharded pub/sub: %w: %w", ErrUnavailable, err)
	}
	c.store = store.New(c.rdb, opts.Prefix, sharded, !opts.NoStats)
	c.store.SetClock(clk)
	c.store.SetAggregateLimit(opts.MaxTaskSize)
	c.release = flowsRelease(c)
	c.carrier = flowsCarrier(c)
	c.flows = flows.New(flowsEnv(c))
	c.statsFlusher = statsflush.New(c.store, c.log, c.clock)
	c.waiters = waiters.New(c.store)
	c.reclaimers = reclaim.New[reclaimMember](reclaimEnv(c))
	c.beats = beat.New[engine.Renewal, engine.BeatMember](beatEnv(c, born))
	return c, nil
}

// closeCoalescers closes the client's coalescers (see coalesce.Coalescer.Close).
func (c *Client) closeCoalescers() {
	c.enqueues.Close()
	c.kindEnqueues.Close()
	c.finishes.Close()
	c.retries.Close()
}

// Close closes every Worker created by this client that is still running
// (see Worker.Close), writes the stats counts it holds (see Client.Stats),
// then closes the Redis connection if the client opened it. Further calls
// return ErrClientClosed. Close is safe to call twice.
func (c *Client) Close(ctx context.Context) error {
	if c.closed.Swap(true) {
		return nil
	}
	c.mu.Lock()
	workers := make([]*Worker, 0, len(c.workers))
	for w := range c.workers {
		workers = append(workers, w)
	}
	c.mu.Unlock()
	var errs []error
	for _, w := range workers {
		errs = append(errs, w.Close(ctx))
	}
	c.flows.Close()
	c.statsFlusher.Close()
	c.flushStats(ctx, "")
	c.waiters.Close()
	if c.ownsRedis {
		c.rdb.Close()
	}
	// After the connection closed: a batch still being sent fails at once.
	c.closeCoalescers()
	return errors.Join(errs...)
}

// validateCtx checks what every call needs: an open client and a live
// context.
func (c *Client) validateCtx(ctx context.Context, op string) error {
	if c.closed.Load() {
		return fmt.Errorf("worqr: %s: %w", op, ErrClientClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("worqr: %s: %w", op, err)
	}
	return nil
}

// validate is validateCtx plus a valid queue name.
func (c *Client) validate(ctx context.Context, op, queue string) error {
	if err := c.validateCtx(ctx, op); err != nil {
		return err
	}
	return validQueue(op, queue)
}

func validQueue(op, queue string) error {
	if queue == "" {
		return fmt.Errorf("worqr: %s: empty name: %w", op, ErrInvalidQueueName)
	}
	if len(queue) > MaxQueueNameLen {
		return fmt.Errorf("worqr: %s: name is %d bytes, limit %d: %w", op, len(queue), MaxQueueNameLen, ErrInvalidQueueName)
	}
	return nil
}

// fail wraps an error from Redis (store.Fail).
func (c *Client) fail(op, queue string, err error) error { return store.Fail(op, queue, err) }
