package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/worqr/worqr"
)

// aggregateSize is the aggregate scenario's MaxSize: the tasks one
// aggregated task gathers.
const aggregateSize = 100

// runAggregate enqueues the same no-op tasks twice in the same run, in
// batches of 1,000, and times each from the first enqueue until a worker
// (aggregateSize handlers per queue) has handled every one: first as
// plain tasks, then with an aggregation key, gathered aggregateSize to a
// task. The ratio is the aggregated rate, in tasks gathered, over the
// plain one: what a task costs end to end when it travels in a gathering.
func runAggregate(ctx context.Context, b *bench) (*result, error) {
	perQueue := b.pick(50_000, 2_000)
	total := int64(perQueue * len(b.queues))
	run := uuid.NewString()[:8]
	res := &result{}
	plain, plainEnq, err := aggregateRun(ctx, b, perQueue, run, false)
	if err != nil {
		return nil, fmt.Errorf("plain: %w", err)
	}
	gathered, gatheredEnq, err := aggregateRun(ctx, b, perQueue, run, true)
	if err != nil {
		return nil, fmt.Errorf("aggregated: %w", err)
	}
	plainRate := float64(total) / plain.Seconds()
	rate := float64(total) / gathered.Seconds()
	res.add("aggregate_tasks_per_s", "tasks/s", rate)
	res.add("plain_tasks_per_s", "tasks/s", plainRate)
	res.add("ratio", "×", rate/plainRate)
	// The enqueues alone: gathering costs each task a sorted-set entry
	// where a plain task is one list push.
	res.add("aggregate_enqueue_tasks_per_s", "tasks/s", float64(total)/gatheredEnq.Seconds())
	res.add("plain_enqueue_tasks_per_s", "tasks/s", float64(total)/plainEnq.Seconds())
	return res, nil
}

// aggregateRun times one pass of runAggregate on a client of its own:
// the enqueues, with Aggregate when aggregate is set, and the handling of
// every task, counted by the members of each aggregated task; and the
// enqueues' part of it.
func aggregateRun(ctx context.Context, b *bench, perQueue int, run string, aggregate bool) (all, enqueues time.Duration, err error) {
	c, prefix, err := b.newClientWith(worqr.Options{})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	total := int64(perQueue * len(b.queues))
	var handled atomic.Int64
	done := make(chan struct{})
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = w.Shutdown(ctx) }()
	var opts []worqr.EnqueueOption
	for _, q := range b.queues {
		if aggregate {
			err := c.SetAggregation(ctx, q, worqr.AggregateSettings{MaxSize: aggregateSize, MaxDelay: time.Minute}, worqr.CreateQueue())
			if err != nil {
				return 0, 0, err
			}
		}
		err := w.Handle(ctx, q, func(_ context.Context, p *worqr.Process) error {
			n := int64(1)
			if ms, ok := p.Aggregated(); ok {
				n = int64(len(ms))
			}
			if handled.Add(n) == total {
				close(done)
			}
			return nil
		}, worqr.HandleOptions{Concurrency: aggregateSize})
		if err != nil {
			return 0, 0, err
		}
	}
	if aggregate {
		opts = append(opts, worqr.Aggregate("k"))
	}
	start := time.Now()
	if err := fill(ctx, c, b.queues, perQueue, run, opts...); err != nil {
		return 0, 0, err
	}
	enqueues = time.Since(start)
	select {
	case <-done:
	case <-time.After(timeout(b.cfg.short)):
		return 0, 0, errors.New("timed out before every task was handled")
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	return time.Since(start), enqueues, nil
}
