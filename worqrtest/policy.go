package worqrtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/embedded"
)

// DefaultPolicyQueue is the queue RunPolicy runs a task on when
// PolicyOptions.Queue is empty.
const DefaultPolicyQueue = "worqrtest"

// policyBound bounds a RunPolicy whose context has no deadline, and the
// closing of its worker and Redis.
const policyBound = time.Minute

// PolicyOptions configure RunPolicy. The zero value runs a task on an
// embedded Redis of its own, on queue DefaultPolicyQueue, under worqr's
// default policy (DefaultMaxAttempts attempts, DefaultBackoff), each
// retry's delay cut to a millisecond.
type PolicyOptions struct {
	// Handle are the queue's options, as worqr.Worker.Handle takes them:
	// the Retry policy, Timeout, PanicIsPermanent, Middleware. Timeout
	// is not scaled: it is the handler's own time.
	Handle worqr.HandleOptions
	// Worker configures the worker serving the queue, as
	// worqr.Client.NewWorker takes it (its Middleware...).
	Worker worqr.WorkerOptions
	// Enqueue are the task's own options, as worqr.Client.Enqueue takes
	// them: MaxAttempts, Timeout, In... RunPolicy adds Retain, to read the
	// task's outcome.
	Enqueue []worqr.EnqueueOption
	// Queue is the queue's name (what Process.Queue returns). Default
	// DefaultPolicyQueue.
	Queue string
	// Scale is the factor each retry's delay (the policy's Backoff's
	// answer, or the one a handler asked for with worqr.RetryAfter) is
	// multiplied by before the task waits it out, so that a test of a
	// policy of minutes takes milliseconds. A positive delay still waits
	// at least a millisecond, so that the task goes through its queue's
	// delayed set, as it would. The default, 0, makes every retry wait
	// that millisecond (or not at all, if the policy said 0); 1 waits the
	// real delays. Attempt.Delay records them before scaling. It must not
	// be negative.
	Scale float64
	// Addr is a Redis to run on instead of an embedded one, as
	// Options.Addr takes it; the run's keys there are deleted when it
	// ends.
	Addr string
	// Logger receives the worker's logs: each retry at level Warn, a
	// panic with its stack and a dead letter at Error. Default
	// slog.Default(), as a worqr.Client's.
	Logger *slog.Logger
}

// Attempt is one run of the handler under RunPolicy.
type Attempt struct {
	// Number is the attempt's number (Process.Attempt): 1 for the first.
	Number int
	// Start is when the worker took the task for this attempt; End is
	// when the attempt's outcome was written.
	Start, End time.Time
	// Outcome is what the worker did after it: worqr.OutcomeRetried,
	// OutcomeDead or OutcomeSucceeded.
	Outcome worqr.Outcome
	// Err is what the attempt failed with, as the worker saw it: the
	// handler's error, a panic as an error that errors.Is matches to
	// worqr.ErrHandlerPanicked, a handler whose time ran out wrapped with
	// worqr.ErrTaskTimeout; nil if it succeeded.
	Err error
	// Reason is why the attempt failed: for the attempt that sent the
	// task to the dead letters, its dead letter's reason
	// (worqr.ReasonExhausted, ReasonPanic...); for another, the reason its
	// error carries (see worqr.ReasonOf), "" if none.
	Reason string
	// Delay is the delay the policy put before the next attempt (its
	// Backoff's answer, or a worqr.RetryAfter error's), before Scale; 0
	// if the attempt was not retried by the policy.
	Delay time.Duration
}

// PolicyResult is what RunPolicy saw of a task: every attempt, in order,
// and how the task ended.
type PolicyResult struct {
	Attempts []Attempt
	// Outcome is the task's outcome, as worqr.Client.Wait returns it:
	// Status worqr.OutcomeSucceeded (with the Result its handler set) or
	// worqr.OutcomeDead (with the dead letter's Reason and Error).
	Outcome worqr.TaskOutcome
}

