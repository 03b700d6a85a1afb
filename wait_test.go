package worqr

import (
	"bytes"
	"context"
	"errors"
	"math"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// waitBriefly is Wait bounded by a few seconds: the calls it makes must
// return at once, and a Wait that blocks fails the test with the deadline
// instead of hanging it.
func waitBriefly(t *testing.T, c *Client, queue, id string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	_, err := c.Wait(ctx, queue, id)
	require.Error(t, err)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "Wait blocked on a task that will have no outcome")
	return err
}

// Wait returns at once, with an error saying why, for a task that will
// never have an outcome: enqueued without Retain (wherever it is), an id
// the queue does not know, a task gone with no outcome kept, one cancelled
// or whose queue was deleted while in flight.
func TestWaitReturnsAtOnceWhenNoOutcomeWillCome(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	take := func(id string) *Process {
		t.Helper()
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		require.Equal(t, id, p.TaskID())
		return p
	}
	enqueue := func(payload string, opts ...EnqueueOption) string {
		t.Helper()
		id, err := c.Enqueue(ctx, "q", []byte(payload), opts...)
		require.NoError(t, err)
		return id
	}

	// Not retained: waiting, delayed, in flight, dead; then finished.
	delayed := enqueue("later", In(time.Hour))
	assert.ErrorIs(t, waitBriefly(t, c, "q", delayed), ErrNotRetained)
	plain := enqueue("plain")
	assert.ErrorIs(t, waitBriefly(t, c, "q", plain), ErrNotRetained)
	p := take(plain)
	assert.ErrorIs(t, waitBriefly(t, c, "q", plain), ErrNotRetained)
	require.NoError(t, p.DeadLetter(ctx, errors.New("broken")))
	assert.ErrorIs(t, waitBriefly(t, c, "q", plain), ErrNotRetained)
	finished := enqueue("finished")
	require.NoError(t, take(finished).Finish(ctx))
	assert.ErrorIs(t, waitBriefly(t, c, "q", finished), ErrNoTask, "ended without Retain: gone")

	// Unknown ids.
	for _, id := range []string{"1", "ffffffffffffff", "not an id", "*", finished + ",R9"} {
		assert.ErrorIs(t, waitBriefly(t, c, "q", id), ErrNoTask, id)
	}
	assert.ErrorIs(t, waitBriefly(t, c, "never-made", plain), ErrNoTask)

	// Retained, in flight, cancelled: while its process runs, then gone.
	cancelled := enqueue("cancelled", Retain(time.Hour))
	p = take(cancelled)
	_, err := c.CancelTask(ctx, "q", cancelled)
	require.NoError(t, err)
	assert.ErrorIs(t, waitBriefly(t, c, "q", cancelled), ErrTaskCancelled)
	require.NoError(t, p.Finish(ctx))
	assert.ErrorIs(t, waitBriefly(t, c, "q", cancelled), ErrNoTask)

	// Retained, cancelled while it waited: gone.
	gone := enqueue("gone", Retain(time.Hour))
	_, err = c.CancelTask(ctx, "q", gone)
	require.NoError(t, err)
	assert.ErrorIs(t, waitBriefly(t, c, "q", gone), ErrNoTask)

	// Retained, its outcome expired: finished, and dead (the dead letter
	// stays).
	short := enqueue("short", Retain(time.Millisecond))
	require.NoError(t, take(short).Finish(ctx))
	died := enqueue("died", Retain(time.Millisecond))
	require.NoError(t, take(died).DeadLetter(ctx, errors.New("broken")))
	for _, id := range []string{short, died} {
		eventually(t, 5*time.Second, "the outcome to expire", func() bool {
			_, err := c.TaskResult(ctx, "q", id)
			return errors.Is(err, ErrNoTask)
		})
		assert.ErrorIs(t, waitBriefly(t, c, "q", id), ErrNoTask)
	}

	// Retained, in flight in a queue deleted since.
	require.NoError(t, w.StartWork(ctx, "doomed", Events{}))
	doomed, err := c.Enqueue(ctx, "doomed", []byte("x"), Retain(time.Hour))
	require.NoError(t, err)
	_, err = w.Dequeue(ctx, "doomed")
	require.NoError(t, err)
	_, err = c.DeleteQueue(ctx, "doomed")
	require.NoError(t, err)
	assert.ErrorIs(t, waitBriefly(t, c, "doomed", doomed), ErrQueueDeleted)
}

