package worqr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnqueueDequeueFinishInOrder(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "jobs", Events{}))

	require.NoError(t, second(c.Enqueue(ctx, "jobs", []byte("a"))))
	require.NoError(t, second(c.EnqueueBatch(ctx, "jobs", [][]byte{[]byte("b"), []byte("c")})))
	n, err := c.QueueLen(ctx, "jobs")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)

	var got []string
	for {
		p, err := w.Dequeue(ctx, "jobs")
		if errors.Is(err, ErrNoTask) {
			break
		}
		require.NoError(t, err)
		assert.Equal(t, "jobs", p.Queue())
		assert.Equal(t, w.ID(), p.Owner())
		got = append(got, string(p.Task()))
		require.NoError(t, p.Finish(ctx))
	}
	assert.Equal(t, []string{"a", "b", "c"}, got)
	procs, err := c.Processes(ctx, "jobs")
	require.NoError(t, err)
	assert.Empty(t, procs)
}

func TestBatchLargerThanOneScriptCall(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	tasks := make([][]byte, 2500)
	for i := range tasks {
		tasks[i] = []byte(fmt.Sprint(i))
	}
	require.NoError(t, second(c.EnqueueBatch(ctx, "big", tasks)))
	all, err := c.Range(ctx, "big", 0, -1)
	require.NoError(t, err)
	require.Len(t, all, len(tasks))
	for i := range tasks {
		require.Equal(t, tasks[i], all[i], "position %d", i)
	}
}

func TestInspection(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	ids, err := c.EnqueueBatch(ctx, "q1", [][]byte{[]byte("x"), []byte("y"), []byte("z")})
	require.NoError(t, err)
	require.Len(t, ids, 3)
	require.NoError(t, second(c.Enqueue(ctx, "q2", []byte("only"))))

	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"q1", "q2"}, qs)

	head, err := c.Peek(ctx, "q1")
	require.NoError(t, err)
	assert.Equal(t, "x", string(head))
	mid, err := c.Range(ctx, "q1", 1, 2)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("y"), []byte("z")}, mid)
	_, err = c.Peek(ctx, "empty")
	assert.ErrorIs(t, err, ErrNoTask)
	tasks, err := c.Tasks(ctx, "q1", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 3)
	for i, task := range tasks {
		assert.Equal(t, ids[i], task.ID)
		assert.Equal(t, "q1", task.Queue)
		assert.Zero(t, task.Attempts)
		assert.WithinDuration(t, time.Now(), task.EnqueuedAt, time.Minute, "read from the id, by the Redis clock")
	}

	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q1", Events{}))
	p, err := w.Dequeue(ctx, "q1")
	require.NoError(t, err)
	procs, err := c.Processes(ctx, "q1")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, ProcessInfo{ID: p.ID(), Queue: "q1", Owner: w.ID(), State: StateActive, TaskID: ids[0], Attempt: 1, Task: []byte("x"), TaskSize: 1, Weight: 1}, procs[0])

	ws, err := c.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	assert.Equal(t, w.ID(), ws[0].ID)
	assert.Positive(t, ws[0].LeaseLeftMillis)
	wq, err := c.WorkerQueues(ctx, w.ID())
	require.NoError(t, err)
	assert.Equal(t, []string{"q1"}, wq)
	assert.Equal(t, []string{"q1"}, w.Queues())
}

