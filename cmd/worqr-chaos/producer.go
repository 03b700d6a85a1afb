package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/worqr/worqr"
)

// producer enqueues ordinary tasks with unique payloads (job-1, job-2, ...)
// at a steady rate, in small batches, to random job queues. An enqueue
// that fails is retried until it succeeds; one whose outcome is unknown
// (the reply was lost, not the connection refused) may have queued the
// task, so it counts as a possible extra copy: worqr documents that a
// retried enqueue can run a task twice.
type producer struct {
	client *worqr.Client
	rate   int
	rng    *rand.Rand

	mu      sync.Mutex
	tasks   map[string]*taskInfo
	seq     int
	unknown int // attempts whose outcome was unknown
	failed  int // attempts that failed for sure (connection refused)
}

func newProducer(c *worqr.Client, rate int, rng *rand.Rand) *producer {
	return &producer{client: c, rate: rate, rng: rng, tasks: make(map[string]*taskInfo)}
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
		batches := make(map[string][][]byte)
		for range n {
			q := jobQueues[p.rng.IntN(len(jobQueues))]
			p.mu.Lock()
			p.seq++
			task := fmt.Sprintf("job-%d", p.seq)
			p.tasks[task] = &taskInfo{queue: q, kind: "job"}
			p.mu.Unlock()
			batches[q] = append(batches[q], []byte(task))
		}
		for q, tasks := range batches {
			if err := p.enqueue(q, tasks); err != nil {
				return err
			}
		}
	}
}

// enqueue retries a batch until it is queued, recording every attempt
// that may have queued it.
func (p *producer) enqueue(q string, tasks [][]byte) error {
	deadline := time.Now().Add(time.Minute)
	b := backoff{min: 20 * time.Millisecond, max: 500 * time.Millisecond}
	for {
		at := now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := p.client.EnqueueBatch(ctx, q, tasks)
		cancel()
		maybe := err == nil || !errors.Is(err, syscall.ECONNREFUSED)
		p.mu.Lock()
		if maybe {
			for _, t := range tasks {
				info := p.tasks[string(t)]
				info.copies = append(info.copies, at)
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
