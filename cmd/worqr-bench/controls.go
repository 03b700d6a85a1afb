package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/worqr/worqr"
)

// This file has the scenarios of the queue controls: limits, priorities
// and rate.

// drainLoaded times workers (each handling every queue with opts, and
// work at each start: see startPoolWith) draining queues that load
// filled under a client of its own, from their start until want tasks
// have been handled and finished.
func drainLoaded(ctx context.Context, b *bench, queues []string, workers int, want int64, work func(*worqr.Process) error, opts worqr.HandleOptions, load func(*worqr.Client) error) (span, error) {
	c, prefix, err := b.newClient()
	if err != nil {
		return span{}, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	if err := load(c); err != nil {
		return span{}, err
	}
	w := openWindow(ctx, b.rdb)
	p, err := startPoolWith(ctx, c, queues, workers, want, work, opts)
	if err != nil {
		return span{}, err
	}
	err = p.wait(ctx, c, queues, timeout(b.cfg.short))
	got := w.close(ctx)
	p.close(ctx)
	return got, err
}

// setLimit is a load step: a concurrency limit of n on every queue.
func setLimit(ctx context.Context, c *worqr.Client, queues []string, n int) error {
	for _, q := range queues {
		if err := c.SetConcurrency(ctx, q, n, worqr.CreateQueue()); err != nil {
			return err
		}
	}
	return nil
}

// runLimits measures the concurrency limit. A limit that does not bind
// (ten times the handlers) against no limit, and the same with tasks of
// weight 2, drained by one worker of no-op handlers, in ABBA order (plain,
// limited, limited, plain) to cancel drift. Then a limit L = 8 that binds,
// on tasks of a fixed length, over two workers of 16 handlers each: the
// most handlers (and weight) running at once, and the throughput against
// L / length, for weight 1 and weight 2.
func runLimits(ctx context.Context, b *bench) (*result, error) {
	perQueue := b.pick(20_000, 1_000) / len(b.queues)
	total := int64(perQueue * len(b.queues))
	conc := b.cfg.concurrency
	run := uuid.NewString()[:8]
	res := &result{}
	opts := worqr.HandleOptions{Concurrency: conc}

	variant := func(limit int, eopts ...worqr.EnqueueOption) (float64, span, error) {
		sp, err := drainLoaded(ctx, b, b.queues, 1, total, nil, opts, func(c *worqr.Client) error {
			if limit > 0 {
				if err := setLimit(ctx, c, b.queues, limit); err != nil {
					return err
				}
			}
			return fill(ctx, c, b.queues, perQueue, run, eopts...)
		})
		return float64(total) / sp.elapsed.Seconds(), sp, err
	}
	var plain, limited, weighted float64
	var limitedSpan span
	for i, v := range []string{"plain", "limited", "weighted", "weighted", "limited", "plain"} {
		var rate float64
		var sp span
		var err error
		switch v {
		case "plain":
			rate, _, err = variant(0)
			plain += rate / 2
		case "limited":
			rate, sp, err = variant(10 * conc)
			limited += rate / 2
			if i == 1 {
				limitedSpan = sp
			}
		case "weighted":
			rate, _, err = variant(10*conc, worqr.Weight(2))
			weighted += rate / 2
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v, err)
		}
	}
	res.add("nonbinding_tasks_per_s", "tasks/s", limited)
	res.add("unlimited_tasks_per_s", "tasks/s", plain)
	res.add("nonbinding_ratio", "×", limited/plain)
	res.add("nonbinding_weighted_ratio", "×", weighted/plain)
	limitedSpan.perTask(res, "nonbinding_", total, scripts...)

	// Weight 2 under 8 has as many tasks in flight as weight 1 under 4:
	// the control for what the weight itself costs.
	for _, lw := range [][2]int{{8, 1}, {8, 2}, {4, 1}} {
		if err := bindingLimit(ctx, b, res, lw[0], lw[1]); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// bindingLimit runs tasks of one weight and a fixed length under a limit
// that binds, and reports the most weight its handlers held at once, the
// throughput against the limit's (limit / weight / length), and the slots'
// utilisation: the slot time the handlers used (weight times their actual
// run, which a loaded machine's timers stretch) over the limit times the
// elapsed time, which is 1 less the share of slot time lost handing slots
// on.
func bindingLimit(ctx context.Context, b *bench, res *result, limit, weight int) error {
	const length = 20 * time.Millisecond
	tasks := b.pick(800, 80) * limit / 8 / weight / len(b.queues)
	total := int64(tasks * len(b.queues))
	run := uuid.NewString()[:8]
	var mu sync.Mutex
	held := make(map[string]int) // queue -> weight its handlers hold
	peak := 0
	var first, last, busy atomic.Int64 // Unix ns of the first start and the last end; slot ns used
	work := func(p *worqr.Process) error {
		start := time.Now()
		first.CompareAndSwap(0, start.UnixNano())
		mu.Lock()
		held[p.Queue()] += weight
		peak = max(peak, held[p.Queue()])
		mu.Unlock()
		time.Sleep(length)
		mu.Lock()
		held[p.Queue()] -= weight
		mu.Unlock()
		end := time.Now()
		busy.Add(int64(weight) * int64(end.Sub(start)))
		last.Store(end.UnixNano())
		return nil
	}
	_, err := drainLoaded(ctx, b, b.queues, 2, total, work, worqr.HandleOptions{Concurrency: 2 * limit}, func(c *worqr.Client) error {
		if err := setLimit(ctx, c, b.queues, limit); err != nil {
			return err
		}
		return fill(ctx, c, b.queues, tasks, run, worqr.Weight(weight))
	})
	if err != nil {
		return fmt.Errorf("binding limit, weight %d: %w", weight, err)
	}
	name := "binding_w" + strconv.Itoa(weight) + "_"
	if limit != 8 {
		name = "binding_l" + strconv.Itoa(limit) + "_w" + strconv.Itoa(weight) + "_"
	}
	ideal := float64(limit/weight) / length.Seconds() * float64(len(b.queues))
	elapsed := time.Duration(last.Load() - first.Load())
	rate := float64(total) / elapsed.Seconds()
	res.add(name+"peak_weight", "slots", float64(peak))
	res.add(name+"tasks_per_s", "tasks/s", rate)
	res.add(name+"ideal_tasks_per_s", "tasks/s", ideal)
	res.add(name+"ratio_to_ideal", "×", rate/ideal)
	res.add(name+"utilisation", "×", float64(busy.Load())/float64(limit*len(b.queues))/float64(elapsed))
	if peak > limit {
		res.note("weight %d: handlers held %d slots at once, over the limit %d", weight, peak, limit)
	}
	return nil
}

// runPriorities drains queues whose tasks wait at three levels (a third
// each, high, normal and low) against the same tasks at one level, with
// one worker of no-op handlers, in ABBA order: the throughput and the
// Redis time per task (dequeue and finish) of each, and their ratios.
func runPriorities(ctx context.Context, b *bench) (*result, error) {
	perQueue := b.pick(30_000, 1_500) / len(b.queues)
	total := int64(perQueue * len(b.queues))
	run := uuid.NewString()[:8]
	res := &result{}
	opts := worqr.HandleOptions{Concurrency: b.cfg.concurrency}
	levels := [][]worqr.EnqueueOption{{worqr.HighPriority()}, nil, {worqr.LowPriority()}} // high, normal, low
	load := func(three bool) func(*worqr.Client) error {
		return func(c *worqr.Client) error {
			if !three {
				return fill(ctx, c, b.queues, perQueue, run)
			}
			for qi, q := range b.queues {
				for start := 0; start < perQueue; start += 1000 {
					n := min(1000, perQueue-start)
					for li, level := range levels {
						var tasks [][]byte
						for i := start + li; i < start+n; i += len(levels) {
							tasks = append(tasks, payload(run, qi*perQueue+i))
						}
						if _, err := c.EnqueueBatch(ctx, q, tasks, level...); err != nil {
							return err
						}
					}
				}
			}
			return nil
		}
	}
	var one, three float64
	var oneSpan, threeSpan []span
	for _, v := range []bool{false, true, true, false} {
		sp, err := drainLoaded(ctx, b, b.queues, 1, total, nil, opts, load(v))
		if err != nil {
			return nil, err
		}
		rate := float64(total) / sp.elapsed.Seconds() / 2
		if v {
			three += rate
			threeSpan = append(threeSpan, sp)
		} else {
			one += rate
			oneSpan = append(oneSpan, sp)
		}
	}
	res.add("levels3_tasks_per_s", "tasks/s", three)
	res.add("level1_tasks_per_s", "tasks/s", one)
	res.add("ratio", "×", three/one)
	if oneSpan[0].serverOK {
		exec := func(sps []span) float64 {
			var us int64
			for _, sp := range sps {
				us += sp.usec["evalsha"] + sp.usec["eval"]
			}
			return float64(us) / float64(total) / float64(len(sps))
		}
		res.add("levels3_redis_exec_us_per_task", "µs", exec(threeSpan))
		res.add("level1_redis_exec_us_per_task", "µs", exec(oneSpan))
		res.add("exec_ratio", "×", exec(threeSpan)/exec(oneSpan))
	}
	return res, nil
}

// runRate drains a queue under a rate limit of 100 starts per 100 ms with
// one worker of no-op handlers (200 of them, so that handlers never hold
// it back): the starts per second against the limit's 1,000, the most
// starts in any 100 ms (never over 100), and how long after a window
// opened (the start 100 places earlier left it) the next start came.
// Starts are read from the process ids: the Redis clock in µs at each
// dequeue, which is what the limit counts by.
func runRate(ctx context.Context, b *bench) (*result, error) {
	const rate, per = 100, 100 * time.Millisecond
	total := b.pick(3_000, 300)
	run := uuid.NewString()[:8]
	res := &result{}
	q := b.queues[0]
	var mu sync.Mutex
	var starts []int64
	var bad atomic.Int64
	work := func(p *worqr.Process) error {
		us, err := strconv.ParseInt(p.ID(), 16, 64)
		if err != nil {
			bad.Add(1)
			return nil
		}
		mu.Lock()
		starts = append(starts, us)
		mu.Unlock()
		return nil
	}
	_, err := drainLoaded(ctx, b, []string{q}, 1, int64(total), work, worqr.HandleOptions{Concurrency: 2 * rate}, func(c *worqr.Client) error {
		if err := c.SetRateLimit(ctx, q, rate, per, worqr.CreateQueue()); err != nil {
			return err
		}
		return fill(ctx, c, []string{q}, total, run)
	})
	if err != nil {
		return nil, err
	}
	if bad.Load() > 0 || len(starts) != total {
		return nil, fmt.Errorf("%d starts read of %d (%d unreadable ids)", len(starts), total, bad.Load())
	}
	slices.Sort(starts)
	w := per.Microseconds()
	most := 0
	for i, j := 0, 0; i < len(starts); i++ {
		for starts[i]-starts[j] >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	var waits []time.Duration
	early := 0
	for i := rate; i < len(starts); i++ {
		d := starts[i] - (starts[i-rate] + w)
		if d < 0 {
			early++
		}
		waits = append(waits, time.Duration(d)*time.Microsecond)
	}
	sustained := float64(len(starts)-rate) / time.Duration((starts[len(starts)-1]-starts[0])*1000).Seconds()
	limit := float64(rate) / per.Seconds()
	res.add("starts_per_s", "starts/s", sustained)
	res.add("limit_per_s", "starts/s", limit)
	res.add("ratio", "×", sustained/limit)
	res.add("max_starts_in_window", "starts", float64(most))
	res.add("early", "starts", float64(early))
	addLatencies(res, "after_window_opens_", waits)
	return res, nil
}
