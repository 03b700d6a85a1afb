package worqr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
)

// Ending a process, in one place: the retry policy (RetryPolicy, its
// backoffs, RetryAfter) and its decision for a handler that failed (the
// attempt budget, the backoff, dead-lettering and its reason); the
// scripts that end a process (Finish, a retry, a dead letter or a
// requeue, a handler's outcome or the application's call) with their
// batched sends; and the books and the observer told of the end. A
// handler's outcome is tried again while the worker lives if its write
// failed on the connection.

// Retry defaults.
const (
	// DefaultMaxAttempts is a task's attempt budget when neither
	// RetryPolicy.MaxAttempts nor the MaxAttempts enqueue option sets one.
	DefaultMaxAttempts = 10
	// DefaultBackoffBase and DefaultBackoffCap shape DefaultBackoff.
	DefaultBackoffBase = time.Second
	DefaultBackoffCap  = 10 * time.Minute
)

// RetryPolicy says how a Handle runtime retries a task whose handler
// failed. The zero value is the default: DefaultMaxAttempts attempts,
// DefaultBackoff between them.
type RetryPolicy struct {
	// MaxAttempts is the attempt budget: a task whose MaxAttempts-th
	// attempt failed goes to the dead letters. Only attempts that failed
	// count (the handler returned an error, or Retry was called): a start
	// whose worker died or was fenced, or that shutdown or StopWork gave
	// back, does not, so persistent tasks survive any number of restarts.
	// A task's own MaxAttempts enqueue option overrides it. 0 means
	// DefaultMaxAttempts; negative means no limit.
	MaxAttempts int
	// Backoff is the delay before the next attempt, given the attempt that
	// failed (1 for the first) and its error. Nil means DefaultBackoff. A
	// handler's RetryAfter error overrides it for that retry.
	Backoff func(attempt int, err error) time.Duration
}

// DefaultBackoff is exponential with jitter and a cap: about
// DefaultBackoffBase after the first failure, doubling with each, at most
// DefaultBackoffCap, each delay drawn between half and all of that so that
// tasks that failed together do not come back together. It is
// ExponentialBackoff(DefaultBackoffBase, DefaultBackoffCap, 0.5).
func DefaultBackoff(attempt int, err error) time.Duration {
	return defaultBackoff(attempt, err)
}

var defaultBackoff = ExponentialBackoff(DefaultBackoffBase, DefaultBackoffCap, 0.5)

// ExponentialBackoff returns a RetryPolicy.Backoff: base after the first
// failed attempt, doubling with each one after, never more than limit
// (however many attempts), with up to jitter (0 to 1) of each delay taken
// off at random: a delay is drawn between (1-jitter) and all of it, never
// 0, so that tasks that failed together do not all come back together.
// A jitter of 0 gives exactly base, 2·base, 4·base... It panics, with an
// error that errors.Is matches to ErrInvalidOptions, unless
// 0 < base <= limit and 0 <= jitter <= 1: like a regular expression
// given to regexp.MustCompile, its arguments are the program's own.
func ExponentialBackoff(base, limit time.Duration, jitter float64) func(attempt int, err error) time.Duration {
	if base <= 0 || limit < base || !(jitter >= 0 && jitter <= 1) {
		panic(fmt.Errorf("worqr: ExponentialBackoff(%v, %v, %v): %w: want 0 < base <= limit and 0 <= jitter <= 1", base, limit, jitter, ErrInvalidOptions))
	}
	return proc.Exponential(base, limit, jitter)
}

// retryAfterError asks for a retry after a given delay.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e retryAfterError) Error() string { return e.err.Error() }
func (e retryAfterError) Unwrap() error { return e.err }

// RetryAfter wraps a handler's error so the task is retried after d (an
// outside service said "retry after 30 s"), instead of after the policy's
// backoff. It still counts against the attempt budget. A nil err gives nil.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return retryAfterError{err: err, after: max(d, 0)}
}

// RetryAfterDelay reports the delay err asks for with RetryAfter (the
// outermost, if it was wrapped more than once), and whether it asks for
// one.
func RetryAfterDelay(err error) (time.Duration, bool) {
	var ra retryAfterError
	if errors.As(err, &ra) {
		return ra.after, true
	}
	return 0, false
}

// settler writes the outcomes of one runner's handlers.
type settler struct {
	w     *Worker
	retry RetryPolicy // the runner's (HandleOptions.Retry)
	// jobs are the slot scheduler's goroutines (see slotScheduler.jobs),
	// on which a Finish that failed on the connection is tried again.
	jobs *startstop.Group
	// settled ends a job once its outcome is written (runner.settled).
	settled func(job)
}