func TestQueueNamesOfAnyBytes(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	names := []string{
		"a_b", "a:b", "{tag}", "}{", "{", "}", "*", "?", "with space", "ünïcödé 任务",
		"%7B", "q:{x}:waiting", "\x00\xff bytes", "r", "{r}", strings.Repeat("n", MaxQueueNameLen),
	}
	w := newWorker(t, c, WorkerOptions{})
	for _, name := range names {
		task := []byte("task for " + name)
		require.NoError(t, second(c.Enqueue(ctx, name, task)), "%q", name)
		require.NoError(t, w.StartWork(ctx, name, Events{}), "%q", name)
	}
	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, names, qs)
	for _, name := range names {
		n, err := c.QueueLen(ctx, name)
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "%q shares keys with another queue", name)
		p, err := w.Dequeue(ctx, name)
		require.NoError(t, err, "%q", name)
		assert.Equal(t, "task for "+name, string(p.Task()))
		require.NoError(t, p.Finish(ctx))
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	rdb := b.redis()
	c, err := New(Options{Redis: rdb, Prefix: b.prefix, MaxTaskSize: 16})
	require.NoError(t, err)
	ctx := ctxT(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tooLong := strings.Repeat("n", MaxQueueNameLen+1)

	// Each bad call is refused with its sentinel and changes nothing.
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"Enqueue empty name", func() error { return second(c.Enqueue(ctx, "", []byte("x"))) }, ErrInvalidQueueName},
		{"Enqueue long name", func() error { return second(c.Enqueue(ctx, tooLong, []byte("x"))) }, ErrInvalidQueueName},
		{"Enqueue large task", func() error { return second(c.Enqueue(ctx, "q", make([]byte, 17))) }, ErrTaskTooLarge},
		{"EnqueueBatch one large task", func() error {
			return second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("ok"), make([]byte, 17)}))
		}, ErrTaskTooLarge},
		{"Enqueue cancelled ctx", func() error { return second(c.Enqueue(cancelled, "q", []byte("x"))) }, context.Canceled},
		{"Cancel large task", func() error { return second(c.Cancel(ctx, "q", make([]byte, 17))) }, ErrTaskTooLarge},
		{"CancelTask empty id", func() error { return second(c.CancelTask(ctx, "q", "")) }, ErrInvalidOptions},
		{"CancelTask empty name", func() error { return second(c.CancelTask(ctx, "", "1")) }, ErrInvalidQueueName},
		{"Tasks long name", func() error { return second(c.Tasks(ctx, tooLong, 0, -1)) }, ErrInvalidQueueName},
		{"Dequeue not served", func() error { return second(w.Dequeue(ctx, "not-served")) }, ErrNotServing},
		{"Dequeue cancelled ctx", func() error { return second(w.Dequeue(cancelled, "q")) }, context.Canceled},
		{"DequeueN zero", func() error { return second(w.DequeueN(ctx, "q", 0)) }, ErrInvalidOptions},
		{"StartWork again", func() error { return w.StartWork(ctx, "q", Events{}) }, ErrAlreadyServing},
		{"New prefix with brace", func() error { return second(New(Options{Redis: rdb, Prefix: "a{b"})) }, ErrInvalidOptions},
		{"New negative MaxTaskSize", func() error { return second(New(Options{Redis: rdb, MaxTaskSize: -1})) }, ErrInvalidOptions},
		{"New neither Addr nor Redis", func() error { return second(New(Options{})) }, ErrInvalidOptions},
		{"NewWorker short TTL", func() error { return second(c.NewWorker(ctx, WorkerOptions{TTL: 500 * time.Millisecond})) }, ErrInvalidOptions},
		{"NewWorker slow renewal", func() error {
			return second(c.NewWorker(ctx, WorkerOptions{TTL: 2 * time.Second, RenewInterval: 1500 * time.Millisecond}))
		}, ErrInvalidOptions},
		{"Handle nil handler", func() error { return w.Handle(ctx, "h", nil, HandleOptions{}) }, ErrInvalidOptions},
		{"Handle negative concurrency", func() error {
			return w.Handle(ctx, "h", func(context.Context, *Process) error { return nil }, HandleOptions{Concurrency: -1})
		}, ErrInvalidOptions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			assert.ErrorIs(t, err, tc.want)
			saysWorqrOnce(t, err, tc.name)
		})
	}
	n, err := c.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, n, "nothing refused was queued")

	t.Run("empty task", func(t *testing.T) {
		// Empty tasks are allowed, and are not confused with an empty queue.
		require.NoError(t, second(c.Enqueue(ctx, "q", nil)))
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		assert.Empty(t, p.Task())
		require.NoError(t, p.Finish(ctx))
		_, err = w.Dequeue(ctx, "q")
		assert.ErrorIs(t, err, ErrNoTask)
	})

	t.Run("closed worker", func(t *testing.T) {
		require.NoError(t, w.Close(ctx))
		require.NoError(t, w.Close(ctx), "second Close")
		for name, err := range map[string]error{
			"Dequeue":   second(w.Dequeue(ctx, "q")),
			"StartWork": w.StartWork(ctx, "other", Events{}),
		} {
			assert.ErrorIs(t, err, ErrWorkerClosed, name)
			saysWorqrOnce(t, err, name)
		}
	})

	t.Run("closed client", func(t *testing.T) {
		require.NoError(t, c.Close(ctx))
		for name, err := range map[string]error{
			"Enqueue":    second(c.Enqueue(ctx, "q", []byte("x"))),
			"CancelTask": second(c.CancelTask(ctx, "q", "1")),
			"NewWorker":  second(c.NewWorker(ctx, WorkerOptions{})),
		} {
			assert.ErrorIs(t, err, ErrClientClosed, name)
			saysWorqrOnce(t, err, name)
		}
	})
}

func TestRedisDownIsUnavailable(t *testing.T) {
	t.Parallel()
	px, c, direct, ctx := setupBehindProxy(t)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("kept"))))

	px.cut()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.Enqueue(short, "q", []byte("x"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded), "got %v", err)
	_, err = c.NewWorker(short, WorkerOptions{})
	require.Error(t, err)

	n, err := direct.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "nothing queued is lost")
	px.restore()
	eventually(t, 10*time.Second, "client recovers", func() bool { return second(c.Enqueue(ctx, "q", []byte("y"))) == nil })
}