// RunPolicy runs h on a task with this payload as a worker does, under
// the retry, timeout and dead-letter policy of opts.Handle and the task's
// own options, until the task has succeeded or gone to the dead letters:
// on a real worqr.Client and Worker, on an embedded Redis of its own
// (closed before RunPolicy returns), with every retry's delay scaled by
// opts.Scale. It returns every attempt (its number, error, kind, outcome
// and the delay the policy chose after it) and the task's outcome.
//
// ctx bounds the run (a minute if it has no deadline): if it ends first,
// RunPolicy returns the attempts so far (the last of which may not have
// ended: no End, no Outcome) and an error that errors.Is matches to
// ctx's. It fails with worqr.ErrInvalidOptions on a nil
// handler or a negative Scale, and with what the client, the worker or
// Enqueue fail with.
func RunPolicy(ctx context.Context, h worqr.Handler, payload []byte, opts PolicyOptions) (res PolicyResult, err error) {
	switch {
	case h == nil:
		return res, fmt.Errorf("worqrtest: run policy: nil handler: %w", worqr.ErrInvalidOptions)
	case !(opts.Scale >= 0) || math.IsInf(opts.Scale, 0):
		return res, fmt.Errorf("worqrtest: run policy: Scale %v: %w", opts.Scale, worqr.ErrInvalidOptions)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, policyBound)
		defer cancel()
	}
	queue := opts.Queue
	if queue == "" {
		queue = DefaultPolicyQueue
	}
	rec := &recorder{queue: queue, changed: make(chan struct{}, 1)}

	c, closeAll, err := policyClient(opts, rec)
	if err != nil {
		return res, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), policyBound)
		defer cancel()
		if cerr := closeAll(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("worqrtest: run policy: close: %w", cerr))
		}
	}()

	wopts := opts.Worker
	wopts.Middleware = append([]worqr.Middleware{rec.retryAfter(opts.Scale)}, wopts.Middleware...)
	w, err := c.NewWorker(ctx, wopts)
	if err != nil {
		return res, fmt.Errorf("worqrtest: run policy: %w", err)
	}
	hopts := opts.Handle
	hopts.Retry.Backoff = rec.backoff(hopts.Retry.Backoff, opts.Scale)
	if err := w.Handle(ctx, queue, h, hopts); err != nil {
		return res, fmt.Errorf("worqrtest: run policy: %w", err)
	}
	id, err := c.Enqueue(ctx, queue, payload, append(slices.Clip(opts.Enqueue), worqr.Retain(time.Hour))...)
	if err != nil {
		return res, fmt.Errorf("worqrtest: run policy: %w", err)
	}

	for !rec.ended(id) {
		select {
		case <-rec.changed:
		case <-ctx.Done():
			res.Attempts = rec.attemptsOf(id)
			return res, fmt.Errorf("worqrtest: run policy: task %s has not ended after %d attempts: %w", id, len(res.Attempts), ctx.Err())
		}
	}
	res.Attempts = rec.attemptsOf(id)
	// Its outcome was written before the observer heard of it.
	if res.Outcome, err = c.TaskResult(ctx, queue, id); err != nil {
		return res, fmt.Errorf("worqrtest: run policy: %w", err)
	}
	if last := len(res.Attempts) - 1; last >= 0 && res.Attempts[last].Outcome == worqr.OutcomeDead {
		res.Attempts[last].Reason = res.Outcome.Reason
	}
	return res, nil
}

// RunPolicyJSON is RunPolicy for a typed handler (worqr.HandleJSON's): v
// is encoded as JSON, as EnqueueJSON would, and decoded for h.
func RunPolicyJSON[T any](ctx context.Context, h worqr.TypedHandler[T], v T, opts PolicyOptions) (PolicyResult, error) {
	if h == nil {
		return PolicyResult{}, fmt.Errorf("worqrtest: run policy: nil handler: %w", worqr.ErrInvalidOptions)
	}
	payload, err := worqr.JSON[T]{}.Marshal(v)
	if err != nil {
		return PolicyResult{}, fmt.Errorf("worqrtest: run policy: encode %s: %w", reflect.TypeFor[T](), err)
	}
	return RunPolicy(ctx, worqr.Typed(worqr.JSON[T]{}, h), payload, opts)
}

