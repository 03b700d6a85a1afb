package worqrtest_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/worqrtest"
)

// syncBuffer is a log destination handlers may write from any goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// policyOptions are the tests' options: on the suite's Redis, logging to
// the test's log.
func policyOptions(t *testing.T, opts worqrtest.PolicyOptions) worqrtest.PolicyOptions {
	opts.Addr = backend().Addr
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	return opts
}

func panics(context.Context, *worqr.Process) error { panic("nil map") }

// A panic in Run's handler is recovered and becomes the error a worker
// would retry (or, with PanicIsPermanent, dead-letter), reason panic,
// logged with its stack as a worker logs it: it does not crash the test.
func TestRunRecoversAPanicAsAWorkerDoes(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	result, err := worqrtest.Run(t.Context(), func(ctx context.Context, p *worqr.Process) error {
		p.SetResult([]byte("partial"))
		return panics(ctx, p)
	}, []byte("x"), worqrtest.RunOptions{Queue: "q", Logger: logger})
	require.ErrorIs(t, err, worqr.ErrHandlerPanicked)
	assert.EqualError(t, err, "handler panicked: nil map")
	assert.Equal(t, worqr.ReasonPanic, worqr.ReasonOf(err))
	assert.False(t, worqr.IsPermanent(err), "retried, as a worker would")
	assert.Equal(t, "partial", string(result))
	assert.Contains(t, logs.String(), "worqr: handler panicked")
	assert.Contains(t, logs.String(), "queue=q")
	assert.Contains(t, logs.String(), "worqrtest_test.panics", "the stack")

	_, err = worqrtest.Run(t.Context(), panics, nil, worqrtest.RunOptions{PanicIsPermanent: true, Logger: logger})
	assert.ErrorIs(t, err, worqr.ErrHandlerPanicked)
	assert.True(t, worqr.IsPermanent(err))

	// A retry of a task whose previous attempt panicked too: its stack
	// was logged then, and is not again.
	var again syncBuffer
	_, err = worqrtest.Run(t.Context(), panics, nil, worqrtest.RunOptions{
		Attempt: 2, LastError: "handler panicked: nil map", Logger: slog.New(slog.NewTextHandler(&again, nil)),
	})
	assert.ErrorIs(t, err, worqr.ErrHandlerPanicked)
	assert.Contains(t, again.String(), "worqr: handler panicked")
	assert.NotContains(t, again.String(), "worqrtest_test.panics", "no stack")

	// RunJSON's handler too; middleware panics are a worker's too.
	_, err = worqrtest.RunJSON(t.Context(), func(context.Context, *worqr.Process, welcome) error {
		var m map[string]int
		m["x"]++ //lint:ignore SA5000 the panic is the point
		return nil
	}, welcome{}, worqrtest.RunOptions{Logger: logger})
	assert.ErrorIs(t, err, worqr.ErrHandlerPanicked)
	assert.ErrorContains(t, err, "assignment to entry in nil map")
}

// An always-failing task is tried MaxAttempts times, with the policy's
// backoff asked after each failure but the last and its delays cut to a
// millisecond, then dead-lettered as exhausted.
func TestRunPolicyDeadAfterItsAttempts(t *testing.T) {
	t.Parallel()
	var asked []int
	var mu sync.Mutex
	exp := worqr.ExponentialBackoff(time.Minute, time.Hour, 0)
	began := time.Now()
	res, err := worqrtest.RunPolicy(ctxT(t), func(context.Context, *worqr.Process) error {
		return errors.New("smtp down")
	}, []byte("x"), policyOptions(t, worqrtest.PolicyOptions{Handle: worqr.HandleOptions{Retry: worqr.RetryPolicy{
		MaxAttempts: 3,
		Backoff: func(attempt int, err error) time.Duration {
			mu.Lock()
			asked = append(asked, attempt)
			mu.Unlock()
			return exp(attempt, err)
		},
	}}}))
	took := time.Since(began)
	require.NoError(t, err)
	t.Logf("three attempts of a policy of minutes took %v", took)

	require.Len(t, res.Attempts, 3)
	for i, a := range res.Attempts {
		assert.Equal(t, i+1, a.Number)
		assert.EqualError(t, a.Err, "smtp down")
		assert.False(t, a.Start.IsZero())
		assert.False(t, a.End.Before(a.Start))
		if i > 0 {
			assert.False(t, a.Start.Before(res.Attempts[i-1].End), "attempt %d started before %d ended", a.Number, i)
		}
	}
	assert.Equal(t, []worqr.Outcome{worqr.OutcomeRetried, worqr.OutcomeRetried, worqr.OutcomeDead},
		[]worqr.Outcome{res.Attempts[0].Outcome, res.Attempts[1].Outcome, res.Attempts[2].Outcome})
	assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 0},
		[]time.Duration{res.Attempts[0].Delay, res.Attempts[1].Delay, res.Attempts[2].Delay}, "the policy's delays, unscaled")
	assert.Equal(t, []string{"", "", worqr.ReasonExhausted}, []string{res.Attempts[0].Reason, res.Attempts[1].Reason, res.Attempts[2].Reason})
	mu.Lock()
	assert.Equal(t, []int{1, 2}, asked)
	mu.Unlock()

	assert.Equal(t, worqr.OutcomeDead, res.Outcome.Status)
	assert.Equal(t, worqr.ReasonExhausted, res.Outcome.Reason)
	assert.Equal(t, "smtp down", res.Outcome.Error)
	assert.Equal(t, 3, res.Outcome.Attempts)
}

