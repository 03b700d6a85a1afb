// Package worqr runs work across many processes with Redis as the only
// moving part.
//
// A task is an opaque byte string in a FIFO queue. A Worker holds a lease
// in Redis that it renews; it dequeues tasks into processes that it owns,
// then finishes or stops them. When a worker's lease expires its peers put
// its processes back at the front of their queues and wake the queue, so
// nobody runs a separate cleaner. Every state change is one Lua script whose
// keys share one hash tag, and notifications are published from inside the
// same script.
package worqr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/scripts"
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
	// maxTasksPerScript bounds the arguments of one enqueue script call;
	// larger batches are split and pipelined in the same round trip.
	maxTasksPerScript = 1000
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
	// ErrNoTask is returned by Dequeue when the queue has no waiting task.
	ErrNoTask = errors.New("worqr: no task waiting")
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
	// task was cancelled; Stop dropped it instead of requeuing it.
	ErrTaskCancelled = errors.New("worqr: task cancelled")
	// ErrQueueDeleted is returned by Stop and Check for a process whose
	// queue was deleted; Stop dropped it instead of recreating the queue.
	ErrQueueDeleted = errors.New("worqr: queue deleted")
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
	Addr string
	// Redis is an existing rueidis client to use instead of Addr. The
	// caller owns it: Client.Close does not close it. A cluster client
	// (rueidis.ClientModeCluster) makes worqr use sharded pub/sub.
	Redis rueidis.Client
	// Prefix namespaces every key and channel. Clients with different
	// prefixes never see each other's queues, workers or events. Default
	// DefaultPrefix; it must not contain '{' or '}'.
	Prefix string
	// Logger receives worqr's logs. Default slog.Default().
	Logger *slog.Logger
	// MaxTaskSize is the largest task in bytes. Default DefaultMaxTaskSize.
	MaxTaskSize int
}

// Client enqueues, cancels and inspects work, and creates Workers. It is
// safe for concurrent use.
type Client struct {
	rdb         rueidis.Client
	ownsRedis   bool
	sharded     bool // Redis Cluster: SPUBLISH / SSUBSCRIBE
	keys        keys
	scripts     *scripts.Set
	log         *slog.Logger
	maxTaskSize int

	// enqueues and finishes merge overlapping Enqueue and Finish calls on
	// a queue.
	enqueues *coalescer[[]byte, struct{}]
	finishes *coalescer[*Process, int64]

	closed  atomic.Bool
	mu      sync.Mutex
	workers map[*Worker]struct{}
}

// New creates a Client. Given Addr, rueidis connects at once: New fails
// with ErrUnavailable if Redis cannot be reached, and with
// ErrInvalidOptions if Redis refuses the URL's credentials. Given
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
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{
		rdb:         opts.Redis,
		keys:        keys{prefix: opts.Prefix},
		log:         opts.Logger,
		maxTaskSize: opts.MaxTaskSize,
		workers:     make(map[*Worker]struct{}),
	}
	c.enqueues = newCoalescer(maxTasksPerScript, c.enqueueJoined)
	c.finishes = newCoalescer(maxTasksPerScript, c.finishJoined)
	if c.rdb == nil {
		rdb, err := dial(opts.Addr)
		if err != nil {
			return nil, err
		}
		c.rdb, c.ownsRedis = rdb, true
	}
	c.sharded = shardedPubSub(c.rdb, c.keys.prefix+":probe")
	c.scripts = scripts.Load(c.sharded)
	return c, nil
}

func dial(addr string) (rueidis.Client, error) {
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
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		if refusedLogin(err) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return rdb, nil
}