// A Wait already waiting returns when its task is cancelled, waiting,
// delayed or in flight, by id or by payload, or when its queue is
// deleted: no outcome will come.
func TestWaitEndsWhenItsTaskIsCancelledOrItsQueueDeleted(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	retained := func(queue, payload string, opts ...EnqueueOption) string {
		t.Helper()
		id, err := c.Enqueue(ctx, queue, []byte(payload), append(opts, Retain(time.Hour))...)
		require.NoError(t, err)
		return id
	}
	held := retained("q", "held")
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, held, p.TaskID())
	heldByPayload := retained("q", "dup-held")
	p2, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, heldByPayload, p2.TaskID())
	waiting := retained("q", "waiting")
	delayed := retained("q", "delayed", In(time.Hour))
	byPayload := retained("q", "dup")
	doomedHeld := retained("doomed", "x")
	doomedWaiting := retained("doomed", "y")
	require.NoError(t, w.StartWork(ctx, "doomed", Events{}))
	p3, err := w.Dequeue(ctx, "doomed")
	require.NoError(t, err)
	require.Equal(t, doomedHeld, p3.TaskID())

	errs := map[string]chan error{}
	for _, id := range []string{held, waiting, delayed, byPayload, heldByPayload, doomedWaiting, doomedHeld} {
		errs[id] = make(chan error, 1)
	}
	wait := func(queue, id string) {
		go func() {
			_, err := c.Wait(ctx, queue, id)
			errs[id] <- err
		}()
	}
	for _, id := range []string{held, waiting, delayed, byPayload, heldByPayload} {
		wait("q", id)
	}
	eventually(t, 10*time.Second, "the waiters to wait", func() bool { return waitersAsleep(t, c, "q", 5) })

	for _, id := range []string{held, waiting, delayed} {
		_, err := c.CancelTask(ctx, "q", id)
		require.NoError(t, err)
		assert.ErrorIs(t, recv(t, errs[id], 10*time.Second, "the cancelled task's Wait"), ErrTaskCancelled, id)
	}
	_, err = c.Cancel(ctx, "q", []byte("dup"))
	require.NoError(t, err)
	_, err = c.Cancel(ctx, "q", []byte("dup-held"))
	require.NoError(t, err)
	for _, id := range []string{byPayload, heldByPayload} {
		assert.ErrorIs(t, recv(t, errs[id], 10*time.Second, "the cancelled task's Wait"), ErrTaskCancelled, id)
	}
	wait("doomed", doomedWaiting)
	wait("doomed", doomedHeld)
	eventually(t, 10*time.Second, "the waiters to wait", func() bool { return waitersAsleep(t, c, "doomed", 2) })
	_, err = c.DeleteQueue(ctx, "doomed")
	require.NoError(t, err)
	for _, id := range []string{doomedWaiting, doomedHeld} {
		assert.ErrorIs(t, recv(t, errs[id], 10*time.Second, "the deleted queue's Wait"), ErrQueueDeleted, id)
	}
}

// A task that ends while Wait starts is never missed, whatever the
// order: each Wait gets the outcome (a retained task), or says at once
// that none will come (one without Retain), and never blocks. The end
// comes at a different moment of Wait's start in each round (spread over
// its first half millisecond: before it subscribes, between that and its
// read, during the read, after it), and every round subscribes afresh:
// the last waiter of a queue ends its subscription.
func TestWaitNeverMissesATaskEndingAsItStarts(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	for i := range rounds {
		retain := i%3 != 2
		var opts []EnqueueOption
		if retain {
			opts = append(opts, Retain(time.Minute))
		}
		id, err := c.Enqueue(ctx, "q", []byte(strconv.Itoa(i)), opts...)
		require.NoError(t, err)
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			for at := time.Now(); time.Since(at) < time.Duration(i*37%500)*time.Microsecond; {
				runtime.Gosched()
			}
			if i%2 == 0 {
				assert.NoError(t, p.Finish(ctx))
			} else {
				assert.NoError(t, p.DeadLetter(ctx, errors.New("broken")))
			}
		})
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		close(start)
		o, err := c.Wait(wctx, "q", id)
		cancel()
		wg.Wait()
		require.NotErrorIs(t, err, context.DeadlineExceeded, "round %d: Wait missed the end of its task", i)
		switch {
		case retain && i%2 == 0:
			require.NoError(t, err, "round %d", i)
			require.Equal(t, OutcomeSucceeded, o.Status, "round %d", i)
		case retain:
			require.NoError(t, err, "round %d", i)
			require.Equal(t, OutcomeDead, o.Status, "round %d", i)
		case i%2 == 0: // finished and gone, or seen in flight
			require.True(t, errors.Is(err, ErrNoTask) || errors.Is(err, ErrNotRetained), "round %d: %v", i, err)
		default: // dead: still there
			require.ErrorIs(t, err, ErrNotRetained, "round %d", i)
		}
	}
}