// A panic under RunPolicy is what a worker makes of it: retried, reason
// panic, and dead-lettered as panic when the attempts run out, or at
// once with PanicIsPermanent.
func TestRunPolicyPanics(t *testing.T) {
	t.Parallel()
	res, err := worqrtest.RunPolicy(ctxT(t), panics, nil, policyOptions(t, worqrtest.PolicyOptions{
		Handle: worqr.HandleOptions{Retry: worqr.RetryPolicy{MaxAttempts: 2}},
	}))
	require.NoError(t, err)
	require.Len(t, res.Attempts, 2)
	for _, a := range res.Attempts {
		assert.ErrorIs(t, a.Err, worqr.ErrHandlerPanicked)
		assert.Equal(t, worqr.ReasonPanic, a.Reason)
	}
	assert.Equal(t, worqr.OutcomeRetried, res.Attempts[0].Outcome)
	assert.Positive(t, res.Attempts[0].Delay, "DefaultBackoff's delay")
	assert.Equal(t, worqr.OutcomeDead, res.Outcome.Status)
	assert.Equal(t, worqr.ReasonPanic, res.Outcome.Reason)
	assert.Equal(t, "handler panicked: nil map", res.Outcome.Error)

	res, err = worqrtest.RunPolicy(ctxT(t), panics, nil, policyOptions(t, worqrtest.PolicyOptions{
		Handle: worqr.HandleOptions{PanicIsPermanent: true},
	}))
	require.NoError(t, err)
	require.Len(t, res.Attempts, 1)
	assert.Equal(t, worqr.OutcomeDead, res.Attempts[0].Outcome)
	assert.True(t, worqr.IsPermanent(res.Attempts[0].Err))
	assert.Equal(t, worqr.ReasonPanic, res.Outcome.Reason)
}

// The task's own options override the queue's; a RetryAfter's delay is
// recorded and scaled as the backoff's is; a handler that runs out of
// time fails with reason timeout; a success ends the run with its result.
func TestRunPolicyOptionsRetryAfterAndTimeout(t *testing.T) {
	t.Parallel()
	res, err := worqrtest.RunPolicy(ctxT(t), func(ctx context.Context, p *worqr.Process) error {
		switch p.Attempt() {
		case 1:
			return worqr.RetryAfter(time.Hour, errors.New("rate limited"))
		case 2:
			<-ctx.Done() // outlives its 20 ms
			return context.Cause(ctx)
		}
		p.SetResult([]byte("sent"))
		return nil
	}, nil, policyOptions(t, worqrtest.PolicyOptions{
		Queue:   "mail",
		Handle:  worqr.HandleOptions{Retry: worqr.RetryPolicy{MaxAttempts: 1}},
		Enqueue: []worqr.EnqueueOption{worqr.MaxAttempts(3), worqr.Timeout(20 * time.Millisecond)},
	}))
	require.NoError(t, err)
	require.Len(t, res.Attempts, 3)
	assert.Equal(t, time.Hour, res.Attempts[0].Delay, "RetryAfter's, unscaled")
	assert.EqualError(t, res.Attempts[0].Err, "rate limited")
	assert.ErrorIs(t, res.Attempts[1].Err, worqr.ErrTaskTimeout)
	assert.Equal(t, worqr.ReasonTimeout, res.Attempts[1].Reason)
	assert.Equal(t, worqr.OutcomeRetried, res.Attempts[1].Outcome)
	assert.Equal(t, worqr.OutcomeSucceeded, res.Attempts[2].Outcome)
	assert.NoError(t, res.Attempts[2].Err)
	assert.Equal(t, worqr.OutcomeSucceeded, res.Outcome.Status)
	assert.Equal(t, "sent", string(res.Outcome.Result))
	assert.Equal(t, "mail", res.Outcome.Queue)
}

