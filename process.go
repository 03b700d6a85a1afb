package worqr

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// workerIDLen is the length of a worker id (a UUID string). Process records
// in Redis store the owner at a fixed width so scripts can slice it out.
const workerIDLen = 36

// Process is a task taken from a queue by a Worker. Exactly one of Finish
// and Stop can succeed for it, and only while it still belongs to the
// worker that dequeued it.
type Process struct {
	w     *Worker
	id    string
	queue string
	task  []byte
	owner string

	done chan struct{}
	mu   sync.Mutex
	err  error // why the process ended, for Err; nil while it runs
	// settled is true once Finish or Stop succeeded, or the process was
	// found lost: no further state change is sent to Redis for it.
	settled bool
	// ended is called with the reason when the process ends.
	ended func(reason error)
}

func newProcess(w *Worker, id, queue, task, owner string) *Process {
	return &Process{w: w, id: id, queue: queue, task: []byte(task), owner: owner, done: make(chan struct{})}
}

// ID is the process id, unrelated to the task: unique among the processes
// of its queue, ever. Ids increase in dequeue order; a queue deleted and
// created again restarts its counter from the Redis clock in microseconds,
// above every id it gave before.
func (p *Process) ID() string { return p.id }

// Queue is the queue the task came from.
func (p *Process) Queue() string { return p.queue }

// Task is the task's bytes. Callers must not modify them.
func (p *Process) Task() []byte { return p.task }

// Owner is the id of the worker that dequeued the process.
func (p *Process) Owner() string { return p.owner }

// Done is closed when the worker learns that the process should end: it was
// finished or stopped, its task was cancelled, its queue was deleted, or it
// was lost (the worker fenced itself, failed, closed or stopped work on the
// queue). Err says which.
func (p *Process) Done() <-chan struct{} { return p.done }

// seq is the process id as a number: ids count up in dequeue order.
func (p *Process) seq() uint64 {
	n, _ := strconv.ParseUint(p.id, 16, 64)
	return n
}

// Err is nil until Done is closed, then ErrTaskCancelled, ErrQueueDeleted,
// ErrProcessLost, or errEnded after Finish or Stop.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// errEnded is Err after a successful Finish or Stop.
var errEnded = errors.New("worqr: process finished or stopped")

// end closes Done with a reason; the first reason wins. It reports whether
// this call ended the process.
func (p *Process) end(reason error, settled bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if settled {
		p.settled = true
	}
	if p.err != nil {
		return false
	}
	p.err = reason
	close(p.done)
	if p.ended != nil {
		p.ended(reason) // a context's CancelCauseFunc: quick, never blocks
	}
	return true
}

// onEnd arranges for fn to be called with the reason when the process
// ends, at once if it already has.
func (p *Process) onEnd(fn func(reason error)) {
	p.mu.Lock()
	reason := p.err
	if reason == nil {
		p.ended = fn
	}
	p.mu.Unlock()
	if reason != nil {
		fn(reason)
	}
}

func (p *Process) isSettled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settled
}

// Finish deletes the process: the task is done. Finish calls on processes
// of the same queue that overlap are sent together, as one script call
// (see Client.Enqueue). It returns ErrProcessLost,
// and changes nothing, if the process no longer belongs to this worker
// (reclaimed by peers, given back, or already finished or stopped).
// Finishing a cancelled process, or one whose queue was deleted, succeeds.
func (p *Process) Finish(ctx context.Context) error {
	code, err := p.settle(ctx, "finish")
	if err != nil {
		return err
	}
	_ = code // any state may be finished
	return nil
}

// Stop puts the task back at the back of its queue (a retry) and wakes the
// queue. If the task was cancelled, or its queue deleted, it is dropped
// instead and Stop returns ErrTaskCancelled or ErrQueueDeleted. It returns
// ErrProcessLost, and changes nothing, if the process no longer belongs to
// this worker.
func (p *Process) Stop(ctx context.Context) error {
	code, err := p.settle(ctx, "stop")
	if err != nil {
		return err
	}
	switch code {
	case codeCancelled:
		return fmt.Errorf("worqr: stop %q process %s: dropped: %w", p.queue, p.id, ErrTaskCancelled)
	case codeDeleted:
		return fmt.Errorf("worqr: stop %q process %s: dropped: %w", p.queue, p.id, ErrQueueDeleted)
	}
	return nil
}

