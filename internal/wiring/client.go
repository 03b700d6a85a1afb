// Package wiring builds a client's components under internal/ and wires
// them together: the Redis connection and the store, the coalescers of
// enqueues, finishes and retries, the workflow carries and sweeps, the
// stats flusher, Wait's subscriptions, the reclaimers and the beats, the
// checks every call makes; and, for each of the client's workers, what
// each of its components takes of it and of the client, and its core's
// host (engine.CoreHost). The root's Client and Worker hold what it
// builds, and add what needs the public types.
package wiring

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

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/checker"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/coalesce"
	"github.com/worqr/worqr/internal/connect"
	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/flows"
	"github.com/worqr/worqr/internal/observe"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/reclaim"
	"github.com/worqr/worqr/internal/statsflush"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
	"github.com/worqr/worqr/internal/waiters"
	"github.com/worqr/worqr/internal/workflow"
	"github.com/worqr/worqr/worqrtype"
)

// Config is what a client is made of: its options, checked and
// defaulted, and the root's defaults its components take.
type Config struct {
	Redis       rueidis.Client // nil: dial Addr
	Addr        string
	Prefix      string
	Logger      *slog.Logger
	MaxTaskSize int
	PoisonLimit int // 0: the guard is off
	DeadBounds  store.DeadBounds
	Observer    any
	Tracer      enqueue.Tracer
	NoStats     bool
	Clock       clock.Clock // nil: the system's

	// The root's defaults: a worker's TTL and RenewInterval, a task's
	// attempt budget, the least time between two progress writes, a
	// stop's wait for handlers, and the workflow sweeps' period and age.
	TTL, RenewInterval time.Duration
	MaxAttempts        int
	ProgressInterval   time.Duration
	CancelWait         time.Duration
	SweepEvery         time.Duration
	SweepAge           time.Duration
}

// UnsurePasses is how many renewals look for processes after a dequeue's
// reply was lost.
const UnsurePasses = 3

// Client is a client's components, wired together. It is safe for
// concurrent use.
type Client struct {
	cfg       Config
	Redis     rueidis.Client
	ownsRedis bool
	Store     *store.Store // every call to Redis goes through it
	Log       *slog.Logger
	Clock     clock.Clock // every time.Now and timer of the engine
	Signals   testsignal.Set
	// MaxTaskSize is the largest task in bytes.
	MaxTaskSize int
	// Obs are the observer interfaces Config.Observer implements, and
	// Observer is it, for the root's own (FenceObserver).
	Obs      observe.Set
	Observer any
	Tracer   enqueue.Tracer
	// Outage logs Redis going out of reach, and coming back, once for
	// the failures of all the calls the client makes on its own.
	Outage *outage.Outage

	// Enqueues, Finishes and Retries merge overlapping Enqueue, Finish
	// and Retry calls (a handler's error included) on a queue;
	// KindEnqueues joins Enqueue calls with a kind and no other option,
	// per kind and queue (the key: the kind, a NUL byte, the queue).
	Enqueues     *coalesce.Coalescer[[]byte, string]
	KindEnqueues *coalesce.Coalescer[[]byte, string]
	Finishes     *coalesce.Coalescer[*engine.Proc, store.Outcome]
	Retries      *coalesce.Coalescer[store.RetryRef, store.Outcome]

	Waiters *waiters.Waiters // Wait's subscriptions
	Flows   *flows.Flows     // workflow tasks' notices carried to their workflows
	Carrier *flows.Carrier   // what a carry of notices does
	Release *flows.Release   // the enqueue of workflows' ready steps
	// StatsFlusher writes the stats counts of queues that went idle.
	StatsFlusher *statsflush.Flusher

	// Reclaimers reclaim dead peers for the client's workers, and Beats
	// renew their leases, one of each for the workers of each TTL and
	// RenewInterval.
	Reclaimers *reclaim.Reclaimers[Member]
	Beats      *beat.Beats[engine.Renewal, engine.BeatMember]

	closed  atomic.Bool
	mu      sync.Mutex           // guards workers
	workers map[*Worker]struct{} // guarded by mu
}

