package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/worqr/worqr"
)

// runBulk measures bulk enqueues against LPUSHes of 1,000 values from as
// many goroutines: EnqueueBatch of 1,000 tasks, EnqueueBatchItems of
// 1,000 tasks each with a unique key of its own (against single Enqueues
// with Unique, the way to send such tasks without it), and one
// EnqueueBatch of the whole load from one goroutine.
func runBulk(ctx context.Context, b *bench) (*result, error) {
	const batch = poolSize
	total := b.pick(1_000_000, 10_000)
	keyedSingle := b.pick(100_000, 2_000)
	conc := b.cfg.concurrency
	calls := (total + batch - 1) / batch
	res := &result{}
	keys := baseKeysFor(b.queues)
	run := uuid.NewString()[:8]
	pool := newPayloadPool(run)

	baseRate, base, err := timedBaseEnqueue(ctx, b.rdb, keys, conc, total, batch, pool)
	if err != nil {
		return nil, err
	}

	c, prefix, err := b.newClient()
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	for _, q := range b.queues {
		if _, err := c.EnqueueBatch(ctx, q, pool.bytes[:2]); err != nil {
			return nil, err
		}
	}
	// phase times one way of enqueueing total tasks, and cleans up after.
	phase := func(name string, tasks int, send func() error) (float64, span, error) {
		w := openWindow(ctx, b.rdb)
		start := time.Now()
		err := send()
		took := time.Since(start)
		sp := w.close(ctx)
		if err != nil {
			return 0, sp, fmt.Errorf("worqr %s: %w", name, err)
		}
		if err := cleanup(ctx, b.rdb, prefix); err != nil {
			return 0, sp, err
		}
		return float64(tasks) / took.Seconds(), sp, nil
	}

	batchRate, batchSpan, err := phase("EnqueueBatch", total, func() error {
		return parallel(conc, calls, func(call int) error {
			n := min(batch, total-call*batch)
			_, err := c.EnqueueBatch(ctx, b.queues[call%len(b.queues)], pool.bytes[:n])
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	// Unique keys, fresh for every task of the run.
	items := make([]worqr.BatchItem, total)
	for i := range items {
		items[i] = worqr.BatchItem{Payload: pool.bytes[i%poolSize], UniqueKey: run + ":" + strconv.Itoa(i)}
	}
	keyedRate, keyedSpan, err := phase("EnqueueBatchItems", total, func() error {
		return parallel(conc, calls, func(call int) error {
			from := call * batch
			_, err := c.EnqueueBatchItems(ctx, b.queues[call%len(b.queues)], items[from:min(from+batch, total)])
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	singleRate, singleSpan, err := phase("Enqueue with Unique", keyedSingle, func() error {
		return parallel(conc, keyedSingle, func(i int) error {
			_, err := c.Enqueue(ctx, b.queues[i%len(b.queues)], items[i].Payload, worqr.Unique("s"+items[i].UniqueKey))
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	load := make([][]byte, total)
	for i := range load {
		load[i] = pool.bytes[i%poolSize]
	}
	loadRate, loadSpan, err := phase("EnqueueBatch of the whole load", total, func() error {
		_, err := c.EnqueueBatch(ctx, b.queues[0], load)
		return err
	})
	if err != nil {
		return nil, err
	}

	res.add("batch_tasks_per_s", "tasks/s", batchRate)
	res.add("baseline_lpush1000_per_s", "tasks/s", baseRate)
	res.add("batch_ratio", "×", batchRate/baseRate)
	res.add("keyed_tasks_per_s", "tasks/s", keyedRate)
	res.add("keyed_ratio", "×", keyedRate/baseRate)
	res.add("keyed_single_tasks_per_s", "tasks/s", singleRate)
	res.add("keyed_to_single_ratio", "×", keyedRate/singleRate)
	res.add("load_tasks_per_s", "tasks/s", loadRate)
	res.add("load_ratio", "×", loadRate/baseRate)
	base.perTask(res, "baseline_", int64(total), "lpush")
	batchSpan.perTask(res, "batch_", int64(total), scripts...)
	keyedSpan.perTask(res, "keyed_", int64(total), scripts...)
	singleSpan.perTask(res, "keyed_single_", int64(keyedSingle), scripts...)
	loadSpan.perTask(res, "load_", int64(total), scripts...)
	return res, nil
}
