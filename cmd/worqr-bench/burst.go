package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/worqr/worqr"
)

// runBurst enqueues tasks (EnqueueBatch of 1,000 with worqr.At) all due at
// one instant about 2 s ahead on the Redis clock, to one worker already
// serving the queues with -concurrency no-op handlers per queue, and
// measures from the due instant until the first handler started, until
// every task had started and until every task had finished. Its rate is
// the tasks over the time from the due instant to the last finish: the
// timer, moving them all (one promote.lua call per queue) and processing
// them. The same-run comparison is the process scenario's: the same number
// of plain tasks, pre-loaded, drained by the same kind of worker, from its
// start to the last finish.
//
// The due instant is turned into a time on this machine's clock with the
// offset read from Redis TIME before the enqueue (see runDelay).
func runBurst(ctx context.Context, b *bench) (*result, error) {
	perQueue := b.pick(100_000, 2_000) / len(b.queues)
	total := int64(perQueue * len(b.queues))
	ahead := time.Duration(b.pick(2_000, 500)) * time.Millisecond
	opts := worqr.HandleOptions{Concurrency: b.cfg.concurrency}
	run := uuid.NewString()[:8]
	res := &result{}

	plain, plainFill, err := drain(ctx, b, perQueue, run, nil, opts)
	if err != nil {
		return nil, fmt.Errorf("plain: %w", err)
	}
	plainRate := float64(total) / plain.elapsed.Seconds()

	c, prefix, err := b.newClient()
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	p, err := startPoolWith(ctx, c, b.queues, 1, total, nil, opts)
	if err != nil {
		return nil, err
	}
	defer p.close(ctx)
	clk, err := readClock(ctx, b.rdb)
	if err != nil {
		return nil, err
	}
	// A whole millisecond: Redis keeps due times in milliseconds.
	due := time.UnixMilli(clk.redisNow().Add(ahead).UnixMilli() + 1)
	dueLocal := clk.local(due)
	start := time.Now()
	if err := fill(ctx, c, b.queues, perQueue, run, worqr.At(due)); err != nil {
		return nil, err
	}
	filled := time.Now()
	if filled.After(dueLocal) {
		return nil, fmt.Errorf("enqueueing took %v, more than the %v ahead", filled.Sub(start), ahead)
	}
	var delayed int64
	for _, q := range b.queues {
		n, err := c.DelayedLen(ctx, q)
		if err != nil {
			return nil, err
		}
		delayed += n
	}
	if delayed != total {
		return nil, fmt.Errorf("%d tasks delayed of %d", delayed, total)
	}
	time.Sleep(time.Until(dueLocal) - 50*time.Millisecond)
	w := openWindow(ctx, b.rdb)
	if err := p.wait(ctx, c, b.queues, timeout(b.cfg.short)+ahead); err != nil {
		return nil, err
	}
	finished := time.Now()
	sp := w.close(ctx)
	first := time.Unix(0, p.first.Load())
	took := finished.Sub(dueLocal)
	rate := float64(total) / took.Seconds()

	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	res.add("enqueue_s", "s", filled.Sub(start).Seconds())
	res.add("plain_enqueue_s", "s", plainFill.Seconds())
	res.add("first_start_ms", "ms", ms(first.Sub(dueLocal)))
	res.add("all_started_s", "s", p.last.Sub(dueLocal).Seconds())
	res.add("all_finished_s", "s", took.Seconds())
	res.add("tasks_per_s", "tasks/s", rate)
	res.add("plain_tasks_per_s", "tasks/s", plainRate)
	res.add("ratio", "×", rate/plainRate)
	sp.perTask(res, "", total, scripts...)
	plain.perTask(res, "plain_", total, scripts...)
	if first.Before(dueLocal) {
		res.note("a task started %v before its due time", dueLocal.Sub(first))
	}
	return res, nil
}