// settle applies the outcome of a handler to its process, and ends the
// job (settled) once it is written: a retry without waiting (see
// failLater), the others before it returns.
func (r *settler) settle(ctx context.Context, j job, err error) {
	p := j.p
	var write func(context.Context) error
	op := "requeue" // what the write is, for the outage's counts
	switch ended := p.Err(); {
	case errors.Is(ended, ErrProcessLost):
		r.settled(j)
		return // fenced or given back: the task is not ours to touch
	case errors.Is(ended, ErrTaskCancelled), errors.Is(ended, ErrQueueDeleted):
		// Requeue, not Finish: Requeue drops a process Redis has marked
		// cancelled or deleted, and requeues one it has not, so an event
		// that Redis's state does not back (stale, or forged by anyone
		// allowed to publish on the channel) cannot lose the task.
		write = func(ctx context.Context) error { return p.requeue(ctx, err) }
	case errors.Is(context.Cause(ctx), ErrShutdown) && err != nil:
		r.settled(j)
		return // still held: shutting down returns it to the front
	case err == nil:
		write, op = p.Finish, "finish"
	case IsPermanent(err):
		// The handler's own verdict, not a fault of the system: WARN,
		// as a failure that is retried, since the dead letter waits for
		// someone to requeue or delete it.
		logOutcome(p, slog.LevelWarn, "worqr: task failed permanently; dead-lettered", slog.Any("err", err), slog.String("reason", reasonOf(err, ReasonPermanent)), slog.Int("attempt", p.Attempt()))
		write, op = func(ctx context.Context) error { return p.bury(ctx, reasonOf(err, ReasonPermanent), err) }, "dead-letter"
	case proc.Policy(r.retry).Exhausted(p.failures+1, p.budget, DefaultMaxAttempts):
		logOutcome(p, slog.LevelError, "worqr: task failed on its last attempt; dead-lettered", slog.Any("err", err), slog.Int("attempt", p.Attempt()))
		write, op = func(ctx context.Context) error { return p.bury(ctx, reasonOf(err, ReasonExhausted), err) }, "dead-letter"
	default:
		delay := r.retry.delay(p.Attempt(), err)
		logOutcome(p, slog.LevelWarn, "worqr: task failed; retrying", slog.Any("err", err), slog.Int("attempt", p.Attempt()), slog.Duration("after", delay))
		r.failLater(j, delay, err)
		return
	}
	sent := r.w.c.outage.Begin()
	r.persist(p, op, write, sent, write(r.w.writes.Ctx(r.w.life, r.w.opts.TTL)))
	r.settled(j)
}

// finishLater is settle for a handler that succeeded on a process that
// has not ended, without waiting: the Finish joins the next batch of the
// queue's finishes (see coalesce.Coalescer.Then) and the handler's goroutine goes
// back for its next job. The goroutine that sends the batch records the
// outcome when it returns, as Finish would (recordSettled), and ends the
// job (settled). A write that failed on the connection is tried again,
// as settle does, on a goroutine of its own (the scheduler's, see
// slotScheduler.jobs): the batch's callbacks must not wait.
func (r *settler) finishLater(j job) {
	p := j.p
	r.writeLater(j, "finish", p.Finish, func(ctx context.Context, done func(store.Outcome, error)) {
		r.w.c.finishes.Then(ctx, p.queue, p, func(got store.Outcome, err error) {
			_, err = p.recordSettled("finish", OutcomeSucceeded, "", nil, got, err)
			done(got, err)
		})
	})
}

// failLater is settle's retry (after delay, the handler's error cause),
// written as finishLater writes a Finish: it joins the next batch of the
// queue's retries without waiting for it.
func (r *settler) failLater(j job, delay time.Duration, cause error) {
	p := j.p
	write := func(ctx context.Context) error { return p.retry(ctx, delay, cause) }
	r.writeLater(j, "retry", write, func(ctx context.Context, done func(store.Outcome, error)) {
		ref := store.RetryRef{ProcRef: store.ProcRef{Worker: p.owner, PID: p.id, Kind: p.kind}, Delay: delay, Err: proc.ErrorText(cause)}
		r.w.c.retries.Then(ctx, p.queue, ref, func(got store.Outcome, err error) {
			got, err = p.recordSettled("retry", OutcomeRetried, "", cause, got, err)
			done(got, dropped("retry", p, got, err))
		})
	})
}

