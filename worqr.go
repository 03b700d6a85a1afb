package worqr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/store"
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
// wrap them with the operation and queue.
var (
	// ErrClientClosed is returned by calls on a closed Client.
	ErrClientClosed = errors.New("worqr: client closed")
	// ErrWorkerClosed is returned by calls on a closed or failed Worker.
	ErrWorkerClosed = errors.New("worqr: worker closed")
	// ErrInvalidOptions is returned for options that cannot work,
	// including credentials that Redis refuses.
	ErrInvalidOptions = errors.New("worqr: invalid options")
	// ErrInvalidQueueName is returned for an empty queue name or one longer
	// than MaxQueueNameLen.
	ErrInvalidQueueName = errors.New("worqr: invalid queue name")
	// ErrTaskTooLarge is returned for a task larger than Options.MaxTaskSize.
	ErrTaskTooLarge = errors.New("worqr: task too large")
	// ErrNoTask is returned by Dequeue and Peek when the queue has no
	// waiting task, by TaskResult when no outcome of the task is kept, by
	// TaskProgress when it has none, and by Wait when the queue knows
	// nothing of the task and keeps no outcome of it (see Wait).
	ErrNoTask = errors.New("worqr: no task waiting")
	// ErrNotRetained is returned by Wait for a task its queue holds
	// (waiting, delayed, in flight or dead) that was enqueued without
	// Retain: no outcome of it will be kept, so none can be waited for.
	ErrNotRetained = errors.New("worqr: task not retained")
	// ErrNotServing is returned by Dequeue and StopWork for a queue the
	// worker has not started work on.
	ErrNotServing = errors.New("worqr: worker does not serve this queue")
	// ErrAlreadyServing is returned by StartWork for a queue the worker
	// already serves.
	ErrAlreadyServing = errors.New("worqr: worker already serves this queue")
	// ErrWorkerFenced is returned when the worker's lease has expired, or
	// it could not renew it in time: it takes no work until it has
	// registered again under a new id.
	ErrWorkerFenced = errors.New("worqr: worker fenced (lease lost)")
	// ErrProcessLost is returned by Finish, Stop and Check when the process
	// no longer belongs to this worker: it was reclaimed by peers, given
	// back by StopWork, Fail or Close, or already finished or stopped.
	// Nothing was changed in Redis.
	ErrProcessLost = errors.New("worqr: process lost")
	// ErrTaskCancelled is returned by Stop and Check for a process whose
	// task was cancelled; Stop dropped it instead of requeuing it. Wait
	// returns it for a cancelled task (see Wait).
	ErrTaskCancelled = errors.New("worqr: task cancelled")
	// ErrQueueDeleted is returned by Stop and Check for a process whose
	// queue was deleted; Stop dropped it instead of recreating the queue.
	// Wait returns it for a task of a deleted queue (see Wait).
	ErrQueueDeleted = errors.New("worqr: queue deleted")
	// ErrRateLimited is returned by Dequeue when the queue's rate limit
	// (Client.SetRateLimit) is used up; the error says when the next start
	// is allowed.
	ErrRateLimited = errors.New("worqr: rate limit used up")
	// ErrDuplicate is returned by Enqueue with a Unique or UniqueFor key
	// that a task holds: nothing was added, and the id returned is that
	// task's.
	ErrDuplicate = errors.New("worqr: duplicate task")
	// ErrUnavailable wraps errors talking to Redis (connection refused,
	// reset, closed). The outcome of a state change that failed this way
	// may be unknown: see the README on at-least-once delivery.
	ErrUnavailable = errors.New("worqr: redis unavailable")
)

