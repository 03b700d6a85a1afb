package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/proc"
	"github.com/worqr/worqr/internal/startstop"
	"github.com/worqr/worqr/internal/store"
)

// Writing a process's outcome, in one place: the settler's decision for
// a handler's outcome (the attempt budget, the backoff, dead-lettering
// and its reason); the scripts that end a process (Finish, a retry, a
// dead letter or a requeue, a handler's outcome or the application's
// call) with their batched sends; and the process's end recorded once
// they answered (recordSettled: Proc.End and Forget, books.go). A
// handler's outcome is tried again while the worker lives if its write
// failed on the connection.

// Settler writes the outcomes of one runtime's handlers; J is the
// runtime's job, which Settled ends once its outcome is written.
type Settler[J any] struct {
	// Policy is the runtime's retry policy (its budget); Delay its
	// delay before the attempt after attempt, which failed with err.
	Policy proc.Policy
	Delay  func(attempt int, err error) time.Duration
	// Jobs are the slot scheduler's goroutines, on which a write that
	// failed on the connection is tried again.
	Jobs *startstop.Group
	// Settled ends a job once its outcome is written.
	Settled func(J)
}

// Settle applies the outcome of a handler (err) to its process p, and
// ends the job j (Settled) once it is written: a retry without waiting
// (see failLater), the others before it returns.
func (r *Settler[J]) Settle(ctx context.Context, j J, p *Proc, err error) {
	env := p.Host.Env()
	var write func(context.Context) error
	op := "requeue" // what the write is, for the outage's counts
	switch ended := p.St.Err(); {
	case errors.Is(ended, errs.ErrProcessLost):
		r.Settled(j)
		return // fenced or given back: the task is not ours to touch
	case errors.Is(ended, errs.ErrTaskCancelled), errors.Is(ended, errs.ErrQueueDeleted):
		// Requeue, not Finish: Requeue drops a process Redis has marked
		// cancelled or deleted, and requeues one it has not, so an event
		// that Redis's state does not back (stale, or forged by anyone
		// allowed to publish on the channel) cannot lose the task.
		write = func(ctx context.Context) error { return p.Requeue(ctx, err) }
	case errors.Is(context.Cause(ctx), errs.ErrShutdown) && err != nil:
		r.Settled(j)
		return // still held: shutting down returns it to the front
	case err == nil:
		write, op = p.finishNow, "finish"
	case IsPermanent(err):
		// The handler's own verdict, not a fault of the system: WARN,
		// as a failure that is retried, since the dead letter waits for
		// someone to requeue or delete it.
		reason := Reason(err, ReasonPermanent)
		p.logOutcome(slog.LevelWarn, "worqr: task failed permanently; dead-lettered", slog.Any("err", err), slog.String("reason", reason), slog.Int("attempt", p.Attempt))
		write, op = func(ctx context.Context) error { return p.Bury(ctx, reason, err) }, "dead-letter"
	case r.Policy.Exhausted(p.Failures+1, p.Budget, env.MaxAttempts):
		p.logOutcome(slog.LevelError, "worqr: task failed on its last attempt; dead-lettered", slog.Any("err", err), slog.Int("attempt", p.Attempt))
		write, op = func(ctx context.Context) error { return p.Bury(ctx, Reason(err, ReasonExhausted), err) }, "dead-letter"
	default:
		delay := r.Delay(p.Attempt, err)
		p.logOutcome(slog.LevelWarn, "worqr: task failed; retrying", slog.Any("err", err), slog.Int("attempt", p.Attempt), slog.Duration("after", delay))
		r.failLater(j, p, delay, err)
		return
	}
	sent := env.Writer.Outage().Begin()
	r.persist(p, op, write, sent, write(env.Writer.WriteCtx()))
	r.Settled(j)
}

