package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/worqr/worqr"
)

// batchSize is the batch scenario's batch size, and its single-task
// runtime's handlers per queue: both hold that many tasks at once.
const batchSize = 100

// runBatch drains pre-loaded queues of no-op tasks with one worker three
// times in the same run: with Handle (batchSize handlers per queue), then
// with HandleBatch (batches of batchSize, one batch in hand per queue: as
// many tasks as Handle's), then with two batches in hand (one filling
// while the other runs). The ratios are the batch rates over the
// single-task one: what taking tasks in batches costs or saves the runtime
// when the handler itself costs nothing (a batch handler pays off by what
// its one call saves over batchSize).
func runBatch(ctx context.Context, b *bench) (*result, error) {
	perQueue := b.pick(50_000, 2_000)
	total := int64(perQueue * len(b.queues))
	run := uuid.NewString()[:8]
	res := &result{}

	single, _, err := drain(ctx, b, perQueue, run, nil, worqr.HandleOptions{Concurrency: batchSize})
	if err != nil {
		return nil, fmt.Errorf("single: %w", err)
	}
	batched, err := drainBatches(ctx, b, perQueue, run, worqr.BatchOptions{Size: batchSize, MaxWait: 5 * time.Millisecond})
	if err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	two, err := drainBatches(ctx, b, perQueue, run, worqr.BatchOptions{Size: batchSize, MaxWait: 5 * time.Millisecond, Batches: 2})
	if err != nil {
		return nil, fmt.Errorf("two batches: %w", err)
	}
	singleRate := float64(total) / single.elapsed.Seconds()
	rate := float64(total) / batched.elapsed.Seconds()
	rate2 := float64(total) / two.elapsed.Seconds()
	res.add("batch_tasks_per_s", "tasks/s", rate)
	res.add("batch2_tasks_per_s", "tasks/s", rate2)
	res.add("single_tasks_per_s", "tasks/s", singleRate)
	res.add("ratio", "×", rate/singleRate)
	res.add("batch2_ratio", "×", rate2/singleRate)
	batched.perTask(res, "batch_", total, scripts...)
	two.perTask(res, "batch2_", total, scripts...)
	single.perTask(res, "single_", total, scripts...)
	for _, s := range []struct {
		name string
		sp   span
	}{{"batch_", batched}, {"batch2_", two}, {"single_", single}} {
		if s.sp.serverOK {
			res.add(s.name+"redis_calls_per_task", "calls", float64(s.sp.calls["evalsha"]+s.sp.calls["eval"])/float64(total))
		}
	}
	return res, nil
}

// drainBatches is drain with a batch handler: it fills the queues, then
// times one worker serving each with HandleBatch(opts) until every task
// has finished.
func drainBatches(ctx context.Context, b *bench, perQueue int, run string, opts worqr.BatchOptions) (span, error) {
	c, prefix, err := b.newClientWith(worqr.Options{})
	if err != nil {
		return span{}, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	if err := fill(ctx, c, b.queues, perQueue, run); err != nil {
		return span{}, err
	}
	win := openWindow(ctx, b.rdb)
	p := &pool{want: int64(perQueue * len(b.queues)), all: make(chan struct{})}
	count := p.handler(nil)
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return span{}, err
	}
	p.workers = append(p.workers, w)
	defer p.close(ctx)
	for _, q := range b.queues {
		err := w.HandleBatch(ctx, q, func(ctx context.Context, batch []*worqr.Process) error {
			for _, proc := range batch {
				_ = count(ctx, proc)
			}
			return nil
		}, opts)
		if err != nil {
			return span{}, err
		}
	}
	err = p.wait(ctx, c, b.queues, timeout(b.cfg.short))
	return win.close(ctx), err
}