// With Scale 1 the task waits the policy's real delays.
func TestRunPolicyScale(t *testing.T) {
	t.Parallel()
	const backoff = 150 * time.Millisecond
	res, err := worqrtest.RunPolicy(ctxT(t), func(_ context.Context, p *worqr.Process) error {
		if p.Attempt() == 1 {
			return errors.New("once")
		}
		return nil
	}, nil, policyOptions(t, worqrtest.PolicyOptions{
		Scale:  1,
		Handle: worqr.HandleOptions{Retry: worqr.RetryPolicy{Backoff: func(int, error) time.Duration { return backoff }}},
	}))
	require.NoError(t, err)
	require.Len(t, res.Attempts, 2)
	// The delay is by the Redis clock, the times by this one: a little
	// slack for the two.
	assert.GreaterOrEqual(t, res.Attempts[1].Start.Sub(res.Attempts[0].End), backoff-20*time.Millisecond)
}

// A typed handler's payload that does not decode dies at once, as kind
// decode; one that does is handled.
func TestRunPolicyJSON(t *testing.T) {
	t.Parallel()
	var got welcome
	res, err := worqrtest.RunPolicyJSON(ctxT(t), func(_ context.Context, _ *worqr.Process, w welcome) error {
		got = w
		return nil
	}, welcome{Email: "ada@example.com"}, policyOptions(t, worqrtest.PolicyOptions{}))
	require.NoError(t, err)
	assert.Equal(t, worqr.OutcomeSucceeded, res.Outcome.Status)
	assert.Equal(t, welcome{Email: "ada@example.com"}, got)

	res, err = worqrtest.RunPolicy(ctxT(t), worqr.Typed(worqr.JSON[welcome]{}, func(context.Context, *worqr.Process, welcome) error {
		t.Error("called on a payload that does not decode")
		return nil
	}), []byte("{"), policyOptions(t, worqrtest.PolicyOptions{}))
	require.NoError(t, err)
	require.Len(t, res.Attempts, 1)
	assert.Equal(t, worqr.ReasonDecode, res.Outcome.Reason)
	assert.ErrorIs(t, res.Attempts[0].Err, worqr.ErrDecode)
}

// Bad options are refused; a task that has not ended when the context
// does ends the run with the attempts so far.
func TestRunPolicyErrors(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ok := func(context.Context, *worqr.Process) error { return nil }
	for _, scale := range []float64{-1, math.NaN(), math.Inf(1)} {
		_, err := worqrtest.RunPolicy(ctx, ok, nil, worqrtest.PolicyOptions{Scale: scale})
		assert.ErrorIs(t, err, worqr.ErrInvalidOptions, "scale %v", scale)
	}
	_, err := worqrtest.RunPolicy(ctx, nil, nil, worqrtest.PolicyOptions{})
	assert.ErrorIs(t, err, worqr.ErrInvalidOptions)
	_, err = worqrtest.RunPolicyJSON[welcome](ctx, nil, welcome{}, worqrtest.PolicyOptions{})
	assert.ErrorIs(t, err, worqr.ErrInvalidOptions)
	_, err = worqrtest.RunPolicy(ctx, ok, nil, worqrtest.PolicyOptions{Queue: strings.Repeat("q", worqr.MaxQueueNameLen+1)})
	assert.ErrorIs(t, err, worqr.ErrInvalidQueueName)

	short, cancel := context.WithCancel(ctx)
	defer cancel()
	res, err := worqrtest.RunPolicy(short, func(_ context.Context, p *worqr.Process) error {
		if p.Attempt() == 3 {
			cancel()
		}
		return errors.New("never")
	}, nil, policyOptions(t, worqrtest.PolicyOptions{Enqueue: []worqr.EnqueueOption{worqr.MaxAttempts(-1)}}))
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "has not ended after")
	require.GreaterOrEqual(t, len(res.Attempts), 2, "the attempts so far")
	assert.Equal(t, []int{1, 2}, []int{res.Attempts[0].Number, res.Attempts[1].Number})
}
