package worqr

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// run is one start of a task under the dying handler.
type run struct {
	payload   string
	attempt   int
	lastError string
}

// dying serves a queue with a handler under which a task dies as its
// payload says: "perm..." with a Permanent error, "reason..." with a
// Permanent error with reason bad-input, "flaky..." by failing every attempt
// (retried at once) until its budget is spent. Any other task succeeds.
// Every start is reported on the channel.
func dying(t *testing.T, c *Client, queue string) (*Worker, <-chan run) {
	t.Helper()
	runs := make(chan run, 100)
	w := newWorker(t, c, WorkerOptions{})
	now := RetryPolicy{Backoff: func(int, error) time.Duration { return 0 }}
	require.NoError(t, w.Handle(ctxT(t), queue, func(_ context.Context, p *Process) error {
		task := string(p.Task())
		runs <- run{payload: task, attempt: p.Attempt(), lastError: p.LastError()}
		switch {
		case strings.HasPrefix(task, "perm"):
			return Permanent(errors.New("broken: " + task))
		case strings.HasPrefix(task, "reason"):
			return WithReason("bad-input", Permanent(errors.New("bad input: "+task)))
		case strings.HasPrefix(task, "flaky"):
			return errors.New("flaky: " + task)
		}
		return nil
	}, HandleOptions{Retry: now}))
	return w, runs
}

// die enqueues a task that dies and waits until it is the newest dead
// letter. Deaths a few milliseconds apart keep their order in the listing
// (dead letters are scored in milliseconds).
func die(t *testing.T, c *Client, queue, task string, opts ...EnqueueOption) string {
	t.Helper()
	ctx := ctxT(t)
	id, err := c.Enqueue(ctx, queue, []byte(task), opts...)
	require.NoError(t, err)
	awaitNewestDead(t, c, queue, id)
	time.Sleep(2 * time.Millisecond)
	return id
}

// awaitNewestDead waits until task id is a queue's newest dead letter.
func awaitNewestDead(t *testing.T, c *Client, queue, id string) {
	t.Helper()
	eventually(t, 10*time.Second, "task "+id+" dead", func() bool {
		ds, err := c.DeadLetters(context.Background(), queue, 0, 1)
		require.NoError(t, err)
		return len(ds) == 1 && ds[0].ID == id
	})
}

func deadIDs(t *testing.T, c *Client, queue string, offset, limit int) []string {
	t.Helper()
	ds, err := c.DeadLetters(context.Background(), queue, offset, limit)
	require.NoError(t, err)
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}

func deadCount(t *testing.T, c *Client, queue string) int64 {
	t.Helper()
	n, err := c.DeadLetterCount(context.Background(), queue)
	require.NoError(t, err)
	return n
}

// hasError reports whether the queue's errors hash has an entry for id.
func hasError(t *testing.T, c *Client, queue, id string) bool {
	t.Helper()
	k := c.core.Store.Keys().Queue(queue)
	ok, err := c.core.Redis.Do(context.Background(), c.core.Redis.B().Hexists().Key(k.Errors).Field(id).Build()).AsBool()
	require.NoError(t, err)
	return ok
}

// expectPrefix waits for a message that starts with prefix, skipping others.
func expectPrefix(t *testing.T, msgs <-chan string, prefix string) string {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-msgs:
			if strings.HasPrefix(m, prefix) {
				return m
			}
		case <-deadline:
			t.Fatalf("no message starting %q", prefix)
			return ""
		}
	}
}