// New makes a client's components: given no Redis client, it dials
// cfg.Addr, bounded by ctx.
func New(ctx context.Context, cfg Config) (*Client, error) {
	var dialOpt rueidis.ClientOption
	if cfg.Redis == nil {
		var err error
		if dialOpt, err = connect.Options(cfg.Addr); err != nil {
			return nil, err
		}
	}
	clk := clock.Or(cfg.Clock)
	born := clk.Now() // the client's beats count from it
	c := &Client{
		cfg:         cfg,
		Redis:       cfg.Redis,
		Log:         cfg.Logger,
		Clock:       clk,
		MaxTaskSize: cfg.MaxTaskSize,
		Obs:         observe.New(cfg.Observer),
		Observer:    cfg.Observer,
		Tracer:      cfg.Tracer,
		Outage:      outage.New(cfg.Logger, clk, proc.Retryable),
		workers:     make(map[*Worker]struct{}),
	}
	c.Enqueues = coalesce.New(store.MaxTasksPerScript, func(ctx context.Context, queue string, tasks [][]byte) ([]string, error) {
		return c.Enqueue(ctx, queue, tasks, enqueue.Options{})
	})
	c.KindEnqueues = coalesce.New(store.MaxTasksPerScript, func(ctx context.Context, key string, tasks [][]byte) ([]string, error) {
		kind, queue, _ := strings.Cut(key, "\x00")
		return c.Enqueue(ctx, queue, tasks, enqueue.Options{Kind: kind})
	})
	c.Finishes = coalesce.New(store.MaxTasksPerScript, func(ctx context.Context, queue string, ps []*engine.Proc) ([]store.Outcome, error) {
		return engine.FinishJoined(ctx, c.Store, queue, ps)
	})
	c.Retries = coalesce.New(store.MaxTasksPerScript, func(ctx context.Context, queue string, refs []store.RetryRef) ([]store.Outcome, error) {
		return c.Store.Retry(ctx, queue, refs)
	})
	if c.Redis == nil {
		rdb, err := connect.Dial(ctx, dialOpt, cfg.Addr, cfg.Logger)
		if err != nil {
			return nil, err
		}
		c.Redis, c.ownsRedis = rdb, true
	}
	sharded := store.DetectSharded(ctx, c.Redis, cfg.Prefix+":probe")
	if err := ctx.Err(); err != nil && c.Redis.Mode() == rueidis.ClientModeCluster {
		// The probe's answer is unknown: guessing could make this client
		// deaf to its peers' events.
		if c.ownsRedis {
			c.Redis.Close()
		}
		return nil, fmt.Errorf("worqr: asking the cluster for sharded pub/sub: %w: %w", errs.ErrUnavailable, err)
	}
	c.Store = store.New(c.Redis, cfg.Prefix, sharded, !cfg.NoStats)
	c.Store.SetClock(clk)
	c.Store.SetAggregateLimit(cfg.MaxTaskSize)
	c.Release = &flows.Release{
		Store: c.Store,
		Fail:  c.Fail,
		Enqueued: func(ctx context.Context, queue string, ids []string) {
			c.Obs.Enqueued(ctx, worqrtype.EnqueueEvent{Queue: queue, TaskIDs: ids})
		},
		Cancel: func(ctx context.Context, queue, id string) error {
			_, err := c.CancelTask(ctx, queue, id)
			return err
		},
	}
	c.Carrier = &flows.Carrier{Store: c.Store, Fail: c.Fail, Enqueue: c.Release.Enqueue, BatchMax: store.MaxTasksPerScript, Log: c.Log}
	c.Flows = flows.New(&flows.Env{
		Clock:    c.Clock,
		Log:      c.Log,
		Carry:    c.Carrier.Batch,
		Sweep:    c.Carrier.Sweep,
		BatchMax: store.MaxTasksPerScript,
		Every:    cfg.SweepEvery,
		Age:      cfg.SweepAge,
		Swept:    &c.Signals.Swept,
	})
	c.StatsFlusher = statsflush.New(c.Store, c.Log, c.Clock)
	c.Waiters = waiters.New(c.Store)
	c.Reclaimers = reclaim.New[Member](&reclaim.Env{
		Clock:  c.Clock,
		Store:  c.Store,
		Outage: c.Outage,
		Fail:   c.Fail,
		Reclaimed: func(ctx context.Context, dead string, tasks, poison, dropped int64) {
			c.Obs.Reclaimed(ctx, worqrtype.ReclaimEvent{DeadWorker: dead, Tasks: tasks, Poison: poison, Dropped: dropped})
		},
		Looked:       &c.Signals.Looked,
		PoisonLimit:  cfg.PoisonLimit,
		DeadBounds:   cfg.DeadBounds,
		DefaultClaim: cfg.RenewInterval,
	})
	c.Beats = beat.New[engine.Renewal, engine.BeatMember](&beat.Env{
		Clock:  c.Clock,
		Store:  c.Store,
		Outage: c.Outage,
		Log:    c.Log,
		Fail:   c.Fail,
		Born:   born,
		Beat:   &c.Signals.Beat,
	})
	return c, nil
}

// Close closes every worker of the client still running, writes the
// stats counts it holds, then closes the Redis connection if the client
// opened it. A second call does nothing.
func (c *Client) Close(ctx context.Context) error {
	if c.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, w := range c.Workers() {
		errs = append(errs, w.Close(ctx))
	}
	c.Flows.Close()
	c.StatsFlusher.Close()
	c.FlushStats(ctx, "")
	c.Waiters.Close()
	if c.ownsRedis {
		c.Redis.Close()
	}
	// After the connection closed: a batch still being sent fails at once.
	c.Enqueues.Close()
	c.KindEnqueues.Close()
	c.Finishes.Close()
	c.Retries.Close()
	return errors.Join(errs...)
}

