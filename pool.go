package worqr

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/slotpolicy"
	"github.com/worqr/worqr/worqrtype"
)

// Order is how a pool of handler slots shared by several queues
// (HandleQueues) chooses the queue a free slot goes to.
type Order uint8

const (
	// OrderStrict gives a free slot to the first queue, in the order
	// given, that may hold tasks: a later queue gets slots only while every
	// earlier one is empty (or paused, rate limited, at its concurrency
	// limit or at its MaxSlots).
	OrderStrict Order = iota
	// OrderShared shares the slots among the queues that may hold tasks
	// in proportion to their shares (QueueSpec.Share), by smooth weighted
	// round robin counted in tasks: with shares 3 and 1, both queues
	// backed up and slots freeing one at a time, starts go A A B A,
	// A A B A, ... Slots that are free together go to one queue in one
	// dequeue where it has room for them, and the shares even out over
	// the next ones.
	OrderShared
)

// String names the order.
func (o Order) String() string {
	switch o {
	case OrderStrict:
		return "strict"
	case OrderShared:
		return "shared"
	}
	return fmt.Sprintf("Order(%d)", uint8(o))
}

// QueueSpec is one queue of a pool served by HandleQueues.
type QueueSpec struct {
	// Queue is the queue's name.
	Queue string
	// Handler runs the queue's tasks. Exactly one of Handler and Batch is
	// set.
	Handler Handler
	// Batch, set instead of Handler, runs the queue's tasks in batches, as
	// HandleBatch does, under BatchOptions: each task of a batch holds
	// one of the pool's slots, and is settled on its own. The queue holds
	// at most Size × Batches slots (fewer under a smaller MaxSlots), and
	// its share of the pool is counted in tasks, as any queue's: a batch
	// that does not get Size slots starts MaxWait after its first task.
	Batch BatchHandler
	// BatchOptions configure Batch, and are the queue's options then:
	// Options must be zero. They must be zero without Batch.
	BatchOptions BatchOptions
	// Share is the queue's share of the slots under OrderShared (default
	// 1); OrderStrict ignores it. (A task's weight, the Weight enqueue
	// option, is another thing: the slots of its queue's concurrency
	// limit it holds.)
	Share int
	// MaxSlots caps how many of the pool's slots the queue holds at once.
	// Zero means no cap but the pool's Concurrency.
	MaxSlots int
	// Options are the queue's own: Retry, Timeout, PanicIsPermanent,
	// Middleware and Events work as they do for Handle. Its Concurrency
	// must be zero: the slots are the pool's (PoolOptions.Concurrency),
	// and a queue's share of them is MaxSlots. A batched queue's options
	// are its BatchOptions instead.
	Options HandleOptions
}

// PoolOptions configure HandleQueues.
type PoolOptions struct {
	// Concurrency is how many handlers may run at once across the pool's
	// queues: the slots they share. Zero means DefaultConcurrency, as for
	// HandleOptions.Concurrency.
	Concurrency int
	// Order decides which queue a free slot goes to. Default OrderStrict.
	Order Order
}

// HandleQueues serves several queues from one pool of Concurrency handler
// slots: at most that many handlers run at once across the queues, and a
// free slot goes to a queue with work in the pool's Order (strict: the
// first queue given that has work; shared: in proportion to the
// queues' shares). Like Handle it never polls: a slot freeing or a work
// event on any of the queues makes it dequeue, several tasks at a time when
// several slots are free, and a pool with free slots that found every
// queue empty is parked in each queue's idle set, where an enqueue on any
// of them wakes it. Everything else is per queue, as with Handle: leases,
// reclaim, fencing, retries, dead letters, controls, StopWork, events and
// middleware. A queue may be served in batches (QueueSpec.Batch), as by
// HandleBatch, from the pool's slots. If one of the queues cannot be
// served, those already served are left again and the error is returned.
func (w *Worker) HandleQueues(ctx context.Context, queues []QueueSpec, opts PoolOptions) error {
	size, err := validatePool(queues, opts)
	if err != nil {
		return err
	}
	s := engine.NewScheduler(w.core.Host(), size, opts.Order == OrderStrict, false)
	events := make([]engine.Events, len(queues))
	for i, q := range queues {
		share := q.Share
		if share == 0 {
			share = 1
		}
		h, hopts, maxSlots := q.Handler, q.Options, q.MaxSlots
		var b *batcher
		if q.Batch != nil {
			// HandleBatch's batcher, on a member of the pool: it joins
			// each task's handler call to a batch, as it does on its own
			// runtime.
			b = newCheckedBatcher(w, q.Queue, q.Batch, q.BatchOptions)
			h, hopts = b.join, b.handleOptions()
			if maxSlots == 0 || maxSlots > b.eo.Slots() {
				maxSlots = b.eo.Slots()
			}
		}
		events[i] = engine.Events(hopts.Events)
		r := s.Add(q.Queue, callOf(chain(h, w.opts.Middleware, hopts.Middleware)), memberOptions(hopts), maxSlots, share)
		if b != nil {
			b.attach(r)
		}
	}
	return engine.ServePool(ctx, w.core.Host(), &w.core.Env, s, events)
}

