package worqr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// The texts of worqr's errors: a call's error says "worqr: " once, at its
// start; a sentinel's text has none, so wrapping one adds no second.

// saysWorqrOnce checks the rule on an error a call returned.
func saysWorqrOnce(t *testing.T, err error, name string) {
	t.Helper()
	if !assert.Error(t, err, name) {
		return
	}
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "worqr: "), "%s: %q does not start with \"worqr: \"", name, msg)
	assert.Equal(t, 1, strings.Count(msg, "worqr:"), "%s: %q says \"worqr:\" more than once", name, msg)
}

// Every error path these calls reach, beyond those the tests of bad input,
// closed clients, cancelled contexts and outages check as well.
func TestErrorTextsSayWorqrOnce(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	h := func(context.Context, *Process) error { return nil }
	require.NoError(t, w.Handle(ctx, "handled", h, HandleOptions{}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx))
	require.NoError(t, second(c.Enqueue(ctx, "u", []byte("x"), Unique("k"))))
	require.NoError(t, c.SetRateLimit(ctx, "limited", 1, time.Hour, CreateQueue()))
	require.NoError(t, w.StartWork(ctx, "limited", Events{}))
	require.NoError(t, second(c.EnqueueBatch(ctx, "limited", [][]byte{[]byte("1"), []byte("2")})))
	lp, err := w.Dequeue(ctx, "limited")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lp.Finish(context.Background()) })

	for name, err := range map[string]error{
		"Enqueue negative delay":     second(c.Enqueue(ctx, "q", nil, In(-time.Second))),
		"Enqueue duplicate":          second(c.Enqueue(ctx, "u", []byte("y"), Unique("k"))),
		"EnqueueBatch unique":        second(c.EnqueueBatch(ctx, "q", [][]byte{nil}, Unique("k"))),
		"EnqueueBatch bad weight":    second(c.EnqueueBatch(ctx, "q", [][]byte{nil}, Weight(-1))),
		"Dequeue empty queue":        second(w.Dequeue(ctx, "q")),
		"Dequeue handled queue":      second(w.Dequeue(ctx, "handled")),
		"Dequeue rate limited":       second(w.Dequeue(ctx, "limited")),
		"Finish twice":               p.Finish(ctx),
		"Status of a finished":       p.Status(ctx),
		"Retry negative delay":       p.Retry(ctx, -time.Second, nil),
		"ReportProgress bad percent": p.ReportProgress(ctx, 101, ""),
		"StopWork not served":        w.StopWork(ctx, "nowhere"),
		"StartWork served":           w.StartWork(ctx, "q", Events{}),
		"Handle served":              w.Handle(ctx, "q", h, HandleOptions{}),
		"HandleQueues none":          w.HandleQueues(ctx, nil, PoolOptions{}),
		"HandleQueues twice":         w.HandleQueues(ctx, []QueueSpec{{Queue: "a", Handler: h}, {Queue: "a", Handler: h}}, PoolOptions{}),
		"Periodic no name":           w.Periodic(ctx, "", "q", Every(time.Second), nil, PeriodicOptions{}),
		"Periodic large task":        w.Periodic(ctx, "p", "q", Every(time.Second), make([]byte, DefaultMaxTaskSize+1), PeriodicOptions{}),
		"SetConcurrency negative":    c.SetConcurrency(ctx, "q", -1),
		"SetRateLimit bad":           c.SetRateLimit(ctx, "q", 1, -time.Second),
		"SetConcurrency too large":   c.SetConcurrency(ctx, "q", MaxLimit+1),
		"Pause no queue":             c.Pause(ctx, "nowhere"),
		"Tasks bad prefix":           second(c.Tasks(ctx, "q", 0, 1, PayloadPrefix(-1))),
		"FindTask no id":             second(c.FindTask(ctx, "q", "")),
		"DeadLetters bad page":       second(c.DeadLetters(ctx, "q", -1, 10)),
		"RequeueDeadLetter no id":    second(c.RequeueDeadLetter(ctx, "q", "")),
		"DeleteDeadLetter no id":     second(c.DeleteDeadLetter(ctx, "q", "")),
		"TaskResult not kept":        second(c.TaskResult(ctx, "q", "1")),
		"TaskProgress none":          second(c.TaskProgress(ctx, "q", "1")),
		"Wait no id":                 second(c.Wait(ctx, "q", "")),
		"Stats bad resolution":       second(c.Stats(ctx, "q", StatsOptions{Resolution: time.Second})),
		"Peek empty":                 second(c.Peek(ctx, "empty")),
		"EnqueueJSON unencodable":    second(EnqueueJSON(ctx, c, "q", func() {})),
		"New bad URL":                second(New(Options{Addr: "redis://[bad"})),
		"New no port":                second(New(Options{Addr: "127.0.0.1"})),
		"NewWorker short TTL":        second(c.NewWorker(ctx, WorkerOptions{TTL: time.Millisecond})),
		"Detached Finish":            NewDetachedProcess(nil, DetachedOptions{}).Finish(ctx),
	} {
		saysWorqrOnce(t, err, name)
	}

	// A pool served whole or not at all: its second queue is refused, and
	// leaving its first again fails too. Both errors are said, "worqr:"
	// once.
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpRelease {
			return errors.New("connection reset (test)")
		}
		return nil
	})
	err = w.HandleQueues(ctx, []QueueSpec{{Queue: "p1", Handler: h}, {Queue: "q", Handler: h}}, PoolOptions{})
	c.core.Store.SetFault(nil)
	require.ErrorIs(t, err, ErrAlreadyServing)
	require.ErrorIs(t, err, ErrUnavailable, "leaving p1 again failed")
	saysWorqrOnce(t, err, "HandleQueues undone")
}