// A retained task that is not listed as pending (one enqueued by a worqr
// before the list) is found where it is, at any place in a long queue,
// waiting at any level, delayed or in flight, and waited for; a task
// without Retain is found too, and told apart.
func TestWaitFindsRetainedTasksNotListed(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	k := c.core.Store.Keys().Queue("q")
	unlist := func(ids ...string) {
		t.Helper()
		require.NoError(t, c.core.Redis.Do(ctx, c.core.Redis.B().Zrem().Key(k.Retained).Member(ids...).Build()).Error())
	}
	look := func(id string) store.OutcomeState {
		t.Helper()
		_, state, err := c.core.Store.TaskOutcome(ctx, "q", id, true)
		require.NoError(t, err)
		return state
	}
	tasks := make([][]byte, 2500)
	for i := range tasks {
		tasks[i] = []byte(strconv.Itoa(i))
	}
	kept, err := c.EnqueueBatch(ctx, "q", tasks, Retain(time.Hour))
	require.NoError(t, err)
	plain, err := c.EnqueueBatch(ctx, "q", tasks)
	require.NoError(t, err)
	high, err := c.Enqueue(ctx, "q", []byte("high"), Retain(time.Hour), HighPriority())
	require.NoError(t, err)
	low, err := c.Enqueue(ctx, "q", []byte("low"), Retain(time.Hour), LowPriority())
	require.NoError(t, err)
	later, err := c.Enqueue(ctx, "q", []byte("later"), Retain(time.Hour), In(time.Hour))
	require.NoError(t, err)
	picked := []string{kept[0], kept[999], kept[1000], kept[1250], kept[2499], high, low, later}
	for _, id := range picked {
		assert.Equal(t, store.OutcomeComing, look(id), "listed: %s", id)
	}
	unlist(picked...)
	for _, id := range picked {
		assert.Equal(t, store.OutcomeComing, look(id), "found: %s", id)
	}
	for _, id := range []string{plain[0], plain[1249], plain[2499]} {
		assert.Equal(t, store.OutcomeUnkept, look(id), id)
	}
	assert.Equal(t, store.OutcomeNone, look("1"))

	// In flight, unlisted: waited for until it finishes.
	w := newWorker(t, b.client(), WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, high, p.TaskID())
	outcomes := make(chan TaskOutcome, 1)
	go func() {
		o, err := c.Wait(ctx, "q", high)
		assert.NoError(t, err)
		outcomes <- o
	}()
	eventually(t, 10*time.Second, "the waiter to wait", func() bool {
		return len(outcomes) > 0 || waitersAsleep(t, c, "q", 1)
	})
	require.Empty(t, outcomes)
	require.NoError(t, p.Finish(ctx))
	assert.Equal(t, OutcomeSucceeded, recv(t, outcomes, 10*time.Second, "the outcome").Status)
}

// The look that tells why no outcome will come reads a queue's waiting
// tasks a megabyte or so at a time, as FindTask does, so that the script
// never holds more than about that of their payloads: a queue of large
// tasks costs the look about one read per megabyte, not one read of
// everything. Only a private miniredis counts a script's reads.
func TestWaitLooksAtAQueueAMegabyteAtATime(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	big := bytes.Repeat([]byte("p"), 1000<<10)
	for range 2 {
		require.NoError(t, second(c.Enqueue(ctx, "small", big)))
	}
	for range 12 {
		require.NoError(t, second(c.Enqueue(ctx, "large", big)))
	}
	// The count covers every command the server ran meanwhile, and the
	// client's own loops only ever add to it: the fewest of a few looks is
	// the look's own.
	look := func(queue string) (fewest int, ok bool) {
		t.Helper()
		for i := range 5 {
			n, counted := b.commandsOf(func() {
				_, state, err := c.core.Store.TaskOutcome(ctx, queue, "1", true)
				require.NoError(t, err)
				assert.Equal(t, store.OutcomeNone, state)
			})
			if i == 0 || n < fewest {
				fewest, ok = n, counted
			}
		}
		return fewest, ok
	}
	small, ok := look("small")
	large, _ := look("large")
	if ok {
		assert.GreaterOrEqual(t, large-small, 8, "12 MB of tasks read in %d calls, 2 MB in %d", large, small)
	}
}

