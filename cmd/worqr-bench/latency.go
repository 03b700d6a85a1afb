package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// latencyGap is the time between two tasks of the idle-latency scenario.
const latencyGap = 20 * time.Millisecond

// runLatency measures, with the consumer idle, the time from the start of
// an enqueue to the start of the handler, one task every 20 ms. The
// baseline is a consumer blocked in BLMOVE: the least a reliable queue can
// do without polling.
func runLatency(ctx context.Context, b *bench) (*result, error) {
	count := b.pick(300, 50)
	res := &result{}

	base, err := baseLatency(ctx, b, count)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	got, _, twice, err := worqrLatency(ctx, b, count, latencyGap, 1)
	if err != nil {
		return nil, err
	}
	addLatencies(res, "", got)
	res.add("started_twice", "tasks", float64(twice))
	addLatencies(res, "baseline_", base)
	res.add("p99_ratio", "×", pct(got, 99).Seconds()/pct(base, 99).Seconds())
	return res, nil
}

// worqrLatency measures enqueue → handler start for count tasks sent gap
// apart to n idle workers serving every queue, what Redis and this process
// spent on it, and how many tasks were started more than once (none may
// be: no worker dies).
func worqrLatency(ctx context.Context, b *bench, count int, gap time.Duration, n int) ([]time.Duration, span, int, error) {
	c, prefix, err := b.newClient()
	if err != nil {
		return nil, span{}, 0, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	t := newTimings(count, gap)
	h := func(_ context.Context, p *worqr.Process) error {
		t.arrived(p.Task())
		return nil
	}
	var workers []*worqr.Worker
	defer func() {
		for _, w := range workers {
			_ = w.Close(ctx)
		}
	}()
	for range n {
		w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
		if err != nil {
			return nil, span{}, 0, err
		}
		workers = append(workers, w)
		for _, q := range b.queues {
			if err := w.Handle(ctx, q, h, worqr.HandleOptions{}); err != nil {
				return nil, span{}, 0, err
			}
		}
	}
	win := openWindow(ctx, b.rdb)
	err = t.send(ctx, func(i int, task []byte) error {
		_, err := c.Enqueue(ctx, b.queues[i%len(b.queues)], task)
		return err
	})
	if err != nil {
		return nil, span{}, 0, err
	}
	ds, err := t.wait(timeout(b.cfg.short))
	sp := win.close(ctx)
	// Starts that come after the last first start are counted too.
	time.Sleep(10 * gap)
	return ds, sp, t.repeats(), err
}

// baseLatency runs one BLMOVE consumer per queue and LPUSHes tasks.
func baseLatency(ctx context.Context, b *bench, count int) ([]time.Duration, error) {
	keys := baseKeysFor(b.queues)
	defer func() { _ = cleanup(ctx, b.rdb, keys[0].prefix) }()
	t := newTimings(count, latencyGap)
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, k := range keys {
		wg.Go(func() {
			rdb, mine := b.rdb, k.consumer(0)
			for cctx.Err() == nil {
				task, err := rdb.Do(cctx, rdb.B().Blmove().Source(k.waiting()).Destination(mine).Right().Left().Timeout(1).Build()).AsBytes()
				if rueidis.IsRedisNil(err) || err != nil {
					continue
				}
				t.arrived(task)
				_ = rdb.Do(cctx, rdb.B().Lrem().Key(mine).Count(1).Element(string(task)).Build()).Error()
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // let the consumers block
	err := t.send(ctx, func(i int, task []byte) error {
		k := keys[i%len(keys)]
		return b.rdb.Do(ctx, b.rdb.B().Lpush().Key(k.waiting()).Element(string(task)).Build()).Error()
	})
	if err != nil {
		return nil, err
	}
	return t.wait(timeout(b.cfg.short))
}

// warmup is how many tasks are sent, and not counted, before the measured
// ones: connections and scripts are ready by then.
const warmup = 5

// timings records when each task was sent and when it arrived.
type timings struct {
	gap     time.Duration
	mu      sync.Mutex
	sent    []time.Time
	took    []time.Duration
	arrives int
	again   int // starts of tasks that had started already
	all     chan struct{}
}

func newTimings(count int, gap time.Duration) *timings {
	return &timings{gap: gap, sent: make([]time.Time, warmup+count), took: make([]time.Duration, warmup+count), all: make(chan struct{})}
}

// send sends every task on a fixed schedule, gap apart.
func (t *timings) send(ctx context.Context, enqueue func(i int, task []byte) error) error {
	start := time.Now()
	for i := range t.sent {
		time.Sleep(time.Until(start.Add(time.Duration(i) * t.gap)))
		task := []byte(strconv.Itoa(i))
		t.mu.Lock()
		t.sent[i] = time.Now()
		t.mu.Unlock()
		if err := enqueue(i, task); err != nil {
			return err
		}
	}
	return nil
}

func (t *timings) arrived(task []byte) {
	now := time.Now()
	i, err := strconv.Atoi(string(task))
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i < 0 || i >= len(t.took) {
		return
	}
	if t.took[i] != 0 {
		t.again++
		return
	}
	t.took[i] = now.Sub(t.sent[i])
	if t.arrives++; t.arrives == len(t.took) {
		close(t.all)
	}
}

// repeats is how many starts were of tasks that had started already.
func (t *timings) repeats() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.again
}

// wait returns the latencies of the counted tasks once all arrived.
func (t *timings) wait(limit time.Duration) ([]time.Duration, error) {
	select {
	case <-t.all:
	case <-time.After(limit):
		t.mu.Lock()
		defer t.mu.Unlock()
		return nil, fmt.Errorf("only %d of %d tasks arrived", t.arrives, len(t.took))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.took[warmup:]), nil
}

// pct is the p-th percentile (nearest rank).
func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func addLatencies(r *result, prefix string, ds []time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.add(prefix+"p50_ms", "ms", ms(pct(ds, 50)))
	r.add(prefix+"p90_ms", "ms", ms(pct(ds, 90)))
	r.add(prefix+"p99_ms", "ms", ms(pct(ds, 99)))
	r.add(prefix+"max_ms", "ms", ms(slices.Max(ds)))
}