// Workers are the client's workers not closed, in no order.
func (c *Client) Workers() []*Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	workers := make([]*Worker, 0, len(c.workers))
	for w := range c.workers {
		workers = append(workers, w)
	}
	return workers
}

// ValidateCtx checks what every call needs: an open client and a live
// context.
func (c *Client) ValidateCtx(ctx context.Context, op string) error {
	if c.closed.Load() {
		return fmt.Errorf("worqr: %s: %w", op, errs.ErrClientClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("worqr: %s: %w", op, err)
	}
	return nil
}

// Validate is ValidateCtx plus a valid queue name.
func (c *Client) Validate(ctx context.Context, op, queue string) error {
	if err := c.ValidateCtx(ctx, op); err != nil {
		return err
	}
	return enqueue.CheckQueue(op, queue)
}

// Fail wraps an error from Redis (store.Fail).
func (c *Client) Fail(op, queue string, err error) error { return store.Fail(op, queue, err) }

// Enqueue sends checked tasks and tells the observer (enqueue.Send).
func (c *Client) Enqueue(ctx context.Context, queue string, tasks [][]byte, o enqueue.Options) ([]string, error) {
	return enqueue.Send(ctx, c.Store, c.Obs.Enqueued, queue, tasks, o)
}

// CancelTask cancels the task id of queue, and tells the workflows of
// the steps it ended (the root's CancelTask).
func (c *Client) CancelTask(ctx context.Context, queue, id string) (store.CancelCount, error) {
	if err := c.Validate(ctx, "cancel", queue); err != nil {
		return store.CancelCount{}, err
	}
	if id == "" {
		return store.CancelCount{}, fmt.Errorf("worqr: cancel %q: empty task id: %w", queue, errs.ErrInvalidOptions)
	}
	n, notices, err := c.Store.CancelID(ctx, queue, id)
	if err != nil {
		return store.CancelCount{}, c.Fail("cancel", queue, err)
	}
	c.Carrier.Cancelled(ctx, queue, notices)
	return n, nil
}

// EnqueueSteps enqueues a workflow's ready steps (flows.Release).
func (c *Client) EnqueueSteps(ctx context.Context, id string, ready []store.ReadyStep) error {
	return c.Release.Enqueue(ctx, []flows.Ready{{ID: id, Steps: ready}})[0]
}

// FlushStats writes the stats counts the client holds, for every queue
// or one (queue set). A failure is logged, not returned: it costs counts
// only, never work.
func (c *Client) FlushStats(ctx context.Context, queue string) {
	sent := c.Outage.Begin()
	err := c.Store.FlushStats(ctx, queue)
	c.StatsFlusher.Written()
	if err == nil {
		c.Outage.OK(sent)
	} else if err = c.Fail("write stats", queue, err); !c.Outage.Failed(sent, "stats", err) {
		c.Log.Warn("worqr: could not write stats counts", "queue", queue, "err", err)
	}
}

// flowEnded carries the notice of a workflow task that a worker of the
// client just ended, finished or dead (the script that ended it wrote
// the notice), without holding up the caller; read is what reading the
// notice would answer, if the script told it (nil: the carry reads it).
func (c *Client) flowEnded(queue, flow, taskID string, want engine.Outcome, read *store.NoticeRead) {
	status := "ok"
	if want == engine.Dead {
		status = "dead"
	}
	if n, ok := store.ParseNotice(flow + "," + taskID + "," + status); ok {
		n.Read = read
		c.Flows.Ended(queue, n)
	}
}

// CheckEnv is what a consistency check takes of the client.
func (c *Client) CheckEnv() *checker.Env {
	return &checker.Env{
		Store: c.Store,
		Fail:  c.Fail,
		Valid: func(queue string) bool { return enqueue.CheckQueue("", queue) == nil },
		Reclaim: func(ctx context.Context, id string) (reclaim.Reclaimed, error) {
			return c.Reclaimers.Worker(ctx, c.Log, id, 2*c.cfg.TTL, true)
		},
		StepQueue:    workflow.SpecQueue,
		EnqueueSteps: c.EnqueueSteps,
		StepTask:     workflow.StepTask,
		ResumeRelease: func(ctx context.Context, queue, id string, end store.StepEnd) error {
			// The end as the workflow recorded it, stamp and all: a
			// replay that records nothing and carries the release on.
			n := store.Notice{Workflow: id, Step: end.Step, Task: end.Task, Status: end.Status,
				Read: &store.NoticeRead{At: end.At, Found: true}}
			errs, err := c.Carrier.Batch(ctx, queue, []store.Notice{n})
			if err != nil {
				return err
			}
			return errors.Join(errs...)
		},
	}
}
