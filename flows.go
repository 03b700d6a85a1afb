package worqr

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// FlowSweepAge is how old a workflow task's notice must be before a sweep
// carries it to its workflow (see workflow.go): the worker that ended the
// task carries it within milliseconds, unless it crashed or lost Redis.
const FlowSweepAge = 10 * time.Second

// FlowSweepEvery is how often a client with workers sweeps the queues
// they have served for notices left by a crash.
const FlowSweepEvery = 30 * time.Second

// flowSweepLimit bounds the notices one sweep of a queue carries.
const flowSweepLimit = 1000

// flows is the client's component that carries workflow tasks' notices
// to their workflows: at once, for a task one of its workers ended, and
// in sweeps, for those a crash left behind. No goroutine of its own waits
// between sweeps (a timer calls the next), so none outlives a worker.
type flows struct {
	c      *Client
	ctx    context.Context // ended by close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the carries and the sweeps under way

	// age is the sweeps' FlowSweepAge (a test's may be 0), and swept a
	// test signal: a sweep of a queue ended, with the notices it carried.
	age   time.Duration
	swept testsignal.Signal[int]

	mu     sync.Mutex
	queues map[string]bool // the queues the client's workers served: swept
	timer  clock.Timer     // the next periodic sweep; nil until a queue is served
	closed bool
}

func newFlows(c *Client) *flows {
	ctx, cancel := context.WithCancel(context.Background())
	return &flows{c: c, ctx: ctx, cancel: cancel, age: FlowSweepAge, queues: make(map[string]bool)}
}

// ended carries the notice of a workflow task that the worker just ended
// (finished or dead-lettered: the script that ended it wrote the notice),
// on a goroutine of its own, without holding up the caller; the client's
// close waits for it.
func (f *flows) ended(queue, flow, taskID string, want Outcome) {
	status := "ok"
	if want == OutcomeDead {
		status = "dead"
	}
	n, ok := store.ParseNotice(flow + "," + taskID + "," + status)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return // the notice stays: a sweep carries it
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := f.c.carry(f.ctx, queue, n); err != nil && f.ctx.Err() == nil {
			// The notice stays: a sweep carries it later.
			f.c.log.Warn("worqr: could not release a workflow's next steps; a sweep will", "queue", queue, "workflow", n.Workflow, "step", n.Step, "err", err)
		}
	}()
}

// served adds a queue a worker starts serving to those swept, and sweeps
// it now, the first time, for notices a crash of an earlier worker left;
// the first queue arms the periodic sweep.
func (f *flows) served(ctx context.Context, queue string) {
	f.mu.Lock()
	first := !f.closed && !f.queues[queue]
	f.queues[queue] = true
	if !f.closed && f.timer == nil {
		f.timer = f.c.clock.AfterFunc(FlowSweepEvery, f.tick)
	}
	f.mu.Unlock()
	if first {
		f.sweepLogged(ctx, queue)
	}
}

// tick sweeps every queue served, then arms the next tick.
func (f *flows) tick() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.wg.Add(1)
	defer f.wg.Done()
	queues := make([]string, 0, len(f.queues))
	for q := range f.queues {
		queues = append(queues, q)
	}
	f.mu.Unlock()
	for _, q := range queues {
		f.sweepLogged(f.ctx, q)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.timer = f.c.clock.AfterFunc(FlowSweepEvery, f.tick)
	}
}

func (f *flows) sweepLogged(ctx context.Context, queue string) {
	n, err := f.c.sweepFlows(ctx, queue, f.age)
	if err != nil && ctx.Err() == nil {
		f.c.log.Warn("worqr: workflow sweep failed", "queue", queue, "err", err)
	}
	f.swept.Signal(n)
}

// close ends the sweeps and waits for the carries under way.
func (f *flows) close() {
	f.mu.Lock()
	f.closed = true
	if f.timer != nil {
		f.timer.Stop()
	}
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
}

// sweepFlows carries a queue's notices at least age old to their
// workflows, and returns how many it carried.
func (c *Client) sweepFlows(ctx context.Context, queue string, age time.Duration) (int, error) {
	raw, err := c.store.FlowNotices(ctx, queue, age, flowSweepLimit)
	if err != nil {
		return 0, c.fail("workflow sweep", queue, err)
	}
	done := 0
	for _, r := range raw {
		n, ok := store.ParseNotice(r)
		if !ok { // not worqr's: nothing to carry
			if err := c.store.ForgetNotices(ctx, queue, []string{r}); err != nil {
				return done, c.fail("workflow sweep", queue, err)
			}
			continue
		}
		if err := c.carry(ctx, queue, n); err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}

// carryRevived carries a queue's notices of workflow tasks requeued from
// the dead letters, after a requeue: their workflows run again by the
// time the requeue returns. One that fails is left to the sweep.
func (c *Client) carryRevived(ctx context.Context, queue string) {
	raw, err := c.store.FlowNotices(ctx, queue, 0, flowSweepLimit)
	for _, r := range raw {
		if n, ok := store.ParseNotice(r); ok && n.Status == "revived" && err == nil {
			err = c.carry(ctx, queue, n)
		}
	}
	if err != nil {
		c.log.Warn("worqr: could not tell a workflow of its step requeued; a sweep will", "queue", queue, "err", err)
	}
}

// carry takes one notice to its workflow: it reads when the notice was
// written and the task's result (kept with its outcome, for a task that
// finished), records the step's end (idempotent), enqueues the steps that
// end made ready (idempotent) and then removes the notice. Any step may be
// run again; a notice gone was carried already.
func (c *Client) carry(ctx context.Context, queue string, n store.Notice) error {
	at, found, r, kept, err := c.store.FlowRead(ctx, queue, n)
	if err != nil {
		return c.fail("workflow release", queue, err)
	}
	if !found {
		return nil
	}
	var result string
	if n.Status == "ok" && kept {
		result = r.Body
	}
	ready, err := c.store.ReleaseStep(ctx, n.Workflow, n.Step, n.Task, n.Status, result, at)
	if err != nil {
		return c.fail("workflow release", queue, err)
	}
	if err := c.enqueueSteps(ctx, n.Workflow, ready); err != nil {
		return fmt.Errorf("worqr: workflow %s: %w", n.Workflow, err)
	}
	if err := c.store.ForgetNotices(ctx, queue, []string{n.Raw}); err != nil {
		return c.fail("workflow release", queue, err)
	}
	return nil
}