// FinishLater is Settle for a handler that succeeded on a process that
// has not ended, without waiting: the Finish joins the next batch of the
// queue's finishes (see coalesce.Coalescer.Then) and the handler's
// goroutine goes back for its next job. The goroutine that sends the
// batch records the outcome when it returns, as Finish would
// (recordSettled), and ends the job (Settled). A write that failed on
// the connection is tried again, as Settle does, on a goroutine of its
// own (Jobs): the batch's callbacks must not wait.
func (r *Settler[J]) FinishLater(j J, p *Proc) {
	l := &lateWrite[J]{r: r, j: j, p: p, kind: lateFinish}
	if ctx, ok := l.begin(); ok {
		p.Host.Env().Finishes.Then(ctx, p.Queue, p, l)
	}
}

// failLater is Settle's retry (after delay, the handler's error cause),
// written as FinishLater writes a Finish: it joins the next batch of the
// queue's retries without waiting for it.
func (r *Settler[J]) failLater(j J, p *Proc, delay time.Duration, cause error) {
	l := &lateWrite[J]{r: r, j: j, p: p, kind: lateRetry, delay: delay, cause: cause}
	if ctx, ok := l.begin(); ok {
		p.Host.Env().Retries.Then(ctx, p.Queue, p.retryRef(delay, cause), l)
	}
}

// lateWrite is an outcome write (kind: a finish, or a retry after delay
// for cause) of job j that joins a batch without waiting for it: the
// batch tells it its outcome (Done), which it records, sees through
// (persist: write tries it again) and then ends the job, as FinishLater
// says. It is the one allocation of such a write, which runs once per
// task: it is its own batch callback, where a closure for each of those
// steps would be one more.
type lateWrite[J any] struct {
	r     *Settler[J]
	j     J
	p     *Proc
	kind  lateKind
	delay time.Duration
	cause error
	sent  uint64 // the outage's epoch at the send
	err   error  // the batch's outcome, once recorded
}

// lateKind is which outcome a lateWrite writes, set by its constructor
// (FinishLater, failLater).
type lateKind uint8

const (
	lateFinish lateKind = iota
	lateRetry
)

// op names the write, in errors and the outage's counts.
func (k lateKind) op() string {
	if k == lateRetry {
		return "retry"
	}
	return "finish"
}

// begin readies the write and returns the context to send it on; if it
// cannot be sent, it sees that through and ends the job, and reports
// false.
func (l *lateWrite[J]) begin() (context.Context, bool) {
	w := l.p.Host.Env().Writer
	ctx := w.WriteCtx()
	l.sent = w.Outage().Begin()
	if err := l.p.canSettle(ctx, l.kind.op()); err != nil {
		l.err = err
		l.rest()
		return nil, false
	}
	return ctx, true
}

// Done records the outcome the batch returned and ends the job, trying
// a write that failed on the connection again on a goroutine of its own
// while the worker lives. A retry dropped instead (its task cancelled,
// or its queue deleted, meanwhile) is no error here, unlike for
// Proc.Retry's caller: recordSettled told the observer of the drop, and
// persist takes a drop as written.
func (l *lateWrite[J]) Done(got store.Outcome, err error) {
	p := l.p
	switch l.kind {
	case lateFinish:
		_, err = p.recordSettled("finish", Succeeded, "", nil, got, err)
	case lateRetry:
		_, err = p.recordSettled("retry", Retried, "", l.cause, got, err)
	}
	l.err = err
	if !proc.Retryable(err) || p.Host.Env().Writer.Life().Err() != nil || !l.r.Jobs.Go(l.rest) {
		l.rest()
	}
}

// rest sees the write through from its first try's outcome (at once
// unless it is to be tried again) and ends the job.
func (l *lateWrite[J]) rest() {
	l.r.persist(l.p, l.kind.op(), l.write, l.sent, l.err)
	l.r.Settled(l.j)
}

// write is the outcome write tried again.
func (l *lateWrite[J]) write(ctx context.Context) error {
	if l.kind == lateRetry {
		return l.p.Retry(ctx, l.delay, l.cause)
	}
	return l.p.finishNow(ctx)
}

