package worqr

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
)

// Workers of one client share its subscription to a queue's channel: a
// worker leaving the queue must not end it for the others (each would
// subscribe again, and a fleet of workers in one process closing one by
// one would do so quadratically often).
func TestLeavingAQueueKeepsThePeersSubscription(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var subscribes atomic.Int64
	c.core.Store.SetFault(func(_ context.Context, op store.Op, queue string) error {
		if op == store.OpSubscribe && queue == "q" {
			subscribes.Add(1)
		}
		return nil
	})
	stay := newWorker(t, c, WorkerOptions{})
	done := make(chan string, 10)
	require.NoError(t, stay.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		done <- string(p.Task())
		return nil
	}, HandleOptions{}))
	leave := newWorker(t, c, WorkerOptions{})
	require.NoError(t, leave.StartWork(ctx, "q", Events{}))
	require.EqualValues(t, 1, subscribes.Load(), "the second worker joins the client's subscription")

	require.NoError(t, leave.Close(ctx))
	// A task enqueued now reaches the staying worker; by the time it has
	// run, a subscription the leaver ended would have been made again.
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("after"))))
	require.Equal(t, "after", recv(t, done, 5*time.Second, "the staying worker runs the task"))
	require.EqualValues(t, 1, subscribes.Load(), "the staying worker subscribed again")

	// The last one to leave ends the subscription on the server.
	require.NoError(t, stay.Close(ctx))
	eventually(t, 5*time.Second, "no subscriber left on the channel", func() bool {
		channel := c.core.Store.Keys().Queue("q").Channel
		cmd := c.core.Redis.B().PubsubNumsub().Channel(channel).Build()
		if c.core.Store.Sharded() {
			cmd = c.core.Redis.B().PubsubShardnumsub().Channel(channel).Build()
		}
		n, err := c.core.Redis.Do(ctx, cmd).AsIntMap()
		return err == nil && n[channel] == 0
	})
}

// The subscription is ready before its confirmation reaches the
// dispatcher: the dispatcher's check wakes the runtime, whose dequeue
// parks it in the idle set only if the subscription is ready by then. Here
// the reader is held inside the confirmation, at the mailbox, as a loaded
// machine can hold it: the subscription must be ready already, and the
// runtime parks once the reader goes on. (Ready was set after the push: a
// runtime whose dequeue ran first never parked until its next event.)
func TestSubscriptionIsReadyBeforeItsCheck(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.core.Store.SetFault(func(ctx context.Context, op store.Op, queue string) error {
		if op == store.OpSubscribe && queue == "q" {
			first := false
			once.Do(func() { first = true })
			if first {
				close(entered)
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return nil
	})
	w := newWorker(t, c, WorkerOptions{})
	handled := make(chan error, 1)
	go func() {
		handled <- w.Handle(ctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{})
	}()
	recv(t, entered, 5*time.Second, "subscribing")
	var s *engine.Session
	eventually(t, 5*time.Second, "serving q", func() bool {
		w.core.Lock()
		defer w.core.Unlock()
		s = w.core.Served()["q"]
		return s != nil
	})
	unlock := s.Sub.Hold() // the reader will stop at the mailbox
	defer unlock()
	close(release)
	eventually(t, 5*time.Second, "ready while the confirmation waits at the mailbox", s.Sub.IsReady)
	unlock()
	require.NoError(t, recv(t, handled, 5*time.Second, "Handle returned"))
	settledParking(t, c, "q", 1)
}

// A client's workers on one queue share one subscription: a worker that
// starts costs one check of the queue, however many started before it.
// (Each used to subscribe on its own, and rueidis tells every Receive of a
// channel of every confirmation on it: the n-th worker made the n-1
// before it check their queue again, n*n/2 checks for a fleet of n, and a
// fleet of a few thousand workers in one process fenced itself before it
// had all started.)
func TestWorkersOfAClientShareOneSubscription(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var subscribes, checks atomic.Int64
	c.core.Store.SetFault(func(_ context.Context, op store.Op, queue string) error {
		switch {
		case queue != "q":
		case op == store.OpSubscribe:
			subscribes.Add(1)
		case op == store.OpPromote: // one per check (the catch-up)
			checks.Add(1)
		}
		return nil
	})
	const n = 20
	subs := make([]*subscription.Subscription, n)
	for i := range subs {
		w := newWorker(t, c, WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error { return nil }, HandleOptions{}))
		w.core.Lock()
		subs[i] = w.core.Served()["q"].Sub
		w.core.Unlock()
	}
	// One more, last: rueidis reads the connection in order, so every
	// confirmation the others could hear came before this one's.
	last := newWorker(t, c, WorkerOptions{})
	require.NoError(t, last.StartWork(ctx, "q", Events{}))

	for i, sub := range subs {
		assert.EqualValues(t, 1, sub.Confirmed(), "worker %d heard the confirmation of a later worker's subscription", i)
	}
	assert.EqualValues(t, 1, subscribes.Load(), "the client subscribed to the channel once")
	listeners, subscribed := c.core.Store.Listeners("q")
	assert.Equal(t, n+1, listeners)
	assert.True(t, subscribed)
	eventually(t, 5*time.Second, "every worker checked the queue", func() bool { return checks.Load() >= n+1 })
	assert.EqualValues(t, n+1, checks.Load(), "checks of the queue")
}

// A subscription that the server drops as soon as it is made (another user
// of the connection unsubscribing it, over and over) is subscribed again
// with a backoff: coming straight back is for a subscription that held a
// while. Each time it comes back every listener checks its queue.
func TestSubscriptionDroppedAtOnceBacksOff(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	subscribes := countCalls(c, store.OpSubscribe)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	eventually(t, 5*time.Second, "subscribed", func() bool { return subscribes.Load() > 0 })

	channel := c.core.Store.Keys().Queue("q").Channel
	unsubscribe := c.core.Redis.B().Unsubscribe().Channel(channel).Build().Pin()
	if b.cluster {
		unsubscribe = c.core.Redis.B().Sunsubscribe().Channel(channel).Build().Pin()
	}
	const window = time.Second
	from := subscribes.Load()
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		// Between a drop and the next subscription the connection holds
		// none, and Valkey 8.0 answers UNSUBSCRIBE there with a NOSUB
		// error (Redis with an empty confirmation): nothing to drop then.
		err := c.core.Redis.Do(ctx, unsubscribe).Error()
		if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "NOSUB ") {
			continue
		}
		require.NoError(t, err)
	}
	n := subscribes.Load() - from
	t.Logf("%d subscriptions in %v while each was dropped within 2 ms", n, window)
	// With a backoff doubling from 10 ms: about log2(window/10ms).
	assert.LessOrEqual(t, n, int64(15), "subscriptions in %v", window)
}