func TestDeadLettersAreListedNewestFirst(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w, runs := dying(t, c, "q")
	before := time.Now()
	perm := die(t, c, "q", "perm")
	reason := die(t, c, "q", "reason")
	flaky := die(t, c, "q", "flaky", MaxAttempts(2))
	after := time.Now()

	assert.Equal(t, run{"perm", 1, ""}, recv(t, runs, time.Second, "perm ran"))
	assert.Equal(t, run{"reason", 1, ""}, recv(t, runs, time.Second, "reason ran"))
	assert.Equal(t, run{"flaky", 1, ""}, recv(t, runs, time.Second, "flaky ran"))
	assert.Equal(t, run{"flaky", 2, "flaky: flaky"}, recv(t, runs, time.Second, "flaky ran again"))

	assert.EqualValues(t, 3, deadCount(t, c, "q"))
	ds, err := c.DeadLetters(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.Len(t, ds, 3)
	want := []struct {
		id, payload, reason, err string
		attempts                 int
	}{
		{flaky, "flaky", ReasonExhausted, "flaky: flaky", 2},
		{reason, "reason", "bad-input", "bad input: reason", 1},
		{perm, "perm", ReasonPermanent, "broken: perm", 1},
	}
	for i, d := range ds {
		assert.Equal(t, want[i].id, d.ID)
		assert.Equal(t, "q", d.Queue)
		assert.Equal(t, want[i].payload, string(d.Payload))
		assert.Equal(t, want[i].reason, d.Reason)
		assert.Equal(t, want[i].err, d.Error)
		assert.Equal(t, want[i].attempts, d.Attempts, "starts, the last included")
		assert.Equal(t, w.ID(), d.Worker)
		// Redis and the test share a clock; DiedAt is in milliseconds.
		assert.WithinRange(t, d.DiedAt, before.Truncate(time.Millisecond), after, "%s died", d.ID)
		assert.WithinRange(t, d.EnqueuedAt, before.Add(-time.Millisecond), d.DiedAt.Add(time.Millisecond))
		if i > 0 {
			assert.True(t, d.DiedAt.Before(ds[i-1].DiedAt), "newest first")
		}
	}

	// Pages count from the newest.
	assert.Equal(t, []string{flaky}, deadIDs(t, c, "q", 0, 1))
	assert.Equal(t, []string{reason}, deadIDs(t, c, "q", 1, 1))
	assert.Equal(t, []string{reason, perm}, deadIDs(t, c, "q", 1, 5))
	assert.Equal(t, []string{perm}, deadIDs(t, c, "q", 2, 100))
	assert.Empty(t, deadIDs(t, c, "q", 3, 1))
	assert.Empty(t, deadIDs(t, c, "q", math.MaxInt, 1))
	assert.Equal(t, []string{flaky, reason, perm}, deadIDs(t, c, "q", 0, math.MaxInt))
	assert.Empty(t, deadIDs(t, c, "none", 0, 10), "a queue with no dead letters")
	assert.Zero(t, deadCount(t, c, "none"))

	for _, bad := range [][2]int{{0, 0}, {0, -1}, {-1, 1}} {
		_, err := c.DeadLetters(ctx, "q", bad[0], bad[1])
		assert.ErrorIs(t, err, ErrInvalidOptions, "offset %d, limit %d", bad[0], bad[1])
	}
}

// A requeued dead letter runs again as a task never started, keeps its
// own budget, and can die again.
func TestRequeueDeadLetter(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	_, runs := dying(t, c, "q")
	perm := die(t, c, "q", "perm")
	flaky := die(t, c, "q", "flaky", MaxAttempts(2))
	for range 3 {
		recv(t, runs, time.Second, "the first deaths")
	}
	require.True(t, hasError(t, c, "q", perm))
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)

	ok, err := c.RequeueDeadLetter(ctx, "q", perm)
	require.NoError(t, err)
	assert.True(t, ok)
	expectPrefix(t, events, "w1") // wakes the parked runtime
	assert.Equal(t, run{"perm", 1, ""}, recv(t, runs, 5*time.Second, "perm runs again"))
	awaitNewestDead(t, c, "q", perm)
	assert.EqualValues(t, 2, deadCount(t, c, "q"))
	ds, err := c.DeadLetters(ctx, "q", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, ds[0].Attempts, "the count started again")
	assert.Equal(t, "broken: perm", ds[0].Error)
	time.Sleep(2 * time.Millisecond)

	// The task's own budget of 2 holds (the queue's is 10).
	ok, err = c.RequeueDeadLetter(ctx, "q", flaky)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, run{"flaky", 1, ""}, recv(t, runs, 5*time.Second, "flaky runs again"))
	assert.Equal(t, run{"flaky", 2, "flaky: flaky"}, recv(t, runs, 5*time.Second, "and once more"))
	awaitNewestDead(t, c, "q", flaky)
	ds, err = c.DeadLetters(ctx, "q", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, 2, ds[0].Attempts)
	assert.Equal(t, ReasonExhausted, ds[0].Reason)
	settledQueue(t, c, "q")
	select {
	case r := <-runs:
		t.Fatalf("ran once more: %+v", r)
	default:
	}

	// Ids that are not a dead letter's: unknown, a prefix of one, a glob.
	for _, id := range []string{"ffff", perm[:len(perm)-1], "*", perm + "0"} {
		ok, err := c.RequeueDeadLetter(ctx, "q", id)
		require.NoError(t, err)
		assert.False(t, ok, id)
	}
	ok, err = c.RequeueDeadLetter(ctx, "other", perm)
	require.NoError(t, err)
	assert.False(t, ok, "another queue's")
	_, err = c.RequeueDeadLetter(ctx, "q", "")
	assert.ErrorIs(t, err, ErrInvalidOptions)
	assert.EqualValues(t, 2, deadCount(t, c, "q"))
}