// persist sees an outcome write (op) through, given what its first
// try, sent at outage epoch sent, returned (outcome): see
// proc.Persist. It returns at once unless the write is to be tried
// again.
func (r *Settler[J]) persist(p *Proc, op string, write func(context.Context) error, sent uint64, outcome error) {
	env := p.Host.Env()
	proc.Persist(env.Writer, env.Clock, &p.St, (*unrecorded)(p), op, write, sent, outcome)
}

// unrecorded is a process as told of an outcome write given up on (a
// conversion, not an allocation).
type unrecorded Proc

func (u *unrecorded) Unrecorded(err error) {
	(*Proc)(u).logOutcome(slog.LevelWarn, "worqr: could not record the task's outcome", slog.Any("err", err))
}

// logOutcome writes one record about p's outcome, with the worker's and
// the process's attributes, without a derived logger (With copies and
// formats the handler's state): settling runs once per task, and once
// per failed attempt logs. Typed attributes, not key-value pairs: each
// value of a pair is boxed, and its slice made, for every failed attempt.
func (p *Proc) logOutcome(level slog.Level, msg string, attrs ...slog.Attr) {
	env := p.Host.Env()
	l := env.Log
	if !l.Enabled(context.Background(), level) {
		return
	}
	var all [8]slog.Attr
	l.LogAttrs(context.Background(), level, msg, append(append(all[:0],
		slog.String("worker", env.WorkerID()), slog.String("queue", p.Queue), slog.String("process", p.ID), slog.String("task", p.TaskID)),
		attrs...)...)
}

// finishNow is Finish as an outcome write.
func (p *Proc) finishNow(ctx context.Context) error { return p.Finish(ctx, Succeeded, nil) }

// Finish deletes the process (the task is done), telling the observer
// outcome (and the handler's err, cause).
func (p *Proc) Finish(ctx context.Context, outcome Outcome, cause error) error {
	_, err := p.settle(ctx, "finish", outcome, "", cause, func(ctx context.Context) (store.Outcome, error) {
		return p.Host.Env().Finishes.Do(ctx, p.Queue, p)
	})
	return err
}

// Retry puts the task back to run again after delay, recording cause.
func (p *Proc) Retry(ctx context.Context, delay time.Duration, cause error) error {
	got, err := p.settle(ctx, "retry", Retried, "", cause, func(ctx context.Context) (store.Outcome, error) {
		return p.Host.Env().Retries.Do(ctx, p.Queue, p.retryRef(delay, cause))
	})
	return p.dropped("retry", got, err)
}

func (p *Proc) retryRef(delay time.Duration, cause error) store.RetryRef {
	return store.RetryRef{ProcRef: store.ProcRef{Worker: p.Owner, PID: p.ID, Kind: p.Kind}, Delay: delay, Err: proc.ErrorText(cause), Plain: p.Plain}
}

// Bury moves the task to its queue's dead letters with reason and cause.
func (p *Proc) Bury(ctx context.Context, reason string, cause error) error {
	got, err := p.settle(ctx, "dead-letter", Dead, reason, cause, func(ctx context.Context) (store.Outcome, error) {
		env := p.Host.Env()
		return env.Store.Bury(ctx, p.Queue, store.ProcRef{Worker: p.Owner, PID: p.ID}, reason, proc.ErrorText(cause), env.DeadBounds)
	})
	return p.dropped("dead-letter", got, err)
}

// Requeue puts the task back at the back of its queue, telling the
// observer the handler's error (cause).
func (p *Proc) Requeue(ctx context.Context, cause error) error {
	got, err := p.settle(ctx, "requeue", Retried, "", cause, func(ctx context.Context) (store.Outcome, error) {
		return p.Host.Env().Store.Requeue(ctx, p.Queue, store.ProcRef{Worker: p.Owner, PID: p.ID})
	})
	return p.dropped("requeue", got, err)
}

