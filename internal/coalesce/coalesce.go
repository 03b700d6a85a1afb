// Package coalesce joins concurrent calls on the same queue into one
// script call.
package coalesce

import (
	"context"
	"slices"
	"sync"

	"github.com/worqr/worqr/internal/startstop"
)

// Coalescer merges concurrent calls on the same queue into one script
// call. A call on a queue with nothing in flight goes out at once, alone.
// Calls that arrive while one is in flight wait and go out together, as
// soon as it returns, so batches grow with the load and nothing ever
// waits on a timer. One batch per queue is in flight at a time.
//
// Redis spends about a microsecond on every call a script makes and as
// much again to start the script, far more than on the data of one task,
// so under load this is what keeps worqr's cost per task near a bare
// LPUSH's.
type Coalescer[I, O any] struct {
	// max is the most items in one batch.
	max int
	// send runs one batch and returns one output per item, or an error
	// for all of them.
	send func(ctx context.Context, queue string, items []I) ([]O, error)

	mu     sync.Mutex
	queues map[string]*pending[I, O] // queues with a batch in flight
	// senders are the goroutines that send the batches queued behind one
	// that returned (next); close waits for them.
	senders startstop.Group
}

// pending are the batches of one queue waiting to go out behind the one in
// flight, oldest first; the last one takes new items until it is full.
type pending[I, O any] struct {
	batches []*batch[I, O]
}

type batch[I, O any] struct {
	ctx   context.Context // the first caller's, without its cancellation
	items []I
	gone  []bool // callers that gave up before the batch went out; nil while none did
	// later are the callbacks of the items given by then, by index (a zero
	// one for an item do waits for); nil while the batch has none. Like
	// items, guarded by the coalescer's mu until the batch is sent.
	later []later[O]
	sent  bool
	done  chan struct{}
	out   []O
	err   error
}

// later is an item given by then: the batch calls done when it returns,
// or with ctx's error, leaving the item out, if ctx ended before it went
// out.
type later[O any] struct {
	ctx  context.Context
	done Callback[O]
}

// Callback is told the output of an item given to then, or its error. A
// pointer to the caller's own record of the item is one without an
// allocation, where a closure over that record is one more for every
// item.
type Callback[O any] interface {
	Done(out O, err error)
}

// Func is a function as a Callback.
type Func[O any] func(out O, err error)

// Done calls f.
func (f Func[O]) Done(out O, err error) { f(out, err) }

// batchCap is the room a waiting batch starts with: it grows by appends
// beyond it.
const batchCap = 16

// New is a Coalescer of batches of up to max items, sent by send.
func New[I, O any](max int, send func(context.Context, string, []I) ([]O, error)) *Coalescer[I, O] {
	return &Coalescer[I, O]{max: max, send: send, queues: make(map[string]*pending[I, O])}
}

// Do runs item in the next batch of queue and returns its output. If ctx
// ends before the batch went out, the item is left out of it; if it ends
// later, do returns at once and the outcome is unknown to the caller.
func (c *Coalescer[I, O]) Do(ctx context.Context, queue string, item I) (O, error) {
	var zero O
	b, i := c.join(ctx, queue, item, nil)
	if b.done == nil { // sent at once, on this goroutine
		c.next(queue)
		return b.output(0)
	}
	select {
	case <-b.done:
		return b.output(i)
	case <-ctx.Done():
		c.mu.Lock()
		if !b.sent {
			b.leaveOut(i, c.max)
		}
		c.mu.Unlock()
		return zero, ctx.Err()
	}
}

// Then runs item in the next batch of queue, as Do does, but does not
// wait for it: done is called with its output when the batch returns, on
// the goroutine that sent it (this one, if nothing was in flight: then
// only after it returned), or with ctx's error, leaving the item out, if
// ctx ended before the batch went out. The caller's goroutine is free
// for other work meanwhile, instead of parking until the answer comes
// and being woken for it. done must be quick: the batches queued behind
// wait for it, behind a batch sent at once too (what one of them finds,
// such as a Finish finding the lease gone, which fences the worker, must
// not overtake the outcome done records).
func (c *Coalescer[I, O]) Then(ctx context.Context, queue string, item I, done Callback[O]) {
	if b, _ := c.join(ctx, queue, item, done); b.done == nil {
		done.Done(b.output(0))
		c.next(queue)
	}
}