// policyClient makes the run's client, observed by rec, and the function
// that closes it and what it runs on.
func policyClient(opts PolicyOptions, rec *recorder) (*worqr.Client, func(context.Context) error, error) {
	copts := worqr.Options{Prefix: "worqrtest-" + randomHex(4), Logger: opts.Logger, Observer: rec}
	if opts.Addr == "" {
		redis, err := embedded.Start(embedded.Options{Client: copts})
		if err != nil {
			return nil, nil, fmt.Errorf("worqrtest: run policy: %w", err)
		}
		return redis.Client(), redis.Close, nil
	}
	copts.Addr = opts.Addr
	c, err := worqr.New(copts)
	if err != nil {
		return nil, nil, fmt.Errorf("worqrtest: run policy: %w", err)
	}
	return c, func(ctx context.Context) error {
		return errors.Join(c.Close(ctx), deletePrefix(ctx, opts.Addr, copts.Prefix))
	}, nil
}

// scaled is a retry's delay d as RunPolicy waits it: d·scale, at least a
// millisecond if d is positive.
func scaled(d time.Duration, scale float64) time.Duration {
	if d <= 0 {
		return 0
	}
	s := float64(d) * scale
	if s >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(time.Duration(s), time.Millisecond)
}

// recorder is the run's observer: it records each attempt from the
// worker's start and finish events, and the delays the policy chose.
type recorder struct {
	queue   string
	changed chan struct{} // a token after each finish event

	mu       sync.Mutex
	attempts []recorded
	delays   map[int]time.Duration // by attempt number, until its finish event
}

type recorded struct {
	taskID, processID string
	Attempt
}

// backoff is the policy's Backoff (DefaultBackoff if nil), recording its
// answers and scaling them.
func (r *recorder) backoff(policy func(int, error) time.Duration, scale float64) func(int, error) time.Duration {
	if policy == nil {
		policy = worqr.DefaultBackoff
	}
	return func(attempt int, err error) time.Duration {
		d := max(policy(attempt, err), 0)
		r.setDelay(attempt, d)
		return scaled(d, scale)
	}
}

// retryAfter is the outermost middleware: it records the delay a
// handler's RetryAfter error asks for, and asks for it scaled instead.
func (r *recorder) retryAfter(scale float64) worqr.Middleware {
	return func(next worqr.Handler) worqr.Handler {
		return func(ctx context.Context, p *worqr.Process) error {
			err := next(ctx, p)
			if d, ok := worqr.RetryAfterDelay(err); ok {
				r.setDelay(p.Attempt(), d)
				return worqr.RetryAfter(scaled(d, scale), err)
			}
			return err
		}
	}
}

func (r *recorder) setDelay(attempt int, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.delays == nil {
		r.delays = make(map[int]time.Duration)
	}
	r.delays[attempt] = d
}

// ObserveStart records an attempt's start.
func (r *recorder) ObserveStart(_ context.Context, e worqr.StartEvent) {
	if e.Queue != r.queue {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, recorded{taskID: e.TaskID, processID: e.ProcessID, Attempt: Attempt{Number: e.Attempt, Start: time.Now()}})
}

// ObserveFinish records how an attempt ended.
func (r *recorder) ObserveFinish(_ context.Context, e worqr.FinishEvent) {
	if e.Queue != r.queue {
		return
	}
	r.mu.Lock()
	for i := range r.attempts {
		a := &r.attempts[i]
		if a.processID != e.ProcessID {
			continue
		}
		a.End, a.Outcome, a.Err, a.Reason = time.Now(), e.Outcome, e.Err, worqr.ReasonOf(e.Err)
		if e.Outcome == worqr.OutcomeRetried {
			a.Delay = r.delays[e.Attempt]
		}
		break
	}
	delete(r.delays, e.Attempt)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default: // a token is waiting already
	}
}

// ended reports whether the task has ended: succeeded, dead, or dropped.
func (r *recorder) ended(taskID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.attempts {
		if a.taskID != taskID {
			continue
		}
		switch a.Outcome {
		case worqr.OutcomeSucceeded, worqr.OutcomeDead, worqr.OutcomeCancelled, worqr.OutcomeDeleted:
			return true
		}
	}
	return false
}

// attemptsOf returns the task's attempts, in order.
func (r *recorder) attemptsOf(taskID string) []Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Attempt
	for _, a := range r.attempts {
		if a.taskID == taskID {
			out = append(out, a.Attempt)
		}
	}
	return out
}