// Codes returned by the finish and stop scripts.
const (
	codeLeaseGone = -1
	codeNotOwned  = 0
	codeActive    = 1
	codeCancelled = 2
	codeDeleted   = 3
)

// settle runs the finish or stop script and records the outcome locally.
func (p *Process) settle(ctx context.Context, op string) (int64, error) {
	c := p.w.c
	if err := c.checkCtx(ctx, op); err != nil {
		return 0, err
	}
	if p.isSettled() {
		return 0, fmt.Errorf("worqr: %s %q process %s: already ended: %w", op, p.queue, p.id, ErrProcessLost)
	}
	var code int64
	var err error
	if op == "finish" {
		code, err = c.finishes.do(ctx, p.queue, p)
	} else {
		k := c.keys.queue(p.queue)
		code, err = c.scripts.Stop.Exec(ctx, c.rdb, []string{k.procs, k.leases, k.waiting, k.meta}, []string{p.owner, p.id, k.channel}).AsInt64()
	}
	if err != nil {
		return 0, c.fail(op, p.queue, err)
	}
	switch code {
	case codeLeaseGone:
		p.w.leaseLost(p.owner, p.queue, nil, p, fmt.Errorf("%s found the lease on %q gone", op, p.queue))
		fallthrough
	case codeNotOwned:
		p.w.forget(p, ErrProcessLost)
		return 0, fmt.Errorf("worqr: %s %q process %s: %w", op, p.queue, p.id, ErrProcessLost)
	}
	p.w.forget(p, errEnded)
	return code, nil
}

// finishJoined is the coalescer's send for Finish: the processes of one
// queue from overlapping calls, in one script call.
func (c *Client) finishJoined(ctx context.Context, queue string, ps []*Process) ([]int64, error) {
	k := c.keys.queue(queue)
	args := make([]string, 0, 2*len(ps))
	for _, p := range ps {
		args = append(args, p.owner, p.id)
	}
	codes, err := c.scripts.Finish.Exec(ctx, c.rdb, []string{k.procs, k.leases, k.meta}, args).AsIntSlice()
	if err == nil && len(codes) != len(ps) {
		err = fmt.Errorf("finish script answered %d codes for %d processes", len(codes), len(ps))
	}
	return codes, err
}

// Check asks Redis what became of the process: nil while it is active and
// still this worker's, else ErrTaskCancelled, ErrQueueDeleted or
// ErrProcessLost. A holder that may have missed events uses it.
func (p *Process) Check(ctx context.Context) error {
	c := p.w.c
	if err := c.checkCtx(ctx, "check"); err != nil {
		return err
	}
	if p.isSettled() {
		return fmt.Errorf("worqr: check %q process %s: already ended: %w", p.queue, p.id, ErrProcessLost)
	}
	k := c.keys.queue(p.queue)
	states, err := c.scripts.States.Exec(ctx, c.rdb, []string{k.procs, k.leases}, []string{p.owner, p.id}).AsStrSlice()
	if err != nil || len(states) != 1 {
		return c.fail("check", p.queue, err)
	}
	if err := stateErr(states[0]); err != nil {
		if errors.Is(err, ErrProcessLost) {
			p.w.forget(p, ErrProcessLost)
		} else {
			p.end(err, false)
		}
		return fmt.Errorf("worqr: check %q process %s: %w", p.queue, p.id, err)
	}
	return nil
}

// stateErr maps a state byte from the states script to an error.
func stateErr(s string) error {
	switch s {
	case "a":
		return nil
	case "c":
		return ErrTaskCancelled
	case "d":
		return ErrQueueDeleted
	default:
		return ErrProcessLost
	}
}

// sortProcessInfos orders processes by id, which is dequeue order.
func sortProcessInfos(ps []ProcessInfo) {
	slices.SortFunc(ps, func(a, b ProcessInfo) int {
		x, _ := strconv.ParseUint(a.ID, 16, 64)
		y, _ := strconv.ParseUint(b.ID, 16, 64)
		return cmp.Compare(x, y)
	})
}