// A queue's dispatcher is a service: it has started once StartWork
// returns, stops with StopWork, and, for the queues still served, with
// Close.
func TestDispatcherStartsAndStopsWithItsQueue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	subOf := func(q string) *subscription.Subscription {
		w.core.Lock()
		defer w.core.Unlock()
		return w.core.Served()[q].Sub
	}
	require.NoError(t, w.StartWork(ctx, "a", Events{}))
	require.NoError(t, w.StartWork(ctx, "b", Events{}))
	a, b := subOf("a"), subOf("b")
	recv(t, a.Started(), 5*time.Second, "a's dispatcher started")
	recv(t, b.Started(), 5*time.Second, "b's dispatcher started")
	aStopped, bStopped := a.Stopped(), b.Stopped()

	require.NoError(t, w.StopWork(ctx, "a"))
	recv(t, aStopped, time.Second, "a's dispatcher stopped by StopWork")
	select {
	case <-bStopped:
		t.Fatal("b's dispatcher stopped with a's")
	default:
	}
	require.NoError(t, w.Close(ctx))
	recv(t, bStopped, time.Second, "b's dispatcher stopped by Close")
}

// A callback that stops its own queue does not wait for its own
// dispatcher, which stops once the callback returns.
func TestDispatcherStopsAfterACallbackThatStoppedIt(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	stopped := make(chan error, 1)
	var once sync.Once
	require.NoError(t, w.StartWork(ctx, "q", Events{Work: func(q string, _ int64) {
		once.Do(func() { stopped <- w.StopWork(ctx, q) })
	}}))
	w.core.Lock()
	sub := w.core.Served()["q"].Sub
	w.core.Unlock()
	dispatcherStopped := sub.Stopped()
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	require.NoError(t, recv(t, stopped, 5*time.Second, "StopWork from the callback returned"))
	recv(t, dispatcherStopped, 5*time.Second, "the dispatcher stopped after its callback")
}