// validatePool checks a pool's queues and options (HandleQueues') and
// returns its slots.
func validatePool(queues []QueueSpec, opts PoolOptions) (int, error) {
	if len(queues) == 0 {
		return 0, fmt.Errorf("worqr: handle queues: no queue: %w", ErrInvalidOptions)
	}
	size, err := slotpolicy.Slots(opts.Concurrency, DefaultConcurrency)
	if err != nil {
		return 0, fmt.Errorf("worqr: handle queues: %w", err)
	}
	if opts.Order > OrderShared {
		return 0, fmt.Errorf("worqr: handle queues: unknown order %v: %w", opts.Order, ErrInvalidOptions)
	}
	seen := make(map[string]bool, len(queues))
	for _, q := range queues {
		switch {
		case q.Handler == nil && q.Batch == nil:
			return 0, fmt.Errorf("worqr: handle queues: %q: nil handler: %w", q.Queue, ErrInvalidOptions)
		case q.Handler != nil && q.Batch != nil:
			return 0, fmt.Errorf("worqr: handle queues: %q: both Handler and Batch are set: %w", q.Queue, ErrInvalidOptions)
		case q.Batch == nil && !reflect.ValueOf(q.BatchOptions).IsZero():
			return 0, fmt.Errorf("worqr: handle queues: %q: BatchOptions without Batch: %w", q.Queue, ErrInvalidOptions)
		case q.Batch != nil && !reflect.ValueOf(q.Options).IsZero():
			// One set of options per queue: a batched queue's are its
			// BatchOptions, as for HandleBatch.
			return 0, fmt.Errorf("worqr: handle queues: %q: Options set on a batched queue (its options are BatchOptions): %w", q.Queue, ErrInvalidOptions)
		case q.Batch != nil && checkBatch(q.Batch, q.BatchOptions) != "":
			return 0, fmt.Errorf("worqr: handle queues: %q: batch: %s: %w", q.Queue, checkBatch(q.Batch, q.BatchOptions), ErrInvalidOptions)
		case q.Share < 0:
			return 0, fmt.Errorf("worqr: handle queues: %q: negative share: %w", q.Queue, ErrInvalidOptions)
		case q.MaxSlots < 0:
			return 0, fmt.Errorf("worqr: handle queues: %q: negative max slots: %w", q.Queue, ErrInvalidOptions)
		case q.Options.Concurrency != 0:
			// The pool's slots are PoolOptions.Concurrency; a queue's
			// share of them is MaxSlots.
			return 0, fmt.Errorf("worqr: handle queues: %q: Options.Concurrency is set (a queue's cap in a pool is MaxSlots): %w", q.Queue, ErrInvalidOptions)
		case seen[q.Queue]:
			return 0, fmt.Errorf("worqr: handle queues: %q given twice: %w", q.Queue, ErrInvalidOptions)
		}
		seen[q.Queue] = true
	}
	return size, nil
}

// PoolSlots is a snapshot of the handler slots of one Handle or
// HandleQueues call of a worker (see worqrtype.PoolSlots).
type PoolSlots = worqrtype.PoolSlots

// Slots returns a snapshot of the handler slots of the worker's pools,
// those with a queue still served, for saturation metrics (busy against
// free). It reads counts the pools keep anyway, one pool's lock at a
// time: nothing is counted for it on the way of a task, so a collector may
// call it on every scrape.
func (w *Worker) Slots() []PoolSlots { return w.core.Slots() }

// Slots returns Worker.Slots of every worker of the client that is not
// closed, in the order of their ids.
func (c *Client) Slots() []PoolSlots {
	var out []PoolSlots
	for _, w := range c.core.Workers() {
		out = append(out, w.Core.Slots()...)
	}
	slices.SortStableFunc(out, func(a, b PoolSlots) int { return strings.Compare(a.Worker, b.Worker) })
	return out
}
