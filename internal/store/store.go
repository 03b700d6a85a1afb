// Package store is worqr's one gateway to Redis. Every command and script
// worqr sends goes through a method here, which builds its keys and
// arguments and returns typed results; the root package never builds a
// key or reads a raw reply. Scripts live in internal/scripts, one file per
// operation; the layout of values in Redis is in records.go.
//
// Errors are returned as rueidis gives them (the root package wraps them
// with its sentinels), except ErrLeaseGone, which a script reports.
package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/coalesce"
	"github.com/worqr/worqr/internal/scripts"
)

// ErrLeaseGone is returned by calls that need the worker's lease to be
// live (in the registry, or on a queue) when it is not.
var ErrLeaseGone = errors.New("lease gone")

// ErrDuplicate is returned by Enqueue, with the id of the task that holds
// the unique key, when one does: nothing was added.
var ErrDuplicate = errors.New("duplicate")

// ErrStepNotReady is returned by EnqueueSteps for a step of a home
// workflow that is not ready (cancelled, ended): nothing was added.
var ErrStepNotReady = errors.New("step not ready")

// Op names a call to Redis, for a Fault.
type Op string

// The calls, one per method that talks to Redis.
const (
	OpEnqueue        Op = "enqueue"
	OpRegisterQueue  Op = "register queue"
	OpDequeue        Op = "dequeue"
	OpFinish         Op = "finish"
	OpRequeue        Op = "requeue"
	OpBury           Op = "bury"
	OpPromote        Op = "promote"
	OpTick           Op = "tick"     // a periodic schedule's tick
	OpProgress       Op = "progress" // a progress report
	OpControl        Op = "control"
	OpCancel         Op = "cancel"
	OpDeleteQueue    Op = "delete queue"
	OpStates         Op = "states"
	OpRelease        Op = "release"
	OpRead           Op = "read"
	OpRegisterWorker Op = "register worker"
	OpRenew          Op = "renew"
	OpRenewQueue     Op = "renew queue"
	OpServe          Op = "serve"
	OpJoin           Op = "join"
	OpLeaveQueue     Op = "leave queue"
	OpDeregister     Op = "deregister"
	OpWorkerSlots    Op = "worker slots" // a worker's handler slots, written as Handle starts or StopWork ends
	OpExpired        Op = "expired"
	OpPublish        Op = "publish"
	OpSubscribe      Op = "subscribe"
	OpCheck          Op = "check"
	OpDeadLetters    Op = "dead letters"         // list them
	OpRequeueDead    Op = "requeue dead letters" // one or all
	OpDeleteDead     Op = "delete dead letters"  // one or all
	OpStats          Op = "stats"                // a client's stats counts, written by a call of their own
	OpWorkflow       Op = "workflow"             // a workflow's script, in its own slot (the queue told to a Fault is "wf:<id>")
)

// Fault is a test seam: when set, it runs before every call to Redis with
// the call's name and the queue it is about ("" for calls about workers,
// the registries, or several queues at once). An error it returns is
// returned in place of the call's (the call is not sent); it may also
// block, until ctx ends, to stand for a node that hangs.
type Fault func(ctx context.Context, op Op, queue string) error

// Store sends worqr's commands and scripts to one Redis (or cluster).
type Store struct {
	rdb     rueidis.Client
	keys    Keys
	scripts *scripts.Set
	sharded bool
	fault   atomic.Pointer[Fault]
	stats   *statsBuf // the stats counted here (statsbuf.go); nil when off
	// clock is the client's: the store reads the process's time through
	// it (SetClock). Redis's time stays Redis's.
	clock clock.Clock
	// apart makes queue leases be renewed apart from the registry lease,
	// as they must be on a Cluster (see JointRenewals).
	apart atomic.Bool
	// aggLimit is the most bytes an aggregated task's payload takes (see
	// SetAggregateLimit); 0: no bound.
	aggLimit int

	// queueKeys caches the keys of queues (Keys.Queue builds 20 strings),
	// up to maxCachedQueues of them.
	queueKeysCache sync.Map // queue name -> *QueueKeys
	queueKeysCount atomic.Int64

	// idHints guess the ids of bulk enqueues (idhints.go), which bulk
	// sends, one batch per queue at a time (see sendBulk).
	idHints idHints
	bulk    *coalesce.Coalescer[[]*enqueueCall, []rueidis.RedisResult]
	// bulkCalls is the script calls a round trip of a bulk enqueue takes:
	// maxBulkCalls, fewer in tests, so that a batch of several round
	// trips stays small.
	bulkCalls int

	hubsMu sync.Mutex // guards hubs
	// hubs are the subscriptions, one per channel listened to, each shared
	// by the channel's listeners (see pubsub.go).
	hubs map[string]*hub
}