// Options configure a Client.
type Options struct {
	// Addr is a Redis address ("host:port"), a comma-separated list of
	// them (seed nodes of a Redis Cluster), or a URL ("redis://",
	// "rediss://", "unix://"). A cluster is recognised from any one of its
	// nodes. A URL carries a user and password
	// ("redis://user:password@host:6379/0"), and rediss:// connects over
	// TLS, verified against the system's roots (add "?skip_verify=true" to
	// skip verification). For anything else (a CA of your own, client
	// certificates, Sentinel) build a rueidis client and pass it as Redis.
	// Ignored when Redis is set.
	//
	// The address of a miniredis (an in-process Redis, as the embedded
	// package starts) works too: New recognises it from its HELLO reply
	// and speaks RESP2 to it, with a connection of its own for pub/sub.
	Addr string
	// Redis is an existing rueidis client to use instead of Addr. The
	// caller owns it: Client.Close does not close it. A cluster client
	// (rueidis.ClientModeCluster) makes worqr use sharded pub/sub. A
	// client of a miniredis needs DisableCache, AlwaysRESP2 and
	// ForceSingleClient (or use Addr, or the embedded package).
	Redis rueidis.Client
	// Prefix namespaces every key and channel. Clients with different
	// prefixes never see each other's queues, workers or events. Default
	// DefaultPrefix; it must not contain '{' or '}'.
	Prefix string
	// Logger receives worqr's logs. Default slog.Default().
	Logger *slog.Logger
	// MaxTaskSize is the largest task in bytes. Default DefaultMaxTaskSize.
	MaxTaskSize int
	// PoisonLimit is the poison-pill guard: a task whose holding workers
	// died soon after starting it (within twice the reclaiming worker's
	// TTL) this many times in a row goes to the dead letters, kind
	// KindPoison, instead of killing worker after worker. A death counts
	// only when the holder had been up for that window before it started
	// the task and the task was never held for that long (so a persistent
	// task is never buried by its holders' restarts); see the README's
	// Poison pills. 0 means DefaultPoisonLimit; negative turns the guard
	// off. Give every client of a fleet the same.
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
	// client's calls keep in Redis: its enqueues, dequeues, finishes and
	// the rest then count nothing. Stats are on by default: the client
	// counts starts, finishes, retries and their times itself and writes
	// them about once a second per queue, on a call it makes anyway; the
	// rarer events cost their script a read and a write of one hash. Give
	// every client of a fleet the same setting, or the stats count only
	// what the others do.
	NoStats bool
}

// Client enqueues, cancels and inspects work, and creates Workers. It is
// safe for concurrent use.
type Client struct {
	rdb         rueidis.Client
	ownsRedis   bool
	store       *store.Store // every call to Redis goes through it
	log         *slog.Logger
	maxTaskSize int
	obs         observers
	deadBounds  store.DeadBounds
	poisonLimit int // 0: the guard is off

	// enqueues, finishes and retries merge overlapping Enqueue, Finish
	// and Retry calls (a handler's error included) on a queue.
	enqueues *coalescer[[]byte, string]
	finishes *coalescer[*Process, store.Outcome]
	retries  *coalescer[store.RetryRef, store.Outcome]

	waiters *waiters // Wait's subscriptions
	// statsFlusher writes the stats counts of queues that went idle.
	statsFlusher *statsFlusher
	// born is when the client was made: the beat its workers renew on
	// counts from it (see beatIn).
	born time.Time

	// reclaimers reclaim dead peers for the client's workers, one for
	// the workers of each TTL and RenewInterval (see reclaimer).
	reclaimMu  sync.Mutex
	reclaimers map[groupKey]*reclaimer // guarded by reclaimMu
	// beats renew the leases of the client's workers, one for the
	// workers of each TTL and RenewInterval (see beat).
	beatsMu sync.Mutex
	beats   map[groupKey]*beat // guarded by beatsMu

	closed  atomic.Bool
	mu      sync.Mutex           // guards workers
	workers map[*Worker]struct{} // guarded by mu
}

// New creates a Client. Given Addr, rueidis connects at once: New fails
// with ErrUnavailable if Redis cannot be reached, and with
// ErrInvalidOptions if Redis refuses the URL's credentials; it then sends
// one HELLO 3 to tell a miniredis (see Options.Addr). Given
// Options.Redis it does not contact Redis, except on a Redis Cluster,
// which it asks once whether it has sharded pub/sub.
func New(opts Options) (*Client, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("%w: prefix %q must not contain '{' or '}'", ErrInvalidOptions, opts.Prefix)
	}
	if opts.MaxTaskSize == 0 {
		opts.MaxTaskSize = DefaultMaxTaskSize
	}
	if opts.MaxTaskSize < 0 {
		return nil, fmt.Errorf("%w: negative MaxTaskSize", ErrInvalidOptions)
	}
	if opts.DeadLetters.MaxCount < 0 || opts.DeadLetters.MaxAge < 0 {
		return nil, fmt.Errorf("%w: negative DeadLetters bound", ErrInvalidOptions)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{
		rdb:         opts.Redis,
		log:         opts.Logger,
		maxTaskSize: opts.MaxTaskSize,
		obs:         newObservers(opts.Observer),
		deadBounds:  opts.DeadLetters.bounds(),
		poisonLimit: poisonLimit(opts.PoisonLimit),
		workers:     make(map[*Worker]struct{}),
		reclaimers:  make(map[groupKey]*reclaimer),
		beats:       make(map[groupKey]*beat),
		born:        time.Now(),
	}
	c.waiters = newWaiters(c)
	c.enqueues = newCoalescer(maxTasksPerScript, c.enqueueJoined)
	c.finishes = newCoalescer(maxTasksPerScript, c.finishJoined)
	c.retries = newCoalescer(maxTasksPerScript, func(ctx context.Context, queue string, refs []store.RetryRef) ([]store.Outcome, error) {
		return c.store.Retry(ctx, queue, refs)
	})
	if c.rdb == nil {
		rdb, err := dial(opts.Addr, opts.Logger)
		if err != nil {
			return nil, err
		}
		c.rdb, c.ownsRedis = rdb, true
	}
	sharded := store.DetectSharded(c.rdb, opts.Prefix+":probe")
	c.store = store.New(c.rdb, opts.Prefix, sharded, !opts.NoStats)
	c.statsFlusher = newStatsFlusher(c.store, c.log)
	return c, nil
}