// Requeuing every dead letter puts them at the back in the order they
// died, as tasks never started, without their errors.
func TestRequeueAllDeadLetters(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w, _ := dying(t, c, "q")
	ids := []string{die(t, c, "q", "perm-1"), die(t, c, "q", "perm-2"), die(t, c, "q", "reason-1")}
	require.NoError(t, w.Close(ctx)) // nothing runs them again yet
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("plain"))))
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)

	n, err := c.RequeueDeadLetters(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	expectPrefix(t, events, "w3")
	assert.Zero(t, deadCount(t, c, "q"))
	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 4)
	assert.Equal(t, "plain", string(tasks[0].Payload), "the waiting task stays in front")
	for i, task := range tasks[1:] {
		assert.Equal(t, ids[i], task.ID, "in the order they died")
		assert.Zero(t, task.Attempts)
		assert.False(t, hasError(t, c, "q", task.ID), "its error is gone")
	}

	// They run again from their first attempt, and die again.
	_, runs := dying(t, c, "q")
	got := map[string]run{}
	for range 4 {
		r := recv(t, runs, 5*time.Second, "the tasks run again")
		got[r.payload] = r
	}
	for _, task := range []string{"plain", "perm-1", "perm-2", "reason-1"} {
		assert.Equal(t, run{task, 1, ""}, got[task])
	}
	eventually(t, 5*time.Second, "dead again", func() bool { return deadCount(t, c, "q") == 3 })

	n, err = c.RequeueDeadLetters(ctx, "none")
	require.NoError(t, err)
	assert.Zero(t, n)
}

// A requeue makes a queue that lost its name exist again and registers it.
func TestRequeueDeadLetterRestoresTheQueue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w, _ := dying(t, c, "q")
	id := die(t, c, "q", "perm")
	require.NoError(t, w.Close(ctx))
	k := c.core.Store.Keys().Queue("q")
	do(t, c, c.core.Redis.B().Hdel().Key(k.Meta).Field("name", "registered").Build())
	do(t, c, c.core.Redis.B().Srem().Key(c.core.Store.Keys().Queues()).Member("q").Build())
	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	require.NotContains(t, qs, "q")

	ok, err := c.RequeueDeadLetter(ctx, "q", id)
	require.NoError(t, err)
	require.True(t, ok)
	qs, err = c.Queues(ctx)
	require.NoError(t, err)
	assert.Contains(t, qs, "q")
	registered, err := c.core.Redis.Do(ctx, c.core.Redis.B().Hexists().Key(k.Meta).Field("registered").Build()).AsBool()
	require.NoError(t, err)
	assert.True(t, registered, "confirmed in the registry")
	assert.Equal(t, []string{"perm"}, waiting(t, c, "q"))
}

