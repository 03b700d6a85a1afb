package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
)

// fanoutWorkers is how many workers share the queue in the fan-out
// scenario.
const fanoutWorkers = 20

// runFanout shows what it costs that every worker serving a queue hears
// every work event: 1 worker against 20 in one process, on one queue,
// (a) streaming: -concurrency goroutines enqueue single tasks as fast as
// they can while the workers (-concurrency handlers in all) take them, and
// (b) trickling: one task every 2 ms to idle workers. It counts script
// calls and dequeue scripts (their RPOPs and LRANGEs) per task, Redis's
// CPU per task, and the pickup latency.
func runFanout(ctx context.Context, b *bench) (*result, error) {
	streamed := b.pick(20_000, 1_000)
	trickled := b.pick(500, 50)
	conc := b.cfg.concurrency
	res := &result{}

	baseRate, err := baseStream(ctx, b, streamed, conc)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	rates := map[int]float64{}
	for _, n := range []int{1, fanoutWorkers} {
		per := (conc + n - 1) / n
		rate, sp, err := stream(ctx, b, streamed, n, per)
		if err != nil {
			return nil, fmt.Errorf("%d workers streaming: %w", n, err)
		}
		rates[n] = rate
		name := fmt.Sprintf("stream_w%d_", n)
		res.add(name+"tasks_per_s", "tasks/s", rate)
		res.add(name+"ratio", "×", rate/baseRate)
		costs(res, name, sp, int64(streamed))
	}
	res.add("stream_baseline_tasks_per_s", "tasks/s", baseRate)
	res.add(fmt.Sprintf("stream_w%d_over_w1", fanoutWorkers), "×", rates[fanoutWorkers]/rates[1])

	for _, n := range []int{1, fanoutWorkers} {
		ds, sp, twice, err := worqrLatency(ctx, b, trickled, 2*time.Millisecond, n)
		if err != nil {
			return nil, fmt.Errorf("%d workers trickling: %w", n, err)
		}
		name := fmt.Sprintf("trickle_w%d_", n)
		res.add(name+"started_twice", "tasks", float64(twice))
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		res.add(name+"p50_ms", "ms", ms(pct(ds, 50)))
		res.add(name+"p99_ms", "ms", ms(pct(ds, 99)))
		costs(res, name, sp, int64(trickled+warmup))
	}
	return res, nil
}

// costs adds a span's per-task costs: script calls, dequeues, CPU.
func costs(res *result, name string, sp span, tasks int64) {
	if sp.serverOK {
		n := float64(tasks)
		res.add(name+"scripts_per_task", "calls", float64(sp.calls["evalsha"]+sp.calls["eval"])/n)
		// A dequeue script takes one task with RPOP, several with LRANGE.
		res.add(name+"dequeues_per_task", "calls", float64(sp.calls["lrange"]+sp.calls["rpop"])/n)
	}
	sp.perTask(res, name, tasks, scripts...)
}

// stream runs n workers with per handlers each on every queue while
// -concurrency goroutines enqueue total single tasks, and returns the
// tasks per second from the first enqueue to the last finish.
func stream(ctx context.Context, b *bench, total, n, per int) (float64, span, error) {
	c, prefix, err := b.newClient()
	if err != nil {
		return 0, span{}, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	p, err := startPool(ctx, c, b.queues, n, per, int64(total))
	if err != nil {
		return 0, span{}, err
	}
	defer p.close(ctx)
	run := uuid.NewString()[:8]
	w := openWindow(ctx, b.rdb)
	err = parallel(b.cfg.concurrency, total, func(i int) error {
		_, err := c.Enqueue(ctx, b.queues[i%len(b.queues)], payload(run, i))
		return err
	})
	if err != nil {
		return 0, span{}, err
	}
	if err := p.wait(ctx, c, b.queues, timeout(b.cfg.short)); err != nil {
		return 0, span{}, err
	}
	sp := w.close(ctx)
	return float64(total) / sp.elapsed.Seconds(), sp, nil
}

// baseStream is the baseline of streaming: -concurrency goroutines LPUSH
// while conc consumers per queue, each blocked in BLMOVE on a connection
// of its own, take and acknowledge.
func baseStream(ctx context.Context, b *bench, total, conc int) (float64, error) {
	keys := baseKeysFor(b.queues)
	defer func() { _ = cleanup(ctx, b.rdb, keys[0].prefix) }()
	run := uuid.NewString()[:8]
	var done atomic.Int64
	all := make(chan struct{})
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	errs := make(chan error, 1)
	for _, k := range keys {
		for i := range conc {
			wg.Go(func() {
				rdb, mine := b.rdb, k.consumer(i)
				for cctx.Err() == nil {
					task, err := rdb.Do(cctx, rdb.B().Blmove().Source(k.waiting()).Destination(mine).Right().Left().Timeout(0.1).Build()).ToString()
					if rueidis.IsRedisNil(err) {
						continue
					}
					if err == nil {
						err = rdb.Do(cctx, rdb.B().Lrem().Key(mine).Count(1).Element(task).Build()).Error()
					}
					if err != nil {
						if cctx.Err() == nil {
							select {
							case errs <- err:
							default:
							}
						}
						return
					}
					if done.Add(1) == int64(total) {
						close(all)
					}
				}
			})
		}
	}
	time.Sleep(50 * time.Millisecond) // let the consumers block
	start := time.Now()
	err := parallel(b.cfg.concurrency, total, func(i int) error {
		k := keys[i%len(keys)]
		return b.rdb.Do(ctx, b.rdb.B().Lpush().Key(k.waiting()).Element(string(payload(run, i))).Build()).Error()
	})
	if err != nil {
		return 0, err
	}
	select {
	case <-all:
	case err := <-errs:
		return 0, err
	case <-time.After(timeout(b.cfg.short)):
		return 0, fmt.Errorf("only %d of %d tasks taken", done.Load(), total)
	}
	return float64(total) / time.Since(start).Seconds(), nil
}