// writeLater sends the outcome write op of job j through join, which
// calls done with its outcome once written, without waiting for it, then
// sees it through (persist: write tries it again) and ends the job, as
// finishLater says.
func (r *settler) writeLater(j job, op string, write func(context.Context) error, join func(ctx context.Context, done func(store.Outcome, error))) {
	p := j.p
	ctx := r.w.writes.Ctx(r.w.life, r.w.opts.TTL)
	sent := r.w.c.outage.Begin()
	if err := p.canSettle(ctx, op); err != nil {
		r.persist(p, op, write, sent, err)
		r.settled(j)
		return
	}
	join(ctx, func(_ store.Outcome, err error) {
		rest := func() {
			r.persist(p, op, write, sent, err) // at once unless err is retryable
			r.settled(j)
		}
		if !proc.Retryable(err) || r.w.life.Err() != nil || !r.jobs.Go(rest) {
			rest()
		}
	})
}

// persist sees an outcome write (op) through, given what its first
// try, sent at outage epoch sent, returned (outcome): see
// proc.Persist. It returns at once unless the write is to be tried
// again.
func (r *settler) persist(p *Process, op string, write func(context.Context) error, sent uint64, outcome error) {
	proc.Persist((*outcomeWriter)(r.w), &p.st, (*unrecorded)(p), op, write, sent, outcome)
}

// unrecorded is a process as told of an outcome write given up on (a
// conversion, not an allocation).
type unrecorded Process

func (u *unrecorded) Unrecorded(err error) {
	logOutcome((*Process)(u), slog.LevelWarn, "worqr: could not record the task's outcome", slog.Any("err", err))
}

// logOutcome writes one record about p's outcome, with the worker's and
// the process's attributes, without a derived logger (With, as
// Worker.logger does, copies and formats the handler's state): settle runs
// once per task, and once per failed attempt logs. Typed attributes, not
// key-value pairs: each value of a pair is boxed, and its slice made,
// for every failed attempt.
func logOutcome(p *Process, level slog.Level, msg string, attrs ...slog.Attr) {
	l := p.w.c.log
	if !l.Enabled(context.Background(), level) {
		return
	}
	var all [8]slog.Attr
	l.LogAttrs(context.Background(), level, msg, append(append(all[:0],
		slog.String("worker", p.w.ID()), slog.String("queue", p.queue), slog.String("process", p.ID()), slog.String("task", p.TaskID())),
		attrs...)...)
}

// delay is the policy's delay before the attempt after attempt.
func (r RetryPolicy) delay(attempt int, err error) time.Duration {
	if d, ok := RetryAfterDelay(err); ok {
		return d
	}
	if r.Backoff != nil {
		return max(r.Backoff(attempt, err), 0)
	}
	return DefaultBackoff(attempt, err)
}

// reasonOf is err's reason, or fallback.
func reasonOf(err error, fallback string) string {
	var r reasonError
	if errors.As(err, &r) {
		return r.reason
	}
	if errors.Is(err, ErrHandlerPanicked) {
		return ReasonPanic
	}
	return fallback
}

// finish is Finish, telling the observer outcome (and the handler's err).
func (p *Process) finish(ctx context.Context, outcome Outcome, cause error) error {
	_, err := p.settle(ctx, "finish", outcome, "", cause, func(ctx context.Context) (store.Outcome, error) {
		return p.w.c.finishes.Do(ctx, p.queue, p)
	})
	return err
}

func (p *Process) retry(ctx context.Context, delay time.Duration, cause error) error {
	got, err := p.settle(ctx, "retry", OutcomeRetried, "", cause, func(ctx context.Context) (store.Outcome, error) {
		return p.w.c.retries.Do(ctx, p.queue, store.RetryRef{ProcRef: store.ProcRef{Worker: p.owner, PID: p.id, Kind: p.kind}, Delay: delay, Err: proc.ErrorText(cause)})
	})
	return dropped("retry", p, got, err)
}

func (p *Process) bury(ctx context.Context, reason string, cause error) error {
	got, err := p.settle(ctx, "dead-letter", OutcomeDead, reason, cause, func(ctx context.Context) (store.Outcome, error) {
		c := p.w.c
		return c.store.Bury(ctx, p.queue, store.ProcRef{Worker: p.owner, PID: p.id}, reason, proc.ErrorText(cause), c.deadBounds)
	})
	return dropped("dead-letter", p, got, err)
}

// dropped turns the outcome of a retry or dead-letter write into the
// error for a task that was dropped instead.
func dropped(op string, p *Process, got store.Outcome, err error) error {
	if err != nil {
		return err
	}
	switch got {
	case store.WasCancelled:
		return fmt.Errorf("worqr: %s %q process %s: dropped: %w", op, p.queue, p.id, ErrTaskCancelled)
	case store.WasDeleted:
		return fmt.Errorf("worqr: %s %q process %s: dropped: %w", op, p.queue, p.id, ErrQueueDeleted)
	}
	return nil
}