func TestPrefixesIsolate(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := ctxT(t)
	one := b.withPrefix(b.prefix + "-one").client()
	two := b.withPrefix(b.prefix + "-two").client()
	wTwo := newWorker(t, two, WorkerOptions{})
	events := make(chan int64, 10)
	require.NoError(t, wTwo.StartWork(ctx, "shared", Events{Work: func(_ string, n int64) { events <- n }}))

	// Prefix one publishes three tasks first, then prefix two one task.
	// A subscriber hears its messages in publish order, so if wTwo heard
	// prefix one at all, its first work event could not count exactly 1.
	require.NoError(t, second(one.EnqueueBatch(ctx, "shared", [][]byte{[]byte("1"), []byte("2"), []byte("3")})))
	require.NoError(t, second(two.Enqueue(ctx, "shared", []byte("for two"))))
	assert.EqualValues(t, 1, recv(t, events, 5*time.Second, "own work event"))

	p, err := wTwo.Dequeue(ctx, "shared")
	require.NoError(t, err)
	assert.Equal(t, "for two", string(p.Task()))
	require.NoError(t, p.Finish(ctx))
	_, err = wTwo.Dequeue(ctx, "shared")
	assert.ErrorIs(t, err, ErrNoTask)
	n, err := one.QueueLen(ctx, "shared")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	ws, err := two.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	assert.Equal(t, wTwo.ID(), ws[0].ID)
	ws, err = one.Workers(ctx)
	require.NoError(t, err)
	assert.Empty(t, ws)
}

func TestClientFromAddressOrURL(t *testing.T) {
	t.Parallel()
	b, _, ctx := setup(t)
	for _, addr := range []string{b.addr, strings.Join(b.seeds, ","), "redis://" + b.addr} {
		c, err := New(Options{Addr: addr, Prefix: b.prefix})
		require.NoError(t, err, addr)
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte(addr))), addr)
		tasks, err := c.Range(ctx, "q", -1, -1)
		require.NoError(t, err)
		assert.Equal(t, addr, string(tasks[0]))
		require.NoError(t, c.Close(ctx))
	}
	_, err := New(Options{})
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New(Options{Addr: "redis://[bad"})
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// A client New builds from Addr lets its connections stay quiet for 5 s
// before rueidis PINGs them (not rueidis's 1 s: a fleet of one-worker
// processes would draw a PING a worker a second), and gives up a connection
// that stopped answering after rueidis's 10 s, unless a URL sets its own.
func TestClientFromAddressPingsQuietConnectionsAfterFiveSeconds(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:6379", "a:1,b:2", "redis://127.0.0.1:6379/0", "rediss://u:p@h:6380"} {
		opt, err := addrOptions(addr)
		require.NoError(t, err, addr)
		assert.Equal(t, 5*time.Second, opt.Dialer.KeepAlive, addr)
		assert.Equal(t, 10*time.Second, opt.ConnWriteTimeout, addr)
	}
	opt, err := addrOptions("redis://127.0.0.1:6379/0?write_timeout=2s")
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, opt.ConnWriteTimeout, "the URL's own")
}

// New given a miniredis's address (plain or as a URL) speaks RESP2 to it,
// so that workers, their subscriptions and Wait all work. miniredis
// answers HELLO 3 but refuses commands on a connection with a
// subscription, which rueidis over RESP3 relies on. The test starts a
// miniredis of its own whatever the backend.
func TestNewWithMiniredisAddress(t *testing.T) {
	t.Parallel()
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	require.NoError(t, m.Start())
	t.Cleanup(m.Close)
	ctx := ctxT(t)
	for _, addr := range []string{m.Addr(), "redis://" + m.Addr()} {
		c, err := New(Options{Addr: addr, Logger: testLogger(t)})
		require.NoError(t, err, addr)
		w, err := c.NewWorker(ctx, WorkerOptions{})
		require.NoError(t, err)
		require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
			p.SetResult(append([]byte("done "), p.Task()...))
			return nil
		}, HandleOptions{}))
		id, err := c.Enqueue(ctx, "q", []byte(addr), Retain(time.Minute))
		require.NoError(t, err, addr)
		out, err := c.Wait(ctx, "q", id) // a subscription of the client's, beside the worker's
		require.NoError(t, err, addr)
		assert.Equal(t, "done "+addr, string(out.Result))
		require.NoError(t, w.Shutdown(ctx))
		require.NoError(t, c.Close(ctx))
	}
}

// A rueidis client of the application's own that speaks RESP3 to a
// miniredis cannot work once something subscribes; the error says what
// to do instead of only "only (P)SUBSCRIBE ... allowed".
func TestMiniredisOverRESP3SaysWhatToDo(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	c, err := New(Options{Redis: rdb, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx := ctxT(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{})) // subscribes on the shared connection
	_, err = c.Enqueue(ctx, "q", []byte("x"))
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Contains(t, err.Error(), "AlwaysRESP2")
	assert.Contains(t, err.Error(), "github.com/worqr/worqr/embedded")
}
