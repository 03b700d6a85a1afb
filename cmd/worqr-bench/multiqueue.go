package main

import (
	"context"

	"github.com/google/uuid"

	"github.com/worqr/worqr"
)

// runMultiqueue drains the same number of no-op tasks twice with one
// worker and -concurrency handlers: spread over three queues served by one
// pool of slots (HandleQueues, weighted 3:2:1), and on one queue served by
// Handle (the baseline). The two alternate, each twice, so that drift on a
// shared machine hits both alike. The ratio is the pool's throughput over
// the single queue's.
func runMultiqueue(ctx context.Context, b *bench) (*result, error) {
	total := b.pick(60_000, 3_000)
	queues := queueNames(3)
	conc := b.cfg.concurrency
	res := &result{}
	var single, multi span
	for range 2 {
		d, err := drainWith(ctx, b, queues[:1], total, func(ctx context.Context, w *worqr.Worker, h worqr.Handler) error {
			return w.Handle(ctx, queues[0], h, worqr.HandleOptions{Concurrency: conc})
		})
		if err != nil {
			return nil, err
		}
		single = single.plus(d)
		d, err = drainWith(ctx, b, queues, total/3, func(ctx context.Context, w *worqr.Worker, h worqr.Handler) error {
			specs := make([]worqr.QueueSpec, len(queues))
			for i, q := range queues {
				specs[i] = worqr.QueueSpec{Queue: q, Handler: h, Share: len(queues) - i}
			}
			return w.HandleQueues(ctx, specs, worqr.PoolOptions{Concurrency: conc, Order: worqr.OrderShared})
		})
		if err != nil {
			return nil, err
		}
		multi = multi.plus(d)
	}
	singleTasks, multiTasks := int64(2*total), int64(2*(total/3)*3)
	singleRate := float64(singleTasks) / single.elapsed.Seconds()
	multiRate := float64(multiTasks) / multi.elapsed.Seconds()
	res.add("pool_tasks_per_s", "tasks/s", multiRate)
	res.add("single_tasks_per_s", "tasks/s", singleRate)
	res.add("ratio", "×", multiRate/singleRate)
	multi.perTask(res, "pool_", multiTasks, scripts...)
	single.perTask(res, "single_", singleTasks, scripts...)
	if multi.serverOK && single.serverOK {
		calls := func(sp span, n int64) float64 {
			return float64(sp.calls["evalsha"]+sp.calls["eval"]) / float64(n)
		}
		res.add("pool_redis_calls_per_task", "calls", calls(multi, multiTasks))
		res.add("single_redis_calls_per_task", "calls", calls(single, singleTasks))
	}
	res.note("pool: %d slots over %d queues (weighted 3:2:1); baseline: Handle on one queue with %d", conc, len(queues), conc)
	return res, nil
}

// drainWith fills the queues with perQueue no-op tasks each (enqueued
// with opts) under a client of its own, then times one worker, serving
// them as serve says, from its start until every task has finished, with
// what Redis and this process spent meanwhile.
func drainWith(ctx context.Context, b *bench, queues []string, perQueue int, serve func(context.Context, *worqr.Worker, worqr.Handler) error, opts ...worqr.EnqueueOption) (span, error) {
	c, prefix, err := b.newClient()
	if err != nil {
		return span{}, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	if err := fill(ctx, c, queues, perQueue, uuid.NewString()[:8], opts...); err != nil {
		return span{}, err
	}
	want := int64(perQueue * len(queues))
	p := &pool{want: want, all: make(chan struct{})}
	defer p.close(ctx)
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return span{}, err
	}
	p.workers = append(p.workers, w)
	win := openWindow(ctx, b.rdb)
	if err := serve(ctx, w, p.handler(nil)); err != nil {
		return span{}, err
	}
	err = p.wait(ctx, c, queues, timeout(b.cfg.short))
	return win.close(ctx), err
}

// plus is the sum of two spans, for measurements made in parts.
func (sp span) plus(o span) span {
	out := span{
		elapsed: sp.elapsed + o.elapsed, serverOK: (sp.serverOK || sp.elapsed == 0) && o.serverOK,
		serverCPU: sp.serverCPU + o.serverCPU, clientCPU: sp.clientCPU + o.clientCPU,
		calls: map[string]int64{}, usec: map[string]int64{},
	}
	for _, m := range []span{sp, o} {
		for k, v := range m.calls {
			out.calls[k] += v
		}
		for k, v := range m.usec {
			out.usec[k] += v
		}
	}
	return out
}
