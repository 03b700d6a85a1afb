package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// producer enqueues ordinary tasks with unique payloads (job-1, job-2, ...,
// each with its plan: see plan.go) at a steady rate, in small batches, to
// random job queues: a batch for each queue and set of enqueue options
// (MaxAttempts, In). An enqueue that fails is retried until it succeeds;
// one whose outcome is unknown (the reply was lost, not the connection
// refused) may have queued the task, so it counts as a possible extra
// copy: worqr documents that a retried enqueue can run a task twice.
type producer struct {
	client *worqr.Client
	rdb    rueidis.Client // for Redis's TIME
	rate   int
	rng    *rand.Rand
	// noDelay drops the delays of delayed tasks (-sabotage lifecycle):
	// they start before the time the verifier expects.
	noDelay bool
	// seqDeaths makes one task in two of a sequence fail permanently
	// (-sabotage holds): every sequence dies, and would be held, many
	// times in a short run, even one whose workers the faults keep idle
	// for most of the time the queue holds its sequences.
	seqDeaths bool

	mu      sync.Mutex
	tasks   map[string]*taskInfo
	seq     int
	unknown int // attempts whose outcome was unknown
	failed  int // attempts that failed for sure (connection refused)
}

func newProducer(c *worqr.Client, rdb rueidis.Client, rate int, rng *rand.Rand) *producer {
	return &producer{client: c, rdb: rdb, rate: rate, rng: rng, tasks: make(map[string]*taskInfo)}
}

// batch is tasks enqueued together: same queue, same options.
type batch struct {
	q     string
	plan  plan // the options' part of it: behaviour and delay
	tasks [][]byte
}

// run enqueues until stop is closed, then finishes the batch in hand.
func (p *producer) run(stop <-chan struct{}) error {
	const tick = 100 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	var carry float64
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		carry += float64(p.rate) * tick.Seconds()
		n := int(carry)
		carry -= float64(n)
		// Tasks with the same options go together; the options are the
		// queue, the budget (from the behaviour) and the delay.
		type key struct {
			q      string
			budget int
			delay  time.Duration
			group  string
		}
		var batches []*batch
		byKey := make(map[key]*batch)
		for range n {
			q := jobQueues[p.rng.IntN(len(jobQueues))]
			pl := randomPlan(p.rng)
			if q == groupQueue {
				// Grouped tasks are not delayed: a delayed task takes its
				// place in its group by its enqueue when it comes due, so
				// the order a sequence runs them in would not be the order
				// the verifier knows.
				pl.delay, pl.group = 0, groups[p.rng.IntN(len(groups))]
				if n, _ := groupLimit(pl.group); p.seqDeaths && n == 1 && p.rng.IntN(2) == 0 {
					pl.behave, pl.fails = behavePermanent, 0
				}
			}
			p.mu.Lock()
			p.seq++
			task := pl.payload(p.seq)
			p.tasks[task] = &taskInfo{queue: q, kind: "job", plan: pl}
			p.mu.Unlock()
			k := key{q: q, delay: pl.delay, group: pl.group}
			if pl.behave == behaveExhaust || pl.behave == behaveTimeouts {
				k.budget = pl.budget()
			}
			b := byKey[k]
			if b == nil {
				b = &batch{q: q, plan: pl}
				byKey[k] = b
				batches = append(batches, b)
			}
			b.tasks = append(b.tasks, []byte(task))
		}
		for _, b := range batches {
			if err := p.enqueue(b); err != nil {
				return err
			}
		}
	}
}

// redisTime reads the Redis clock (Unix µs), retrying through faults for
// up to a minute.
func (p *producer) redisTime() (int64, error) {
	deadline := time.Now().Add(time.Minute)
	b := backoff{min: 20 * time.Millisecond, max: 500 * time.Millisecond}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t, err := p.rdb.Do(ctx, p.rdb.B().Time().Build()).AsStrSlice()
		cancel()
		if err == nil && len(t) == 2 {
			sec, err1 := strconv.ParseInt(t[0], 10, 64)
			usec, err2 := strconv.ParseInt(t[1], 10, 64)
			if err1 == nil && err2 == nil {
				return sec*1_000_000 + usec, nil
			}
			err = fmt.Errorf("TIME answered %q", t)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("producer: could not read Redis's TIME for a minute: %w", err)
		}
		b.wait(context.Background())
	}
}

// enqueue retries a batch until it is queued, recording every attempt
// that may have queued it. A delayed batch reads the Redis clock first: no
// copy is enqueued earlier, so none is due earlier than that plus its
// delay.
func (p *producer) enqueue(bt *batch) error {
	var before int64
	if bt.plan.delay > 0 {
		var err error
		if before, err = p.redisTime(); err != nil {
			return err
		}
	}
	opts := bt.plan.options()
	if p.noDelay && bt.plan.delay > 0 {
		opts = opts[:len(opts)-1] // In is the last option
	}
	deadline := time.Now().Add(time.Minute)
	b := backoff{min: 20 * time.Millisecond, max: 500 * time.Millisecond}
	for {
		at := now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ids, err := p.client.EnqueueBatch(ctx, bt.q, bt.tasks, opts...)
		cancel()
		maybe := err == nil || !errors.Is(err, syscall.ECONNREFUSED)
		p.mu.Lock()
		if maybe {
			for _, t := range bt.tasks {
				info := p.tasks[string(t)]
				info.copies = append(info.copies, at)
				info.redisBefore = before
			}
		}
		if err == nil {
			for i, t := range bt.tasks {
				// The id is the Redis clock at the enqueue, in µs (hex).
				if us, perr := strconv.ParseInt(ids[i], 16, 64); perr == nil {
					p.tasks[string(t)].enqueuedUs = us
				}
			}
		}
		switch {
		case err == nil:
		case maybe:
			p.unknown++
		default:
			p.failed++
		}
		p.mu.Unlock()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("producer: could not enqueue for a minute: %w", err)
		}
		b.wait(context.Background())
	}
}

// jobs returns what was enqueued.
func (p *producer) jobs() (map[string]*taskInfo, int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]*taskInfo, len(p.tasks))
	for k, v := range p.tasks {
		out[k] = v
	}
	return out, p.unknown, p.failed
}
