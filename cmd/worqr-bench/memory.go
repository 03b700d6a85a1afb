package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// runMemory measures Redis memory per waiting task, per in-flight task and
// per delayed task, as the change in INFO used_memory over 100,000 tasks
// of 64 bytes, and the same for the baseline (a list, a consumer's list,
// a sorted set). MEMORY USAGE of the keys, summed, is reported beside it
// as a check.
func runMemory(ctx context.Context, b *bench) (*result, error) {
	if b.embedded {
		res := &result{}
		res.note("skipped: miniredis reports no memory")
		return res, nil
	}
	n := b.pick(100_000, 5_000)
	perQueue := n / len(b.queues)
	n = perQueue * len(b.queues)
	run := uuid.NewString()[:8]
	res := &result{}

	// The baseline: LPUSH, then LMOVE everything into one consumer list.
	keys := baseKeysFor(b.queues)
	defer func() { _ = cleanup(ctx, b.rdb, keys[0].prefix) }()
	m0, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return nil, err
	}
	if err := baseFill(ctx, b.rdb, keys, perQueue, run); err != nil {
		return nil, err
	}
	m1, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return nil, err
	}
	u1, err := keysUsage(ctx, b.rdb, keys[0].prefix)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		for moved := 0; moved < perQueue; {
			cmds := make(rueidis.Commands, 0, 1000)
			for range min(1000, perQueue-moved) {
				cmds = append(cmds, b.rdb.B().Lmove().Source(k.waiting()).Destination(k.consumer(0)).Right().Left().Build())
			}
			for _, r := range b.rdb.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					return nil, err
				}
			}
			moved += len(cmds)
		}
	}
	m2, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return nil, err
	}
	u2, err := keysUsage(ctx, b.rdb, keys[0].prefix)
	if err != nil {
		return nil, err
	}
	_ = cleanup(ctx, b.rdb, keys[0].prefix)

	// worqr: enqueue, then dequeue everything into processes of one
	// worker and hold them.
	c, prefix, err := b.newClient()
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Close(ctx) }()
	for _, q := range b.queues {
		if err := w.StartWork(ctx, q, worqr.Events{}); err != nil {
			return nil, err
		}
	}
	w0, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return nil, err
	}
	if err := fill(ctx, c, b.queues, perQueue, run); err != nil {
		return nil, err
	}
	w1, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return nil, err
	}
	v1, err := keysUsage(ctx, b.rdb, prefix)
	if err != nil {
		return nil, err
	}
	for _, q := range b.queues {
		for taken := 0; taken < perQueue; {
			ps, err := w.DequeueN(ctx, q, min(1000, perQueue-taken))
			if err != nil {
				return nil, err
			}
			taken += len(ps)
		}
	}
	w2, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return nil, err
	}
	v2, err := keysUsage(ctx, b.rdb, prefix)
	if err != nil {
		return nil, err
	}

	per := func(a, b int64) float64 { return float64(b-a) / float64(n) }
	res.add("waiting_bytes_per_task", "B", per(w0, w1))
	res.add("inflight_bytes_per_task", "B", per(w0, w2))
	res.add("baseline_waiting_bytes_per_task", "B", per(m0, m1))
	res.add("baseline_inflight_bytes_per_task", "B", per(m0, m2))
	res.add("waiting_ratio", "×", per(w0, w1)/per(m0, m1))
	res.add("inflight_ratio", "×", per(w0, w2)/per(m0, m2))
	res.add("memory_usage_waiting_per_task", "B", float64(v1)/float64(n))
	res.add("memory_usage_inflight_per_task", "B", float64(v2)/float64(n))
	res.add("baseline_memory_usage_waiting_per_task", "B", float64(u1)/float64(n))
	res.add("baseline_memory_usage_inflight_per_task", "B", float64(u2)/float64(n))
	if err := delayedMemory(ctx, b, perQueue, run, res); err != nil {
		return nil, fmt.Errorf("delayed: %w", err)
	}
	return res, nil
}