// shardedPubSub tells whether events should use sharded pub/sub. On a
// cluster, ordinary PUBLISH is broadcast to every node; a shard channel in
// the queue's slot stays on the queue's shard and follows it through
// failovers and slot migrations. Every client of one cluster must choose
// alike, or none hears the others' events, so the choice must not depend
// on what a client sees of the topology when it is made (a one-master
// cluster that gains a replica or a shard, a replica down for a while):
// on a cluster, sharded pub/sub is used whenever the server has it (Redis
// 7). Servers that only emulate a cluster (miniredis answers CLUSTER
// SLOTS) or predate it answer SPUBLISH with an unknown-command error, and
// keep ordinary pub/sub, which is correct on any cluster. The probe
// publishes an empty message, which no worker acts on.
func shardedPubSub(rdb rueidis.Client, probe string) bool {
	if rdb.Mode() != rueidis.ClientModeCluster {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := rdb.Do(ctx, rdb.B().Spublish().Channel(probe).Message("").Build()).Error()
	if rerr, ok := rueidis.IsRedisErr(err); ok && strings.Contains(strings.ToLower(rerr.Error()), "unknown command") {
		return false
	}
	return true
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
// (see Worker.Close), then the Redis connection if the client opened it.
// Further calls return ErrClientClosed. Close is safe to call twice.
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
	if c.ownsRedis {
		c.rdb.Close()
	}
	return errors.Join(errs...)
}

// Enqueue adds a task at the back of a queue and wakes its workers.
//
// Calls on the same queue that overlap are sent together: while one is in
// flight, those that arrive wait for it and then go out as one script call
// (and one work event), in the order they arrived. A call alone goes out
// at once.
//
// If Enqueue returns an error wrapping ErrUnavailable the task may or may
// not have been queued (the reply was lost); retrying can queue it twice.
// The same holds when ctx ends while the call waits for its reply.
func (c *Client) Enqueue(ctx context.Context, queue string, task []byte) error {
	if err := c.check(ctx, "enqueue", queue); err != nil {
		return err
	}
	if len(task) > c.maxTaskSize {
		return fmt.Errorf("worqr: enqueue %q: task is %d bytes, limit %d: %w", queue, len(task), c.maxTaskSize, ErrTaskTooLarge)
	}
	if _, err := c.enqueues.do(ctx, queue, task); err != nil {
		if err == ctx.Err() { // gave up waiting for a batch
			return fmt.Errorf("worqr: enqueue %q: %w", queue, err)
		}
		return err
	}
	return nil
}

// enqueueJoined is the coalescer's send for Enqueue: one batch of tasks
// from overlapping calls.
func (c *Client) enqueueJoined(ctx context.Context, queue string, tasks [][]byte) ([]struct{}, error) {
	if err := c.enqueue(ctx, queue, tasks); err != nil {
		return nil, err
	}
	return make([]struct{}, len(tasks)), nil
}

// EnqueueBatch adds tasks, in order, at the back of a queue in one round
// trip, and wakes its workers once per 1,000 tasks. Either every task is
// checked and sent or, on a validation error, none is.
func (c *Client) EnqueueBatch(ctx context.Context, queue string, tasks [][]byte) error {
	if err := c.check(ctx, "enqueue", queue); err != nil {
		return err
	}
	for i, t := range tasks {
		if len(t) > c.maxTaskSize {
			return fmt.Errorf("worqr: enqueue %q: task %d is %d bytes, limit %d: %w", queue, i, len(t), c.maxTaskSize, ErrTaskTooLarge)
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	return c.enqueue(ctx, queue, tasks)
}

// enqueue runs the enqueue script for checked tasks, 1,000 a call, in one
// round trip, and registers the queue if it is new.
func (c *Client) enqueue(ctx context.Context, queue string, tasks [][]byte) error {
	k := c.keys.queue(queue)
	calls := make([]scripts.Call, 0, (len(tasks)+maxTasksPerScript-1)/maxTasksPerScript)
	for start := 0; start < len(tasks); start += maxTasksPerScript {
		chunk := tasks[start:min(start+maxTasksPerScript, len(tasks))]
		args := make([]string, 0, 2+len(chunk))
		args = append(args, k.channel, queue)
		// One copy of the chunk's bytes into one string, sliced per task,
		// rather than an allocation per task.
		size := 0
		for _, t := range chunk {
			size += len(t)
		}
		var all strings.Builder
		all.Grow(size)
		for _, t := range chunk {
			all.Write(t)
		}
		joined := all.String()
		for _, t := range chunk {
			args = append(args, joined[:len(t)])
			joined = joined[len(t):]
		}
		calls = append(calls, scripts.Call{Script: c.scripts.Enqueue, Keys: []string{k.waiting, k.meta, k.idle}, Args: args})
	}
	unregistered := false
	var errs []error
	for _, res := range scripts.ExecMulti(ctx, c.rdb, calls) {
		n, err := res.AsInt64()
		if err != nil {
			errs = append(errs, c.fail("enqueue", queue, err))
			continue
		}
		unregistered = unregistered || n == 1
	}
	if unregistered {
		errs = append(errs, c.register(ctx, queue))
	}
	return errors.Join(errs...)
}

// register adds a queue to the registry, then confirms that in the queue's
// meta hash. Until it is confirmed every enqueue asks again, so a failure
// here, or a crash, only delays registration. The order matters against
// DeleteQueue, which unregisters first and then deletes the queue: a queue
// holding tasks is never left out of the registry for good; at worst an
// empty deleted one is left in, and Queues filters those out.
func (c *Client) register(ctx context.Context, queue string) error {
	if err := c.rdb.Do(ctx, c.rdb.B().Sadd().Key(c.keys.queues()).Member(queue).Build().Pin()).Error(); err != nil {
		return c.fail("register queue", queue, err)
	}
	if err := c.scripts.Registered.Exec(ctx, c.rdb, []string{c.keys.queue(queue).meta}, nil).Error(); err != nil {
		return c.fail("register queue", queue, err)
	}
	return nil
}

// CancelResult says what Cancel found.
type CancelResult struct {
	// Removed counts waiting copies of the task that were removed.
	Removed int64
	// Marked counts in-flight processes holding the task that were marked
	// cancelled; their workers get a cancel event.
	Marked int64
}

// Cancel removes every waiting copy of a task from a queue, marks every
// in-flight process holding it as cancelled, and publishes a cancel event.
// A worker that missed the event finds out when it resubscribes, or when it
// next touches the process (Stop and Check return ErrTaskCancelled).
func (c *Client) Cancel(ctx context.Context, queue string, task []byte) (CancelResult, error) {
	if err := c.check(ctx, "cancel", queue); err != nil {
		return CancelResult{}, err
	}
	if len(task) > c.maxTaskSize {
		return CancelResult{}, fmt.Errorf("worqr: cancel %q: %w", queue, ErrTaskTooLarge)
	}
	k := c.keys.queue(queue)
	res, err := c.scripts.Cancel.Exec(ctx, c.rdb, []string{k.waiting, k.procs, k.meta}, []string{k.channel, string(task)}).AsIntSlice()
	if err != nil || len(res) != 2 {
		return CancelResult{}, c.fail("cancel", queue, err)
	}
	return CancelResult{Removed: res[0], Marked: res[1]}, nil
}

// DeleteQueue removes a queue's waiting tasks and the queue itself, and
// publishes a delete event. Processes already in flight can still finish;
// stopping them, or reclaiming them from a dead worker, drops them instead
// of bringing the queue back. It returns the number of waiting tasks
// dropped. A later Enqueue creates the queue afresh.
func (c *Client) DeleteQueue(ctx context.Context, queue string) (int64, error) {
	if err := c.check(ctx, "delete", queue); err != nil {
		return 0, err
	}
	if err := c.rdb.Do(ctx, c.rdb.B().Srem().Key(c.keys.queues()).Member(queue).Build().Pin()).Error(); err != nil {
		return 0, c.fail("delete", queue, err)
	}
	k := c.keys.queue(queue)
	n, err := c.scripts.Delete.Exec(ctx, c.rdb, []string{k.waiting, k.procs, k.meta}, []string{k.channel}).AsInt64()
	if err != nil {
		// The queue may still exist and be confirmed as registered: put it
		// back in the registry (best effort) rather than hide it.
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = c.rdb.Do(undo, c.rdb.B().Sadd().Key(c.keys.queues()).Member(queue).Build().Pin()).Error()
		return 0, c.fail("delete", queue, err)
	}
	return n, nil
}

// Queues lists the queues that exist: enqueued to, or served by a worker,
// and not deleted since. It reads the registry, never KEYS or SCAN.
func (c *Client) Queues(ctx context.Context) ([]string, error) {
	if err := c.checkCtx(ctx, "queues"); err != nil {
		return nil, err
	}
	names, err := c.rdb.Do(ctx, c.rdb.B().Smembers().Key(c.keys.queues()).Build().Pin()).AsStrSlice()
	if err != nil {
		return nil, c.fail("queues", "", err)
	}
	if len(names) == 0 {
		return names, nil
	}
	cmds := make(rueidis.Commands, len(names))
	for i, name := range names {
		cmds[i] = c.rdb.B().Hexists().Key(c.keys.queue(name).meta).Field("name").Build().Pin()
	}
	live := names[:0]
	for i, res := range c.rdb.DoMulti(ctx, cmds...) {
		ok, err := res.AsBool()
		if err != nil {
			return nil, c.fail("queues", "", err)
		}
		if ok {
			live = append(live, names[i])
		}
	}
	return live, nil
}

// QueueLen returns the number of tasks waiting in a queue.
func (c *Client) QueueLen(ctx context.Context, queue string) (int64, error) {
	if err := c.check(ctx, "queue length", queue); err != nil {
		return 0, err
	}
	n, err := c.rdb.Do(ctx, c.rdb.B().Llen().Key(c.keys.queue(queue).waiting).Build().Pin()).AsInt64()
	if err != nil {
		return 0, c.fail("queue length", queue, err)
	}
	return n, nil
}

// Peek returns the task that would be dequeued next, or ErrNoTask.
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

// Range returns waiting tasks in dequeue order, from position start to stop
// inclusive, where 0 is the next task out. Negative positions count from
// the back, as in LRANGE (-1 is the last task).
func (c *Client) Range(ctx context.Context, queue string, start, stop int64) ([][]byte, error) {
	if err := c.check(ctx, "range", queue); err != nil {
		return nil, err
	}
	// The front of the queue is the right end of the list, so position i
	// is list index -(i+1) and the slice comes back reversed.
	cmd := c.rdb.B().Lrange().Key(c.keys.queue(queue).waiting).Start(-(stop + 1)).Stop(-(start + 1)).Build().Pin()
	vals, err := c.rdb.Do(ctx, cmd).AsStrSlice()
	if err != nil {
		return nil, c.fail("range", queue, err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[len(vals)-1-i] = []byte(v)
	}
	return out, nil
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

func stateOf(b byte) ProcessState {
	switch b {
	case 'c':
		return StateCancelled
	case 'd':
		return StateDeleted
	default:
		return StateActive
	}
}

// ProcessInfo describes an in-flight process, for inspection.
type ProcessInfo struct {
	ID    string
	Queue string
	Owner string // the worker id that holds it
	State ProcessState
	Task  []byte
}

// Processes lists the in-flight processes of a queue with their owners.
func (c *Client) Processes(ctx context.Context, queue string) ([]ProcessInfo, error) {
	if err := c.check(ctx, "processes", queue); err != nil {
		return nil, err
	}
	all, err := c.rdb.Do(ctx, c.rdb.B().Hgetall().Key(c.keys.queue(queue).procs).Build().Pin()).AsStrMap()
	if err != nil {
		return nil, c.fail("processes", queue, err)
	}
	out := make([]ProcessInfo, 0, len(all))
	for id, v := range all {
		if len(v) < 1+workerIDLen {
			continue // not ours; never written by worqr
		}
		out = append(out, ProcessInfo{ID: id, Queue: queue, Owner: v[1 : 1+workerIDLen], State: stateOf(v[0]), Task: []byte(v[1+workerIDLen:])})
	}
	sortProcessInfos(out)
	return out, nil
}

// WorkerInfo describes a live worker.
type WorkerInfo struct {
	ID string
	// LeaseLeftMillis is how long its lease has left, by the Redis clock.
	LeaseLeftMillis int64
}

// Workers lists the workers whose lease is live.
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	if err := c.checkCtx(ctx, "workers"); err != nil {
		return nil, err
	}
	vals, err := c.scripts.Live.Exec(ctx, c.rdb, []string{c.keys.workers()}, nil).AsStrSlice()
	if err != nil {
		return nil, c.fail("workers", "", err)
	}
	out := make([]WorkerInfo, 0, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		left, _ := strconv.ParseInt(vals[i+1], 10, 64)
		out = append(out, WorkerInfo{ID: vals[i], LeaseLeftMillis: left})
	}
	return out, nil
}

// WorkerQueues lists the queues a worker serves.
func (c *Client) WorkerQueues(ctx context.Context, workerID string) ([]string, error) {
	if err := c.checkCtx(ctx, "worker queues"); err != nil {
		return nil, err
	}
	qs, err := c.rdb.Do(ctx, c.rdb.B().Smembers().Key(c.keys.workerQueues(workerID)).Build().Pin()).AsStrSlice()
	if err != nil {
		return nil, c.fail("worker queues", "", err)
	}
	return qs, nil
}

// checkCtx validates what every call needs: an open client and a live
// context.
func (c *Client) checkCtx(ctx context.Context, op string) error {
	if c.closed.Load() {
		return fmt.Errorf("worqr: %s: %w", op, ErrClientClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("worqr: %s: %w", op, err)
	}
	return nil
}

// check is checkCtx plus a valid queue name.
func (c *Client) check(ctx context.Context, op, queue string) error {
	if err := c.checkCtx(ctx, op); err != nil {
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
	if _, isReply := rueidis.IsRedisErr(err); isReply || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("worqr: %s: %w", where, err)
	}
	return fmt.Errorf("worqr: %s: %w: %w", where, ErrUnavailable, err)
}
