package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/worqr/worqr"
)

// runProcess drains pre-loaded queues of no-op tasks with one worker
// (Handle, -concurrency handlers per queue), against -concurrency baseline
// consumers per queue doing LMOVE and LREM.
func runProcess(ctx context.Context, b *bench) (*result, error) {
	perQueue := b.pick(50_000, 2_000)
	total := int64(perQueue * len(b.queues))
	conc := b.cfg.concurrency
	run := uuid.NewString()[:8]
	res := &result{}

	keys := baseKeysFor(b.queues)
	defer func() { _ = cleanup(ctx, b.rdb, keys[0].prefix) }()
	if err := baseFill(ctx, b.rdb, keys, perQueue, run); err != nil {
		return nil, err
	}
	w := openWindow(ctx, b.rdb)
	n, err := baseDrain(ctx, b.rdb, keys, conc)
	base := w.close(ctx)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	if n != total {
		return nil, fmt.Errorf("baseline processed %d tasks of %d", n, total)
	}
	baseRate := float64(total) / base.elapsed.Seconds()

	got, _, err := drain(ctx, b, perQueue, run, nil, worqr.HandleOptions{Concurrency: conc})
	if err != nil {
		return nil, err
	}
	rate := float64(total) / got.elapsed.Seconds()

	res.add("tasks_per_s", "tasks/s", rate)
	res.add("baseline_tasks_per_s", "tasks/s", baseRate)
	res.add("ratio", "×", rate/baseRate)
	got.perTask(res, "", total, scripts...)
	base.perTask(res, "baseline_", total, "lmove", "lrem")
	if got.serverOK {
		res.add("redis_calls_per_task", "calls", float64(got.calls["evalsha"]+got.calls["eval"])/float64(total))
	}
	return res, nil
}

// drain fills the queues with perQueue no-op tasks each under a client of
// its own, then times one worker handling them with opts and fail (see
// startPoolWith) from its start until every task has finished. It also
// returns how long the fill took.
func drain(ctx context.Context, b *bench, perQueue int, run string, fail func(*worqr.Process) error, opts worqr.HandleOptions) (span, time.Duration, error) {
	return drainClient(ctx, b, worqr.Options{}, perQueue, run, fail, opts)
}

// drainClient is drain with a client made with co (see newClientWith).
func drainClient(ctx context.Context, b *bench, co worqr.Options, perQueue int, run string, fail func(*worqr.Process) error, opts worqr.HandleOptions) (span, time.Duration, error) {
	c, prefix, err := b.newClientWith(co)
	if err != nil {
		return span{}, 0, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	start := time.Now()
	if err := fill(ctx, c, b.queues, perQueue, run); err != nil {
		return span{}, 0, err
	}
	filled := time.Since(start)
	w := openWindow(ctx, b.rdb)
	p, err := startPoolWith(ctx, c, b.queues, 1, int64(perQueue*len(b.queues)), fail, opts)
	if err != nil {
		return span{}, 0, err
	}
	err = p.wait(ctx, c, b.queues, timeout(b.cfg.short))
	got := w.close(ctx)
	p.close(ctx)
	return got, filled, err
}

// fill enqueues perQueue tasks on each queue, 1,000 a call, untimed, with
// the options given.
func fill(ctx context.Context, c *worqr.Client, queues []string, perQueue int, run string, opts ...worqr.EnqueueOption) error {
	for qi, q := range queues {
		for start := 0; start < perQueue; start += 1000 {
			tasks := make([][]byte, 0, 1000)
			for i := start; i < min(start+1000, perQueue); i++ {
				tasks = append(tasks, payload(run, qi*perQueue+i))
			}
			if _, err := c.EnqueueBatch(ctx, q, tasks, opts...); err != nil {
				return err
			}
		}
	}
	return nil
}

// pool is a set of workers handling queues with a no-op handler that
// counts the tasks it has seen.
type pool struct {
	workers []*worqr.Worker
	handled atomic.Int64
	want    int64
	all     chan struct{} // closed when handled reaches want
	once    sync.Once
	first   atomic.Int64 // wall clock (Unix ns) of the first counted start
	last    time.Time    // of the want-th counted start; set before all closes
}

// startPool starts n workers, each handling every queue with conc
// handlers, and returns once all of them are serving.
func startPool(ctx context.Context, c *worqr.Client, queues []string, n, conc int, want int64) (*pool, error) {
	return startPoolWith(ctx, c, queues, n, want, nil, worqr.HandleOptions{Concurrency: conc})
}

// startPoolWith is startPool with the caller's handle options. fail, when
// not nil, is asked first at every start: an error from it is the
// handler's, and that start is not counted.
func startPoolWith(ctx context.Context, c *worqr.Client, queues []string, n int, want int64, fail func(*worqr.Process) error, opts worqr.HandleOptions) (*pool, error) {
	p := &pool{want: want, all: make(chan struct{})}
	h := p.handler(fail)
	for range n {
		w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
		if err != nil {
			p.close(ctx)
			return nil, err
		}
		p.workers = append(p.workers, w)
		for _, q := range queues {
			if err := w.Handle(ctx, q, h, opts); err != nil {
				p.close(ctx)
				return nil, err
			}
		}
	}
	return p, nil
}

// handler is the pool's no-op handler; fail as for startPoolWith.
func (p *pool) handler(fail func(*worqr.Process) error) worqr.Handler {
	return func(_ context.Context, proc *worqr.Process) error {
		if fail != nil {
			if err := fail(proc); err != nil {
				return err
			}
		}
		now := time.Now()
		p.first.CompareAndSwap(0, now.UnixNano())
		if p.handled.Add(1) == p.want {
			p.once.Do(func() { p.last = now; close(p.all) })
		}
		return nil
	}
}

// wait returns when every task has been handled and finished: none waits
// and none is in flight.
func (p *pool) wait(ctx context.Context, c *worqr.Client, queues []string, limit time.Duration) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	select {
	case <-p.all:
	case <-deadline.C:
		return fmt.Errorf("only %d of %d tasks handled within %v", p.handled.Load(), p.want, limit)
	}
	for {
		busy := false
		for _, q := range queues {
			procs, err := c.Processes(ctx, q)
			if err != nil {
				return err
			}
			busy = busy || len(procs) > 0
		}
		if !busy {
			return nil
		}
		select {
		case <-deadline.C:
			return errors.New("handled tasks not finished in time")
		case <-time.After(200 * time.Microsecond):
		}
	}
}

func (p *pool) close(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range p.workers {
		wg.Go(func() { _ = w.Close(ctx) })
	}
	wg.Wait()
}