// New makes a Store on rdb for the keys under prefix. sharded selects
// sharded pub/sub (SPUBLISH, SSUBSCRIBE) for events, on Redis Cluster;
// stats makes the scripts keep each queue's stats (see Stats).
func New(rdb rueidis.Client, prefix string, sharded, stats bool) *Store {
	s := &Store{rdb: rdb, keys: NewKeys(prefix), scripts: scripts.Load(sharded, stats), sharded: sharded, clock: clock.Real()}
	if stats {
		s.stats = newStatsBuf(s.clock)
	}
	s.bulk = coalesce.New(maxBulkJoined, s.sendBulk)
	s.bulkCalls = maxBulkCalls
	s.apart.Store(rdb.Mode() == rueidis.ClientModeCluster)
	return s
}

// SetAggregateLimit bounds the payload of the aggregated tasks the
// store's scripts make to n bytes (the client's task size bound; 0: no
// bound): a gathering flushes early rather than pass it. Call it before
// the store is used.
func (s *Store) SetAggregateLimit(n int) { s.aggLimit = max(n, 0) }

// SetClock makes the store read the time, and set its timers, on c (the
// client's clock). Call it before the store is used.
func (s *Store) SetClock(c clock.Clock) {
	s.clock = clock.Or(c)
	if s.stats != nil {
		s.stats.clock = s.clock
	}
}

// A batch of whole entries goes maxBulkCalls script calls a round trip,
// and up to maxBulkJoined such groups of a queue's batches go together
// (see sendBulk): a pipeline holds at most 256 calls, 256,000 tasks, so
// that Redis starts on the first calls while the client sends the next.
const (
	maxBulkCalls  = 16
	maxBulkJoined = 16
)

// maxCachedQueues bounds the queues whose keys the Store keeps.
const maxCachedQueues = 1024

// queueKeys is s.keys.Queue(queue), cached: the hot paths (dequeue,
// finish) would otherwise build the same 20 strings on every call.
func (s *Store) queueKeys(queue string) QueueKeys {
	if k, ok := s.queueKeysCache.Load(queue); ok {
		return *k.(*QueueKeys)
	}
	k := s.keys.Queue(queue)
	if s.queueKeysCount.Load() < maxCachedQueues {
		if _, loaded := s.queueKeysCache.LoadOrStore(queue, &k); !loaded {
			s.queueKeysCount.Add(1)
		}
	}
	return k
}

// JointRenewals reports whether a worker's queue leases are renewed in the
// script that renews its registry lease (Keepalive). They are on a single
// Redis, where a script may touch keys of any slot, so that a worker costs
// one call per renewal however many queues it serves. On a Cluster each
// queue lease is renewed apart, on its own node.
func (s *Store) JointRenewals() bool { return !s.apart.Load() }

// RenewApart makes queue leases be renewed apart from the registry lease,
// as on a Cluster: for tests that stand for a Cluster's nodes, each
// failing on its own, on one Redis.
func (s *Store) RenewApart() { s.apart.Store(true) }

// Keys are the store's key names.
func (s *Store) Keys() Keys { return s.keys }

// Sharded reports whether events use sharded pub/sub.
func (s *Store) Sharded() bool { return s.sharded }

// Redis is the client the store uses, for tests that look at or break
// Redis directly.
func (s *Store) Redis() rueidis.Client { return s.rdb }

// SetFault installs f (nil removes it). For tests.
func (s *Store) SetFault(f Fault) {
	if f == nil {
		s.fault.Store(nil)
		return
	}
	s.fault.Store(&f)
}

// enter runs the fault, if any, before a call.
func (s *Store) enter(ctx context.Context, op Op, queue string) error {
	if f := s.fault.Load(); f != nil {
		return (*f)(ctx, op, queue)
	}
	return nil
}

// run runs one script.
func (s *Store) run(ctx context.Context, op Op, queue string, sc *scripts.Script, keys, args []string) (rueidis.RedisResult, error) {
	if err := s.enter(ctx, op, queue); err != nil {
		return rueidis.RedisResult{}, err
	}
	return sc.Exec(ctx, s.rdb, keys, args), nil
}

// runMulti pipelines script calls, one result per call.
func (s *Store) runMulti(ctx context.Context, op Op, queue string, calls []scripts.Call) ([]rueidis.RedisResult, error) {
	if err := s.enter(ctx, op, queue); err != nil {
		return nil, err
	}
	return scripts.ExecMulti(ctx, s.rdb, calls), nil
}

// b is the command builder.
func (s *Store) b() rueidis.Builder { return s.rdb.B() }

// Scripts are the scripts the store runs, for tests that recognise them
// by their SHA1.
func (s *Store) Scripts() *scripts.Set { return s.scripts }
