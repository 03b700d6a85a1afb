package proc

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/worqr/worqr/internal/backoff"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/outage"
)

// The arithmetic of the retry policy, and the persistence of the writes
// that end a process (see internal/engine's settle.go, which decides them).

// Policy is a runtime's retry policy: the root's RetryPolicy, which
// converts to it.
type Policy struct {
	MaxAttempts int
	Backoff     func(attempt int, err error) time.Duration
}

// Exhausted reports whether a task whose failed attempts number failed
// (this one included), with its own budget own (0: none; negative: no
// limit), has no attempt left; def is the budget when neither the task
// nor the policy sets one.
func (r Policy) Exhausted(failed, own, def int) bool {
	budget := own
	if budget == 0 {
		budget = r.MaxAttempts
	}
	if budget == 0 {
		budget = def
	}
	return budget > 0 && failed >= budget
}

// Exponential is the root's ExponentialBackoff once its arguments are
// checked (0 < base <= limit, 0 <= jitter <= 1).
func Exponential(base, limit time.Duration, jitter float64) func(attempt int, err error) time.Duration {
	return func(attempt int, _ error) time.Duration {
		d := limit
		if n := max(attempt-1, 0); base <= limit>>n { // base<<n <= limit, without overflowing
			d = base << n
		}
		span := d // what jitter may take off: d·jitter, at most d
		if f := float64(d) * jitter; f < float64(d) {
			span = time.Duration(f)
		}
		if span <= 0 {
			return d
		}
		return d - time.Duration(rand.Int64N(int64(span))) // in (d-span, d]
	}
}

// MaxErrorLen bounds the error text recorded with a task.
const MaxErrorLen = 4096

// ErrorText is the text recorded for err: at most MaxErrorLen bytes.
func ErrorText(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > MaxErrorLen {
		s = s[:MaxErrorLen]
	}
	return s
}

// Retryable tells whether an outcome write may not have reached Redis and
// can be sent again (the scripts check ownership, so a repeat is safe): it
// failed on the connection, or got no answer within its deadline (a TTL
// and at most an eighth more, see writedeadline.Deadline) while the worker lives (a
// hung node).
func Retryable(err error) bool {
	return errors.Is(err, errs.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// Writer is what seeing a process's outcome writes through takes of its
// worker.
type Writer interface {
	// Outage is the client's: the writes' failures are its to log.
	Outage() *outage.Outage
	// Life is the worker's run context: a write is tried again while it
	// lives.
	Life() context.Context
	// WriteCtx is a write's context: bounded (see writedeadline).
	WriteCtx() context.Context
}

// Unrecorded is told of an outcome write given up on (its error): the
// root logs it with the process's attributes.
type Unrecorded interface{ Unrecorded(err error) }

// Persist sees an outcome write (op) of the process whose state is s
// through, given what its first try, sent at outage epoch sent, returned
// (outcome): writes after the handler must not hang on a dead Redis for
// ever; one that failed on the connection left the process ours in
// Redis, so it is tried again, after waits on clk (the client's clock)
// from 50 ms doubling up to a second, while the worker lives, or it
// would be held for ever. Those failures are the client's outage to log
// (one line for all the calls an outage fails). It stops trying once the
// process is stopped (s.Stopped): found lost, as a fence finds it, when
// the write is dropped without a word (the fence counts it: see
// engine.LogDropped); or given up (State.GiveUp), as a closing worker's
// cancel of its handlers gives them up, when the write is told to u and
// the task goes back with the worker's others. So closing a
// worker never waits out a wait of Persist's. It returns at once unless
// the write is to be tried again.
func Persist(w Writer, clk clock.Clock, s *State, u Unrecorded, op string, write func(context.Context) error, sent uint64, outcome error) {
	var b *backoff.Backoff
	for {
		switch {
		case outcome == nil, errors.Is(outcome, errs.ErrTaskCancelled), errors.Is(outcome, errs.ErrQueueDeleted): // Requeue dropped it, as it should
			w.Outage().OK(sent)
			return
		case errors.Is(outcome, errs.ErrProcessLost):
			return
		case !w.Outage().Failed(sent, op, outcome):
			u.Unrecorded(outcome)
			return
		}
		if b == nil {
			b = backoff.New(persistFirstWait, persistMaxWait).On(clk)
			s.SetUnwritten()
		}
		switch wait(clk, b.Step(), w.Life(), s.Stopped()) {
		case ended:
			u.Unrecorded(outcome)
			return
		case stopped:
			if !s.IsSettled() {
				u.Unrecorded(outcome)
			}
			return
		}
		sent = w.Outage().Begin()
		outcome = write(w.WriteCtx())
	}
}

// persistFirstWait and persistMaxWait bound Persist's waits between the
// tries of a write: short at first, as most outages are a reconnection,
// and no longer than a second, so that a write goes through soon after
// Redis is back.
const (
	persistFirstWait = 50 * time.Millisecond
	persistMaxWait   = time.Second
)

// waited is how one of Persist's waits ended.
type waited int

const (
	elapsed waited = iota // the wait is over: try again
	ended                 // the worker's life ended
	stopped               // the process stopped (State.Stopped)
)

// wait waits d on clk, or until life ends or stop is closed.
func wait(clk clock.Clock, d time.Duration, life context.Context, stop <-chan struct{}) waited {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-life.Done():
		return ended
	case <-stop:
		return stopped
	case <-t.C():
		return elapsed
	}
}