// dropped turns the outcome of a retry, dead-letter or requeue write into
// the error for a task that was dropped instead.
func (p *Proc) dropped(op string, got store.Outcome, err error) error {
	if err != nil {
		return err
	}
	switch got {
	case store.WasCancelled:
		return fmt.Errorf("worqr: %s %q process %s: dropped: %w", op, p.Queue, p.ID, errs.ErrTaskCancelled)
	case store.WasDeleted:
		return fmt.Errorf("worqr: %s %q process %s: dropped: %w", op, p.Queue, p.ID, errs.ErrQueueDeleted)
	}
	return nil
}

// settle runs the script that ends the process (write) and records the
// outcome locally and with the observer.
func (p *Proc) settle(ctx context.Context, op string, want Outcome, reason string, cause error, write func(context.Context) (store.Outcome, error)) (store.Outcome, error) {
	if err := p.canSettle(ctx, op); err != nil {
		return 0, err
	}
	got, err := write(ctx)
	return p.recordSettled(op, want, reason, cause, got, err)
}

// canSettle tells why a script that ends the process cannot be sent, if
// it cannot.
func (p *Proc) canSettle(ctx context.Context, op string) error {
	if err := p.Host.Env().Validate(ctx, op); err != nil {
		return err
	}
	if p.St.IsSettled() {
		return fmt.Errorf("worqr: %s %q process %s: already ended: %w", op, p.Queue, p.ID, errs.ErrProcessLost)
	}
	return nil
}

// recordSettled records the outcome of the script that ended the process
// (got, or the error it failed with) locally and with the observer, and
// returns them as settle does. reason is the dead letter's, for want
// Dead.
func (p *Proc) recordSettled(op string, want Outcome, reason string, cause error, got store.Outcome, err error) (store.Outcome, error) {
	env := p.Host.Env()
	if err != nil {
		return 0, env.Fail(op, p.Queue, err)
	}
	// A step whose workflow recorded its end in the finish has no notice
	// to carry.
	released := got == store.WasReleased
	if released {
		got = store.WasActive
	}
	switch got {
	case store.LeaseGone:
		p.Host.LeaseLost(fmt.Errorf("%s found the lease on %q gone", op, p.Queue))
		fallthrough
	case store.NotOwned:
		p.Forget(errs.ErrProcessLost)
		return 0, fmt.Errorf("worqr: %s %q process %s: %w", op, p.Queue, p.ID, errs.ErrProcessLost)
	case store.WasCancelled:
		want, reason = Cancelled, ""
	case store.WasDeleted:
		want, reason = Deleted, ""
	}
	p.observeEnd(want, reason, cause)
	p.Forget(errs.ErrProcessEnded)
	if p.Flow != "" && !released && got == store.WasActive && (want == Succeeded || want == Dead) {
		env.FlowEnded(p.Queue, p.Flow, p.TaskID, want, p.finishedNotice(want)) // its workflow's next steps
	}
	return got, nil
}

// finishedNotice is what reading the notice the end (want) of p wrote
// would answer, for a finish, which answered its stamp (NoticeAt) and
// the result it retained (NoticeResult); nil for another end, read when
// carried.
func (p *Proc) finishedNotice(want Outcome) *store.NoticeRead {
	if want != Succeeded || p.NoticeAt == 0 {
		return nil
	}
	return &store.NoticeRead{At: p.NoticeAt, Found: true, Result: store.Result{Body: p.NoticeResult}, Kept: true}
}

// FinishJoined is the coalescer's send for Finish (Env.Finishes): the
// processes of one queue from overlapping calls, in one script call.
func FinishJoined(ctx context.Context, st *store.Store, queue string, ps []*Proc) ([]store.Outcome, error) {
	refs := make([]store.ProcRef, len(ps))
	for i, p := range ps {
		refs[i] = store.ProcRef{Worker: p.Owner, PID: p.ID, Result: p.St.ResultText(), Kind: p.Kind, Flow: p.Flow}
	}
	out, at, err := st.Finish(ctx, queue, refs)
	for i, p := range ps {
		p.NoticeAt, p.NoticeResult = at, refs[i].Result
	}
	return out, err
}
