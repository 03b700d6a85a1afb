package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// runEnqueue measures single-task Enqueue calls from -concurrency
// goroutines against single-value LPUSHes from as many, and EnqueueBatch
// of 1,000 tasks against LPUSHes of 1,000 values.
func runEnqueue(ctx context.Context, b *bench) (*result, error) {
	const batch = poolSize
	single := b.pick(200_000, 2_000)
	batched := b.pick(1_000_000, 10_000)
	conc := b.cfg.concurrency
	res := &result{}

	// Baseline first, then worqr, for each of the two shapes: both see
	// much the same machine.
	keys := baseKeysFor(b.queues)
	pool := newPayloadPool(uuid.NewString()[:8])
	baseSingleRate, baseSingle, err := timedBaseEnqueue(ctx, b.rdb, keys, conc, single, 1, pool)
	if err != nil {
		return nil, err
	}

	c, prefix, err := b.newClient()
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	// One call per queue first, so the scripts are loaded and the queues
	// registered before timing.
	for _, q := range b.queues {
		if _, err := c.Enqueue(ctx, q, payload("warm", 0)); err != nil {
			return nil, err
		}
	}
	w := openWindow(ctx, b.rdb)
	start := time.Now()
	err = parallel(conc, single, func(i int) error {
		_, err := c.Enqueue(ctx, b.queues[i%len(b.queues)], pool.bytes[i%poolSize])
		return err
	})
	took := time.Since(start)
	worqrSingle := w.close(ctx)
	if err != nil {
		return nil, fmt.Errorf("worqr Enqueue: %w", err)
	}
	singleRate := float64(single) / took.Seconds()
	if err := cleanup(ctx, b.rdb, prefix); err != nil {
		return nil, err
	}

	baseBatchRate, baseBatch, err := timedBaseEnqueue(ctx, b.rdb, keys, conc, batched, batch, pool)
	if err != nil {
		return nil, err
	}

	calls := (batched + batch - 1) / batch
	w = openWindow(ctx, b.rdb)
	start = time.Now()
	err = parallel(conc, calls, func(call int) error {
		n := min(batch, batched-call*batch)
		_, err := c.EnqueueBatch(ctx, b.queues[call%len(b.queues)], pool.bytes[:n])
		return err
	})
	took = time.Since(start)
	worqrBatch := w.close(ctx)
	if err != nil {
		return nil, fmt.Errorf("worqr EnqueueBatch: %w", err)
	}
	batchRate := float64(batched) / took.Seconds()

	res.add("single_tasks_per_s", "tasks/s", singleRate)
	res.add("baseline_lpush_per_s", "tasks/s", baseSingleRate)
	res.add("single_ratio", "×", singleRate/baseSingleRate)
	res.add("batch_tasks_per_s", "tasks/s", batchRate)
	res.add("baseline_lpush1000_per_s", "tasks/s", baseBatchRate)
	res.add("batch_ratio", "×", batchRate/baseBatchRate)
	worqrSingle.perTask(res, "single_", int64(single), scripts...)
	baseSingle.perTask(res, "baseline_single_", int64(single), "lpush")
	worqrBatch.perTask(res, "batch_", int64(batched), scripts...)
	baseBatch.perTask(res, "baseline_batch_", int64(batched), "lpush")
	return res, nil
}