// A task over MaxTaskSize is refused with its size and the limit in
// words, not a count of bytes that stops at the limit.
func TestOversizedTaskSaysItsSizeAndTheLimit(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"5 MB", func() error { return second(c.Enqueue(ctx, "q", make([]byte, 5_000_000))) },
			`worqr: enqueue "q": task of 4.8 MiB is over the limit of 1.0 MiB (Options.MaxTaskSize)`},
		{"one byte over", func() error { return second(c.Enqueue(ctx, "q", make([]byte, DefaultMaxTaskSize+1))) },
			`worqr: enqueue "q": task of 1.0 MiB (1048577 bytes) is over the limit of 1.0 MiB (1048576 bytes) (Options.MaxTaskSize)`},
		{"batch", func() error { return second(c.EnqueueBatch(ctx, "q", [][]byte{nil, make([]byte, 3<<20)})) },
			`worqr: enqueue "q": task 1 of 3.0 MiB is over the limit of 1.0 MiB (Options.MaxTaskSize)`},
		{"cancel", func() error { return second(c.Cancel(ctx, "q", make([]byte, 2<<20))) },
			`worqr: cancel "q": task of 2.0 MiB is over the limit of 1.0 MiB (Options.MaxTaskSize)`},
	} {
		err := tc.call()
		assert.ErrorIs(t, err, ErrTaskTooLarge, tc.name)
		assert.EqualError(t, err, tc.want, tc.name)
	}
	small, err := New(Options{Redis: c.core.Redis, MaxTaskSize: 16})
	require.NoError(t, err)
	assert.EqualError(t, second(small.Enqueue(ctx, "q", make([]byte, 1500))),
		`worqr: enqueue "q": task of 1.5 KiB is over the limit of 16 bytes (Options.MaxTaskSize)`)
}

// An address whose server is not Redis (here an HTTP server) fails New
// with ErrUnavailable and says so, not "received unknown message type".
func TestNewWithAServerThatIsNotRedis(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	for _, a := range []string{addr, "redis://" + addr} {
		c, err := New(Options{Addr: a})
		assert.Nil(t, c)
		assert.ErrorIs(t, err, ErrUnavailable, a)
		saysWorqrOnce(t, err, a)
		if err != nil {
			assert.Contains(t, err.Error(), "does not speak the Redis protocol", a)
			assert.Contains(t, err.Error(), "connect to "+a, a)
		}
	}
}

// An address without a port (or with a port that is not one) is a wrong
// option, refused before anything is dialled: not an outage.
func TestNewWithAnAddrWithoutAPort(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"127.0.0.1", "localhost", "127.0.0.1:6379,127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:6379,", "::1"} {
		c, err := New(Options{Addr: a})
		assert.Nil(t, c)
		assert.ErrorIs(t, err, ErrInvalidOptions, a)
		assert.False(t, errors.Is(err, ErrUnavailable), "%s: %v", a, err)
		saysWorqrOnce(t, err, a)
	}
}

