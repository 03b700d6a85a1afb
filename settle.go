package worqr

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/backoff"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
)

// Writing the outcome of a handler that returned: Finish, a retry, a
// dead letter or a requeue, kept trying while the worker lives if it
// failed on the connection.

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
		logOutcome(p, slog.LevelWarn, "worqr: task failed permanently; dead-lettered", "err", err, "reason", reasonOf(err, ReasonPermanent), "attempt", p.Attempt())
		write, op = func(ctx context.Context) error { return p.bury(ctx, reasonOf(err, ReasonPermanent), err) }, "dead-letter"
	case r.retry.exhausted(p.failures+1, p.budget):
		logOutcome(p, slog.LevelError, "worqr: task failed on its last attempt; dead-lettered", "err", err, "attempt", p.Attempt())
		write, op = func(ctx context.Context) error { return p.bury(ctx, reasonOf(err, ReasonExhausted), err) }, "dead-letter"
	default:
		delay := r.retry.delay(p.Attempt(), err)
		logOutcome(p, slog.LevelWarn, "worqr: task failed; retrying", "err", err, "attempt", p.Attempt(), "after", delay)
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
		ref := store.RetryRef{ProcRef: store.ProcRef{Worker: p.owner, PID: p.id}, Delay: delay, Err: errorText(cause)}
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
		if !retryable(err) || r.w.life.Err() != nil || !r.jobs.Go(rest) {
			rest()
		}
	})
}

// persist sees an outcome write (op) through, given what its first
// try, sent at outage epoch sent, returned (outcome): writes after the
// handler must not hang on a dead Redis for ever; one that failed on the
// connection left the process ours in Redis, so it is tried again while
// the worker lives, or it would be held for ever. Those failures are the
// client's outage to log (one line for all the calls an outage fails);
// a fence that ends the process meanwhile drops the write, and counts it
// (see Worker.fence). It returns at once unless the write is to be tried
// again.
func (r *settler) persist(p *Process, op string, write func(context.Context) error, sent uint64, outcome error) {
	var b *backoff.Backoff
	for {
		switch {
		case outcome == nil, errors.Is(outcome, ErrTaskCancelled), errors.Is(outcome, ErrQueueDeleted): // Requeue dropped it, as it should
			r.w.c.outage.OK(sent)
			return
		case errors.Is(outcome, ErrProcessLost):
			return
		case !r.w.c.outage.Failed(sent, op, outcome):
			logOutcome(p, slog.LevelWarn, "worqr: could not record the task's outcome", "err", outcome)
			return
		}
		if b == nil {
			b = backoff.New(50*time.Millisecond, time.Second)
			p.setUnwritten()
		}
		if !b.Wait(r.w.life) {
			logOutcome(p, slog.LevelWarn, "worqr: could not record the task's outcome", "err", outcome)
			return
		}
		sent = r.w.c.outage.Begin()
		outcome = write(r.w.writes.Ctx(r.w.life, r.w.opts.TTL))
	}
}

// logOutcome writes one record about p's outcome, with the worker's and
// the process's attributes, without a derived logger (With, as
// Worker.logger does, copies and formats the handler's state): settle runs
// once per task, and once per failed attempt logs.
func logOutcome(p *Process, level slog.Level, msg string, args ...any) {
	l := p.w.c.log
	if !l.Enabled(context.Background(), level) {
		return
	}
	l.Log(context.Background(), level, msg, append([]any{"worker", p.w.ID(), "queue", p.queue, "process", p.ID(), "task", p.TaskID()}, args...)...)
}

// retryable tells whether an outcome write may not have reached Redis and
// can be sent again (the scripts check ownership, so a repeat is safe): it
// failed on the connection, or got no answer within its deadline (a TTL
// and at most an eighth more, see writedeadline.Deadline) while the worker lives (a
// hung node).
func retryable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}