// delayedMemory measures Redis memory per delayed task, as the change in
// INFO used_memory over the same number of 64-byte tasks enqueued an hour
// ahead (EnqueueBatch of 1,000 with worqr.At, each batch a millisecond
// later than the one before), with no worker to move them; the baseline is
// a sorted set of the payloads scored by the same due times (ZADD), the
// least a delayed queue can keep.
func delayedMemory(ctx context.Context, b *bench, perQueue int, run string, res *result) error {
	n := perQueue * len(b.queues)
	due := time.Now().Add(time.Hour).UnixMilli()
	keys := baseKeysFor(b.queues)
	defer func() { _ = cleanup(ctx, b.rdb, keys[0].prefix) }()
	m0, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return err
	}
	for qi, k := range keys {
		for start := 0; start < perQueue; start += 1000 {
			score := float64(due + int64(start/1000))
			cmd := b.rdb.B().Zadd().Key(k.prefix + ":" + k.tag + ":delayed").ScoreMember()
			for i := start; i < min(start+1000, perQueue); i++ {
				cmd = cmd.ScoreMember(score, string(payload(run, qi*perQueue+i)))
			}
			if err := b.rdb.Do(ctx, cmd.Build()).Error(); err != nil {
				return err
			}
		}
	}
	m1, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return err
	}
	u1, err := keysUsage(ctx, b.rdb, keys[0].prefix)
	if err != nil {
		return err
	}
	_ = cleanup(ctx, b.rdb, keys[0].prefix)

	c, prefix, err := b.newClient()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	// One task per queue first, so the queues' own keys (meta, registry)
	// are not counted.
	for _, q := range b.queues {
		if _, err := c.Enqueue(ctx, q, payload("warm", 0), worqr.At(time.UnixMilli(due))); err != nil {
			return err
		}
	}
	w0, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return err
	}
	for qi, q := range b.queues {
		for start := 0; start < perQueue; start += 1000 {
			tasks := make([][]byte, 0, 1000)
			for i := start; i < min(start+1000, perQueue); i++ {
				tasks = append(tasks, payload(run, qi*perQueue+i))
			}
			if _, err := c.EnqueueBatch(ctx, q, tasks, worqr.At(time.UnixMilli(due+int64(start/1000)))); err != nil {
				return err
			}
		}
	}
	w1, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return err
	}
	v1, err := keysUsage(ctx, b.rdb, prefix)
	if err != nil {
		return err
	}
	per := func(a, b int64) float64 { return float64(b-a) / float64(n) }
	res.add("delayed_bytes_per_task", "B", per(w0, w1))
	res.add("baseline_delayed_bytes_per_task", "B", per(m0, m1))
	res.add("delayed_ratio", "×", per(w0, w1)/per(m0, m1))
	res.add("memory_usage_delayed_per_task", "B", float64(v1)/float64(n))
	res.add("baseline_memory_usage_delayed_per_task", "B", float64(u1)/float64(n))
	return nil
}

// settledMemory is used_memory, summed over the masters, once the
// server's buffers from the last burst of commands have been given back:
// it waits until two readings 200 ms apart agree within 0.1 %.
func settledMemory(ctx context.Context, rdb rueidis.Client) (int64, error) {
	prev := int64(-1)
	for range 25 {
		st := readStats(ctx, rdb)
		if !st.ok {
			return 0, errors.New("INFO memory is not available")
		}
		if prev >= 0 && abs(st.usedMemory-prev) <= prev/1000 {
			return st.usedMemory, nil
		}
		prev = st.usedMemory
		time.Sleep(200 * time.Millisecond)
	}
	return prev, nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// keysUsage sums MEMORY USAGE (every element sampled) over the keys that
// start with prefix.
func keysUsage(ctx context.Context, rdb rueidis.Client, prefix string) (int64, error) {
	var total int64
	for _, node := range masters(ctx, rdb) {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				return 0, err
			}
			for _, key := range e.Elements {
				n, err := node.Do(ctx, node.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
				if err != nil {
					return 0, fmt.Errorf("MEMORY USAGE %s: %w", key, err)
				}
				total += n
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return total, nil
}