func dial(addr string, log *slog.Logger) (rueidis.Client, error) {
	if addr == "" {
		return nil, fmt.Errorf("%w: neither Addr nor Redis given", ErrInvalidOptions)
	}
	var opt rueidis.ClientOption
	if strings.Contains(addr, "://") {
		parsed, err := rueidis.ParseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		opt = parsed
	} else {
		opt.InitAddress = strings.Split(addr, ",")
	}
	// worqr never reads a value twice, so client-side caching buys nothing.
	opt.DisableCache = true
	rdb, err := newRedis(opt)
	if err != nil || opt.AlwaysRESP2 || !isMiniredis(rdb) {
		return rdb, err
	}
	// miniredis answers HELLO 3 but then refuses every command on a
	// connection that has a subscription, which RESP3 allows and rueidis
	// relies on (it carries pub/sub on its command connection). Over
	// RESP2 rueidis gives pub/sub a connection of its own; miniredis has
	// no client tracking and no real cluster (it answers CLUSTER SLOTS,
	// which would make rueidis take it for one).
	rdb.Close()
	log.Debug("worqr: the Redis is miniredis; speaking RESP2 to it", "addr", addr)
	opt.AlwaysRESP2, opt.ForceSingleClient = true, true
	return newRedis(opt)
}

// newRedis opens a rueidis client, sorting its errors into refused
// credentials and outages.
func newRedis(opt rueidis.ClientOption) (rueidis.Client, error) {
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		if refusedLogin(err) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return rdb, nil
}

// isMiniredis reports whether the server names itself "miniredis" in
// its HELLO reply. HELLO 3 leaves a connection rueidis set up with
// HELLO 3 as it was; an error (a server before Redis 6, a user not
// allowed HELLO) or a slow answer means a real Redis.
func isMiniredis(rdb rueidis.Client) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hello, err := rdb.Do(ctx, rdb.B().Hello().Protover(3).Build()).AsMap()
	if err != nil {
		return false
	}
	server, ok := hello["server"]
	if !ok {
		return false
	}
	name, err := server.ToString()
	return err == nil && name == "miniredis"
}

// refusedLogin reports whether Redis answered the connection handshake by
// refusing the credentials: wrong ones, none where some are needed, or a
// user not allowed to log in. Retrying cannot help, so it is not an outage.
func refusedLogin(err error) bool {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "NOPERM")
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
	c.statsFlusher.close(ctx)
	c.flushStats(ctx, "")
	c.waiters.close()
	if c.ownsRedis {
		c.rdb.Close()
	}
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

// fail wraps an error from Redis. Errors that are not replies from the
// server (connection refused, reset, client closing) also wrap
// ErrUnavailable; context errors stay as they are.
func (c *Client) fail(op, queue string, err error) error {
	where := op
	if queue != "" {
		where = fmt.Sprintf("%s %q", op, queue)
	}
	if err == nil {
		return fmt.Errorf("worqr: %s: unexpected reply", where)
	}
	if re, isReply := rueidis.IsRedisErr(err); isReply && strings.Contains(re.Error(), "only (P)SUBSCRIBE") {
		// A server that refuses commands on a connection with a
		// subscription: miniredis, given a rueidis client speaking RESP3.
		return fmt.Errorf("worqr: %s: %w: this server (miniredis?) refuses commands on a connection with a subscription; "+
			"give worqr its address as Options.Addr, or a rueidis client with AlwaysRESP2, DisableCache and ForceSingleClient, "+
			"or use the package github.com/worqr/worqr/embedded: %w", where, ErrInvalidOptions, err)
	}
	if re, isReply := rueidis.IsRedisErr(err); isReply && !transientReply(re.Error()) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("worqr: %s: %w", where, err)
	}
	return fmt.Errorf("worqr: %s: %w: %w", where, ErrUnavailable, err)
}

// transientReply reports whether an error reply is one of a server that
// did not run the command and will again soon: loading its data after a
// restart, busy with a long script, a replica cut off from its master or
// being promoted, a cluster between states. These are outages like a
// closed connection (ErrUnavailable), so a caller retries: a handler's
// outcome written as Redis reloads is written once it has (found by the
// chaos run: it was given up, and the process stayed held).
func transientReply(msg string) bool {
	code, _, _ := strings.Cut(msg, " ")
	switch code {
	case "LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN":
		return true
	}
	return false
}