// join adds item to the next batch of queue (with done, for then) and
// returns the batch and the item's index in it. With nothing in flight
// the batch is sent at once, on this goroutine, before join returns; it
// has no done channel then, and the caller calls next once it has used
// the output: the batches behind stay queued until then.
func (c *Coalescer[I, O]) join(ctx context.Context, queue string, item I, done Callback[O]) (*batch[I, O], int) {
	c.mu.Lock()
	p, busy := c.queues[queue]
	if !busy {
		// Nothing in flight: send at once, on this goroutine.
		c.queues[queue] = &pending[I, O]{}
		c.mu.Unlock()
		b := &batch[I, O]{ctx: ctx, items: []I{item}, sent: true}
		c.run(queue, b)
		return b, 0
	}
	var b *batch[I, O]
	if n := len(p.batches); n > 0 && len(p.batches[n-1].items) < c.max {
		b = p.batches[n-1]
	} else {
		b = &batch[I, O]{ctx: context.WithoutCancel(ctx), done: make(chan struct{}), items: make([]I, 0, min(c.max, batchCap))}
		p.batches = append(p.batches, b)
	}
	i := len(b.items)
	b.items = append(b.items, item)
	if done != nil && b.later == nil {
		b.later = make([]later[O], i, cap(b.items))
	}
	if b.later != nil {
		b.later = append(b.later, later[O]{ctx: ctx, done: done})
	}
	c.mu.Unlock()
	return b, i
}

// leaveOut marks item i as not to be sent (its caller gave up); max is
// the most items a batch holds.
func (b *batch[I, O]) leaveOut(i, max int) {
	if b.gone == nil {
		b.gone = make([]bool, max)
	}
	b.gone[i] = true
}

// output is the batch's output for item i, or its error.
func (b *batch[I, O]) output(i int) (O, error) {
	if b.err != nil {
		var zero O
		return zero, b.err
	}
	return b.out[i], nil
}

// run sends a batch's items, less those whose callers gave up (or whose
// contexts, given to then, ended), records the outcome and calls the
// callbacks then was given. The batch is marked sent, so gone no longer
// changes but here.
func (c *Coalescer[I, O]) run(queue string, b *batch[I, O]) {
	for i, l := range b.later {
		if l.done != nil && l.ctx.Err() != nil {
			b.leaveOut(i, c.max)
		}
	}
	items, at := b.items, []int(nil)
	if slices.Contains(b.gone, true) {
		items = nil
		for i, it := range b.items {
			if !b.gone[i] { // gone has at least as many as items
				items = append(items, it)
				at = append(at, i)
			}
		}
	}
	if len(items) > 0 {
		out, err := c.send(b.ctx, queue, items)
		switch {
		case err != nil:
			b.err = err
		case at == nil:
			b.out = out
		default:
			b.out = make([]O, len(b.items))
			for j, i := range at {
				b.out[i] = out[j]
			}
		}
	}
	if b.done != nil {
		close(b.done)
	}
	for i, l := range b.later {
		switch {
		case l.done == nil: // do's, woken by done
		case b.gone != nil && b.gone[i]:
			var zero O
			l.done.Done(zero, l.ctx.Err())
		default:
			l.done.Done(b.output(i))
		}
	}
}

// next sends the batches that queued up behind the one that just returned,
// on a goroutine of its own (tracked: close waits for it) so that the
// caller that sent it returns now, and forgets the queue once none is
// left. Once the coalescer is closed the caller sends them itself.
func (c *Coalescer[I, O]) next(queue string) {
	c.mu.Lock()
	if len(c.queues[queue].batches) == 0 {
		delete(c.queues, queue)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if !c.senders.Go(func() { c.sendQueued(queue) }) {
		c.sendQueued(queue)
	}
}

// sendQueued sends the batches queued on queue, one after another, until
// none is left, and forgets the queue.
func (c *Coalescer[I, O]) sendQueued(queue string) {
	for {
		c.mu.Lock()
		p := c.queues[queue]
		if len(p.batches) == 0 {
			delete(c.queues, queue)
			c.mu.Unlock()
			return
		}
		b := p.batches[0]
		p.batches = p.batches[1:]
		b.sent = true
		c.mu.Unlock()
		c.run(queue, b)
	}
}

// Queued counts the calls (items) and the batches of queue that wait
// behind the one in flight.
func (c *Coalescer[I, O]) Queued(queue string) (items, batches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.queues[queue]
	if p == nil {
		return 0, 0
	}
	for _, b := range p.batches {
		items += len(b.items)
	}
	return items, len(p.batches)
}

// Close waits for the batches being sent behind others; later ones are
// sent by their callers' goroutines.
func (c *Coalescer[I, O]) Close() { c.senders.Close() }