// requeue is Requeue, telling the observer the handler's error.
func (p *Process) requeue(ctx context.Context, cause error) error {
	got, err := p.settle(ctx, "requeue", OutcomeRetried, "", cause, func(ctx context.Context) (store.Outcome, error) {
		return p.w.c.store.Requeue(ctx, p.queue, store.ProcRef{Worker: p.owner, PID: p.id})
	})
	return dropped("requeue", p, got, err)
}

// settle runs the script that ends the process (write) and records the
// outcome locally and with the observer.
func (p *Process) settle(ctx context.Context, op string, want Outcome, reason string, cause error, write func(context.Context) (store.Outcome, error)) (store.Outcome, error) {
	if err := p.canSettle(ctx, op); err != nil {
		return 0, err
	}
	got, err := write(ctx)
	return p.recordSettled(op, want, reason, cause, got, err)
}

// canSettle tells why a script that ends the process cannot be sent, if
// it cannot.
func (p *Process) canSettle(ctx context.Context, op string) error {
	if p.w == nil {
		return fmt.Errorf("worqr: %s %q process %s: %w", op, p.queue, p.id, ErrDetached)
	}
	if err := p.w.c.validateCtx(ctx, op); err != nil {
		return err
	}
	if p.isSettled() {
		return fmt.Errorf("worqr: %s %q process %s: already ended: %w", op, p.queue, p.id, ErrProcessLost)
	}
	return nil
}

// recordSettled records the outcome of the script that ended the process (got,
// or the error it failed with) locally and with the observer, and
// returns them as settle does. reason is the dead letter's, for want
// OutcomeDead.
func (p *Process) recordSettled(op string, want Outcome, reason string, cause error, got store.Outcome, err error) (store.Outcome, error) {
	if err != nil {
		return 0, p.w.c.fail(op, p.queue, err)
	}
	// A step whose workflow recorded its end in the finish has no notice
	// to carry.
	released := got == store.WasReleased
	if released {
		got = store.WasActive
	}
	switch got {
	case store.LeaseGone:
		p.w.lease.leaseLost(p.owner, p.queue, nil, p, fmt.Errorf("%s found the lease on %q gone", op, p.queue))
		fallthrough
	case store.NotOwned:
		forget(p, ErrProcessLost)
		return 0, fmt.Errorf("worqr: %s %q process %s: %w", op, p.queue, p.id, ErrProcessLost)
	case store.WasCancelled:
		want, reason = OutcomeCancelled, ""
	case store.WasDeleted:
		want, reason = OutcomeDeleted, ""
	}
	p.observeEnd(want, reason, cause)
	forget(p, ErrProcessEnded)
	if p.flow != "" && !released && got == store.WasActive && (want == OutcomeSucceeded || want == OutcomeDead) {
		p.w.c.flowEnded(p.queue, p.flow, p.taskID, want) // its workflow's next steps
	}
	return got, nil
}

// observeEnd tells the observer, once, how the process ended (and, for
// OutcomeDead, the dead letter's reason).
func (p *Process) observeEnd(outcome Outcome, reason string, err error) {
	obs := p.w.c.obs.finish
	if obs == nil {
		return
	}
	if p.st.Observe() {
		obs.ObserveFinish(context.Background(), FinishEvent{
			Queue: p.queue, TaskID: p.taskID, ProcessID: p.id, WorkerID: p.owner, Kind: p.kind, Attempt: p.attempt,
			Outcome: outcome, Reason: reason, Duration: p.w.c.clock.Since(p.started), Err: err,
		})
	}
}

// finishJoined is the coalescer's send for Finish: the processes of one
// queue from overlapping calls, in one script call.
func (c *Client) finishJoined(ctx context.Context, queue string, ps []*Process) ([]store.Outcome, error) {
	refs := make([]store.ProcRef, len(ps))
	for i, p := range ps {
		refs[i] = store.ProcRef{Worker: p.owner, PID: p.id, Result: p.resultText(), Kind: p.kind, Flow: p.flow}
	}
	return c.store.Finish(ctx, queue, refs)
}

// forget drops a process from the books of its queue's session and ends
// it.
func forget(p *Process, reason error) {
	w := p.w
	w.mu.Lock()
	if s := w.sessions[p.queue]; s != nil {
		s.drop(p)
	}
	w.mu.Unlock()
	p.end(reason, true)
}

// retryJoined is the coalescer's send for retries: the retries of one
// queue from overlapping calls, in one script call.
func (c *Client) retryJoined(ctx context.Context, queue string, refs []store.RetryRef) ([]store.Outcome, error) {
	return c.store.Retry(ctx, queue, refs)
}