// Every way a retained task ends leaves it unlisted as pending: finished,
// dead, cancelled (waiting, delayed, in flight), requeued from the dead
// letters and finished, its queue deleted. Only outcomes' expiries stay.
func TestRetainedTasksAreUnlistedWhenTheyEnd(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, b.client(), WorkerOptions{})
	for _, q := range []string{"q", "doomed"} {
		require.NoError(t, w.StartWork(ctx, q, Events{}))
	}
	pending := func(queue string) int {
		t.Helper()
		k := c.core.Store.Keys().Queue(queue)
		ids, err := c.core.Redis.Do(ctx, c.core.Redis.B().Zrangebyscore().Key(k.Retained).Min("+inf").Max("+inf").Build()).AsStrSlice()
		require.NoError(t, err)
		return len(ids)
	}
	enqueue := func(queue, payload string, opts ...EnqueueOption) string {
		t.Helper()
		id, err := c.Enqueue(ctx, queue, []byte(payload), append(opts, Retain(time.Hour))...)
		require.NoError(t, err)
		return id
	}
	take := func(queue string) *Process {
		t.Helper()
		p, err := w.Dequeue(ctx, queue)
		require.NoError(t, err)
		return p
	}
	enqueue("q", "finished")
	require.NoError(t, take("q").Finish(ctx))
	dead := enqueue("q", "dead")
	require.NoError(t, take("q").DeadLetter(ctx, errors.New("broken")))
	_, err := c.RequeueDeadLetter(ctx, "q", dead)
	require.NoError(t, err)
	assert.Equal(t, 1, pending("q"), "requeued: pending again")
	require.NoError(t, take("q").Finish(ctx))
	enqueue("q", "held")
	held := take("q")
	for _, id := range []string{enqueue("q", "waiting"), enqueue("q", "later", In(time.Hour)), held.TaskID()} {
		_, err := c.CancelTask(ctx, "q", id)
		require.NoError(t, err)
	}
	enqueue("q", "dup")
	enqueue("q", "dup", In(time.Hour))
	_, err = c.Cancel(ctx, "q", []byte("dup"))
	require.NoError(t, err)
	require.NoError(t, held.Finish(ctx))
	assert.Zero(t, pending("q"))

	enqueue("doomed", "a")
	enqueue("doomed", "b")
	_, err = c.DeleteQueue(ctx, "doomed")
	require.NoError(t, err)
	assert.Zero(t, pending("doomed"))
	n, err := c.core.Redis.Do(ctx, c.core.Redis.B().Exists().Key(c.core.Store.Keys().Queue("doomed").Retained).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n)
}

// Every way a retained task enters a queue lists it as pending: an
// enqueue (waiting, delayed, at each level, a batch) and a periodic
// schedule's tick.
func TestRetainedTasksAreListedWhenEnqueued(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	k := c.core.Store.Keys().Queue("q")
	listed := func(id string) bool {
		t.Helper()
		score, err := c.core.Redis.Do(ctx, c.core.Redis.B().Zscore().Key(k.Retained).Member(id).Build()).AsFloat64()
		if rueidis.IsRedisNil(err) {
			return false
		}
		require.NoError(t, err)
		return math.IsInf(score, 1)
	}
	var ids []string
	for _, opts := range [][]EnqueueOption{{}, {In(time.Hour)}, {HighPriority()}, {AtFront()}} {
		id, err := c.Enqueue(ctx, "q", []byte("x"), append(opts, Retain(time.Hour))...)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	batch, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")}, Retain(time.Hour))
	require.NoError(t, err)
	ids = append(ids, batch...)
	last, err := c.core.Store.Tick(ctx, "q", "every", 0, 0, []byte("tick"), store.EnqueueArgs{Retain: time.Hour})
	require.NoError(t, err)
	var ticked store.Ticked
	eventually(t, 5*time.Second, "a tick enqueued", func() bool {
		ticked, err = c.core.Store.Tick(ctx, "q", "every", last.Last+1, 0, []byte("tick"), store.EnqueueArgs{Retain: time.Hour})
		require.NoError(t, err)
		return ticked.Status == store.TickEnqueued
	})
	ids = append(ids, ticked.ID)
	for _, id := range ids {
		assert.True(t, listed(id), id)
	}
	plain, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	assert.False(t, listed(plain))
}