func TestDeleteAndPurgeDeadLetters(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	dying(t, c, "q")
	ids := []string{die(t, c, "q", "perm-1"), die(t, c, "q", "perm-2"), die(t, c, "q", "perm-3")}
	// An error kept for a task that waits for a retry is no dead letter's.
	k := c.core.Store.Keys().Queue("q")
	do(t, c, c.core.Redis.B().Hset().Key(k.Errors).FieldValue().FieldValue("1234", "retrying").Build())

	ok, err := c.DeleteDeadLetter(ctx, "q", ids[1])
	require.NoError(t, err)
	assert.True(t, ok)
	assert.False(t, hasError(t, c, "q", ids[1]))
	assert.Equal(t, []string{ids[2], ids[0]}, deadIDs(t, c, "q", 0, 10))
	ok, err = c.DeleteDeadLetter(ctx, "q", ids[1])
	require.NoError(t, err)
	assert.False(t, ok, "deleted already")
	// A dead letter with no error recorded (DeadLetter(ctx, nil)) lists "".
	do(t, c, c.core.Redis.B().Hdel().Key(k.Errors).Field(ids[2]).Build())
	ds, err := c.DeadLetters(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	assert.Equal(t, []string{"", "broken: perm-1"}, []string{ds[0].Error, ds[1].Error})
	ok, err = c.DeleteDeadLetter(ctx, "q", "ffff")
	require.NoError(t, err)
	assert.False(t, ok, "unknown")
	_, err = c.DeleteDeadLetter(ctx, "q", "")
	assert.ErrorIs(t, err, ErrInvalidOptions)

	n, err := c.PurgeDeadLetters(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	assert.Zero(t, deadCount(t, c, "q"))
	assert.Empty(t, deadIDs(t, c, "q", 0, 10))
	for _, id := range ids {
		assert.False(t, hasError(t, c, "q", id), id)
	}
	assert.True(t, hasError(t, c, "q", "1234"), "other errors stay")
	n, err = c.PurgeDeadLetters(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n)
}

// Dead letters beyond MaxCount are trimmed, oldest first, with their errors
// and attempt histories.
func TestDeadLettersAreTrimmedToMaxCount(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, err := New(Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), DeadLetters: DeadLetterOptions{MaxCount: 3}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	dying(t, c, "q")
	var ids []string
	for _, task := range []string{"perm-1", "perm-2", "perm-3", "perm-4", "perm-5"} {
		ids = append(ids, die(t, c, "q", task))
	}
	assert.EqualValues(t, 3, deadCount(t, c, "q"))
	assert.Equal(t, []string{ids[4], ids[3], ids[2]}, deadIDs(t, c, "q", 0, 10))
	for i, id := range ids {
		assert.Equal(t, i >= 2, hasError(t, c, "q", id), "error of task %d", i)
	}
	n, err := c.core.Redis.Do(ctxT(t), c.core.Redis.B().Hlen().Key(c.core.Store.Keys().Queue("q").Errors).Build()).AsInt64()
	require.NoError(t, err)
	assert.EqualValues(t, 6, n, "the three left's errors and attempt histories")
}

// Dead letters older than MaxAge are trimmed, with their errors, when the
// next task dies.
func TestDeadLettersAreTrimmedToMaxAge(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, err := New(Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), DeadLetters: DeadLetterOptions{MaxAge: 200 * time.Millisecond}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	dying(t, c, "q")
	old := die(t, c, "q", "perm-old")
	ds, err := c.DeadLetters(ctxT(t), "q", 0, 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	// Wait until the first dead letter is past MaxAge, with 100 ms to
	// spare for the Redis clock (the same machine's).
	eventually(t, 5*time.Second, "the first dead letter past MaxAge", func() bool {
		return time.Since(ds[0].DiedAt) > 300*time.Millisecond
	})
	young := die(t, c, "q", "perm-young")
	assert.Equal(t, []string{young}, deadIDs(t, c, "q", 0, 10), "the old one is trimmed")
	assert.False(t, hasError(t, c, "q", old), "with its error")
	assert.True(t, hasError(t, c, "q", young))
}

// The options' zero values mean the documented defaults.
func TestDeadLetterAndPoisonDefaults(t *testing.T) {
	t.Parallel()
	assert.Equal(t, store.DeadBounds{MaxCount: 10_000, MaxAge: 30 * 24 * time.Hour}, DeadLetterOptions{}.bounds())
	assert.Equal(t, store.DeadBounds{MaxCount: 5, MaxAge: time.Hour}, DeadLetterOptions{MaxCount: 5, MaxAge: time.Hour}.bounds())
	assert.Equal(t, 3, poisonLimit(0))
	assert.Equal(t, 0, poisonLimit(-1), "negative turns the guard off")
	assert.Equal(t, 7, poisonLimit(7))
}

// The dead-letter calls check their arguments and the client, and wrap
// what Redis answers.
func TestDeadLetterCallsFailCleanly(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	calls := map[string]func(context.Context, *Client, string) error{
		"list":        func(ctx context.Context, c *Client, q string) error { return second(c.DeadLetters(ctx, q, 0, 10)) },
		"count":       func(ctx context.Context, c *Client, q string) error { return second(c.DeadLetterCount(ctx, q)) },
		"requeue":     func(ctx context.Context, c *Client, q string) error { return second(c.RequeueDeadLetter(ctx, q, "1")) },
		"requeue all": func(ctx context.Context, c *Client, q string) error { return second(c.RequeueDeadLetters(ctx, q)) },
		"delete":      func(ctx context.Context, c *Client, q string) error { return second(c.DeleteDeadLetter(ctx, q, "1")) },
		"purge":       func(ctx context.Context, c *Client, q string) error { return second(c.PurgeDeadLetters(ctx, q)) },
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	c.core.Store.SetFault(func(_ context.Context, _ store.Op, queue string) error {
		if queue == "broken" {
			return errInjected
		}
		return nil
	})
	for name, call := range calls {
		assert.NoError(t, call(ctx, c, "q"), name)
		assert.ErrorIs(t, call(cancelled, c, "q"), context.Canceled, name)
		assert.ErrorIs(t, call(ctx, c, ""), ErrInvalidQueueName, name)
		err := call(ctx, c, "broken")
		assert.ErrorIs(t, err, ErrUnavailable, name)
		assert.ErrorIs(t, err, errInjected, name)
	}
	require.NoError(t, c.Close(ctx))
	for name, call := range calls {
		assert.ErrorIs(t, call(ctx, c, "q"), ErrClientClosed, name)
	}
}

// exerciseDeadLetters runs every dead-letter call once on queue, for
// TestCoreFlowsAsARestrictedACLUser: Redis must allow each its commands.
func exerciseDeadLetters(t *testing.T, c *Client, queue string) {
	t.Helper()
	ctx := ctxT(t)
	dying(t, c, queue)
	ids := []string{die(t, c, queue, "perm-1"), die(t, c, queue, "perm-2")}
	assert.Equal(t, []string{ids[1], ids[0]}, deadIDs(t, c, queue, 0, 10))
	assert.EqualValues(t, 2, deadCount(t, c, queue))
	ok, err := c.RequeueDeadLetter(ctx, queue, ids[0])
	require.NoError(t, err)
	assert.True(t, ok)
	awaitNewestDead(t, c, queue, ids[0])
	n, err := c.RequeueDeadLetters(ctx, queue)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	eventually(t, 5*time.Second, "dead again", func() bool { return deadCount(t, c, queue) == 2 })
	ok, err = c.DeleteDeadLetter(ctx, queue, ids[1])
	require.NoError(t, err)
	assert.True(t, ok)
	n, err = c.PurgeDeadLetters(ctx, queue)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
}