// NewContext gives up when its context ends: on a server that accepts
// connections and never answers, New would wait for rueidis's own
// timeouts.
func TestNewContextIsBoundedByItsContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- conn // held, never answered
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for conn := range accepted {
			_ = conn.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	c, err := NewContext(ctx, Options{Addr: ln.Addr().String()})
	took := time.Since(start)
	assert.Nil(t, c)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	saysWorqrOnce(t, err, "NewContext")
	// rueidis alone waits 10 s for the handshake's answer; the margin is
	// for a loaded machine.
	assert.Less(t, took, 3*time.Second, "returned soon after its context ended")

	dead, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = NewContext(dead, Options{Addr: ln.Addr().String()})
	assert.ErrorIs(t, err, context.Canceled)

	// Given a client of its own (not a cluster's), nothing is sent:
	// there is nothing for the context to bound.
	b := newBackend(t)
	if !b.cluster {
		c, err := NewContext(dead, Options{Redis: b.redis(), Prefix: b.prefix})
		require.NoError(t, err)
		require.NoError(t, c.Close(context.Background()))
	}
}

// The sentinels the engine returns are the root's very values: an error
// the engine wrapped matches the root's name with errors.Is.
func TestSentinelsAreTheEngines(t *testing.T) {
	t.Parallel()
	for name, pair := range map[string][2]error{
		"ErrClientClosed":     {ErrClientClosed, errs.ErrClientClosed},
		"ErrWorkerClosed":     {ErrWorkerClosed, errs.ErrWorkerClosed},
		"ErrInvalidOptions":   {ErrInvalidOptions, errs.ErrInvalidOptions},
		"ErrInvalidQueueName": {ErrInvalidQueueName, errs.ErrInvalidQueueName},
		"ErrTaskTooLarge":     {ErrTaskTooLarge, errs.ErrTaskTooLarge},
		"ErrNoTask":           {ErrNoTask, errs.ErrNoTask},
		"ErrNotRetained":      {ErrNotRetained, errs.ErrNotRetained},
		"ErrNotServing":       {ErrNotServing, errs.ErrNotServing},
		"ErrAlreadyServing":   {ErrAlreadyServing, errs.ErrAlreadyServing},
		"ErrWorkerFenced":     {ErrWorkerFenced, errs.ErrWorkerFenced},
		"ErrProcessLost":      {ErrProcessLost, errs.ErrProcessLost},
		"ErrProcessEnded":     {ErrProcessEnded, errs.ErrProcessEnded},
		"ErrTaskCancelled":    {ErrTaskCancelled, errs.ErrTaskCancelled},
		"ErrQueueDeleted":     {ErrQueueDeleted, errs.ErrQueueDeleted},
		"ErrNoQueue":          {ErrNoQueue, errs.ErrNoQueue},
		"ErrRateLimited":      {ErrRateLimited, errs.ErrRateLimited},
		"ErrDuplicate":        {ErrDuplicate, errs.ErrDuplicate},
		"ErrUnavailable":      {ErrUnavailable, errs.ErrUnavailable},
		"ErrShutdown":         {ErrShutdown, errs.ErrShutdown},
		"ErrTaskTimeout":      {ErrTaskTimeout, errs.ErrTaskTimeout},
		"ErrHandledQueue":     {ErrHandledQueue, errs.ErrHandledQueue},
		"ErrHandlerPanicked":  {ErrHandlerPanicked, errs.ErrHandlerPanicked},
	} {
		assert.True(t, pair[0] == pair[1], name)
		assert.ErrorIs(t, fmt.Errorf("worqr: op: %w", pair[1]), pair[0], name)
	}
}

// The reasons and outcomes the engine gives are the words the root
// documents: a dead letter's reason or an observer's outcome that the
// engine set matches the root's constant.
func TestReasonsAndOutcomesAreTheEngines(t *testing.T) {
	t.Parallel()
	for root, eng := range map[string]string{
		ReasonPermanent: engine.ReasonPermanent,
		ReasonExhausted: engine.ReasonExhausted,
		ReasonPanic:     engine.ReasonPanic,
	} {
		assert.Equal(t, root, eng)
	}
	for root, eng := range map[Outcome]engine.Outcome{
		OutcomeSucceeded: engine.Succeeded,
		OutcomeRetried:   engine.Retried,
		OutcomeDead:      engine.Dead,
		OutcomeCancelled: engine.Cancelled,
		OutcomeDeleted:   engine.Deleted,
		OutcomeLost:      engine.Lost,
	} {
		assert.Equal(t, root, Outcome(eng))
	}
}
