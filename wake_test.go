package worqr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// parked lists the worker ids parked in a queue's idle set, longest idle
// first.
func parked(t *testing.T, c *Client, queue string) []string {
	t.Helper()
	ids, err := c.core.Redis.Do(context.Background(), c.core.Redis.B().Zrange().Key(c.core.Store.Keys().Queue(queue).Idle).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	return ids
}

// settledParking waits until n runtimes are parked and stay so (a runtime
// parks when its loop starts and again after it subscribes), and returns
// them longest idle first.
func settledParking(t *testing.T, c *Client, queue string, n int) []string {
	t.Helper()
	var before, ids []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		before = parked(t, c, queue)
		time.Sleep(50 * time.Millisecond)
		ids = parked(t, c, queue)
		if len(ids) == n && strings.Join(before, ",") == strings.Join(ids, ",") {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %d runtimes parked, and staying so: last %v, then %v", n, before, ids)
		}
	}
}

// handledBy records which worker handled each task.
type handledBy struct {
	mu  sync.Mutex
	by  map[string][]string
	got chan string
}

func newHandledBy() *handledBy {
	return &handledBy{by: make(map[string][]string), got: make(chan string, 100)}
}

func (h *handledBy) handler(name string) Handler {
	return func(_ context.Context, p *Process) error {
		h.mu.Lock()
		h.by[string(p.Task())] = append(h.by[string(p.Task())], name)
		h.mu.Unlock()
		h.got <- string(p.Task())
		return nil
	}
}

// tooBig pads a task past what an enqueue hands straight to an idle
// runtime (see handoff_test.go), so that it waits to be dequeued.
func tooBig(task string) string {
	return task + strings.Repeat(".", store.MaxHandOffPayload+1-len(task))
}

// Idle runtimes park in the queue's idle set; an enqueue of n tasks names
// n+1 of them, longest idle first, and only those look at the queue. (A
// single small task is handed to the longest idle instead: see
// handoff_test.go.)
func TestWorkEventsWakeOnlyParkedRuntimes(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	h := newHandledBy()
	var all []string
	for range 4 {
		w := newWorker(t, c, WorkerOptions{})
		require.NoError(t, w.Handle(ctx, "q", h.handler(w.ID()), HandleOptions{}))
		all = append(all, w.ID())
	}
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	// The two longest idle are named. A runtime that parks again between
	// the read of the idle set and the enqueue (its worker re-registered
	// on a loaded machine, say) changes who that is, so the step is
	// tried again then; a wrong order fails every try.
	var ids []string
	for try := 1; ; try++ {
		ids = settledParking(t, c, "q", 4)
		require.ElementsMatch(t, all, ids)
		task := tooBig(fmt.Sprintf("t1-%d", try))
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte(task))))
		m := expectPrefix(t, events, "w1:")
		assert.Equal(t, task, recv(t, h.got, 5*time.Second, "task handled"))
		eventually(t, 5*time.Second, "all parked again", func() bool { return len(parked(t, c, "q")) == 4 })
		if m == "w1:"+ids[0]+","+ids[1] {
			h.mu.Lock()
			h.by["t1"] = h.by[task]
			h.mu.Unlock()
			break
		}
		require.Less(t, try, 3, "the enqueue named %q, not the two longest idle of %v", m, ids)
		t.Logf("try %d named %q, not the two longest idle of %v; trying again", try, m, ids)
	}
	h.mu.Lock()
	assert.Len(t, h.by["t1"], 1)
	assert.Contains(t, ids[:2], h.by["t1"][0], "one of the named runtimes took it")
	h.mu.Unlock()

	// A batch names as many as it has tasks, plus one.
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("t2"), []byte("t3")})))
	for {
		m := recv(t, events, 5*time.Second, "work event for the batch")
		if strings.HasPrefix(m, "w2:") {
			assert.Len(t, strings.Split(strings.TrimPrefix(m, "w2:"), ","), 3)
			break
		}
	}
	recv(t, h.got, 5*time.Second, "t2 handled")
	recv(t, h.got, 5*time.Second, "t3 handled")

	// With nobody parked the event names nobody, and wakes everyone.
	settledParking(t, c, "q", 4) // no runtime is still looking
	_, err := c.core.Redis.Do(ctx, c.core.Redis.B().Del().Key(c.core.Store.Keys().Queue("q").Idle).Build()).AsInt64()
	require.NoError(t, err)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("t4"))))
	expectMessage(t, events, "w1")
	assert.Equal(t, "t4", recv(t, h.got, 5*time.Second, "t4 handled"))
}

// A runtime that died parked may be named and never act: the task is
// taken within TTL + one check interval all the same, once the dead
// worker is reclaimed.
func TestRuntimesThatDiedParkedDoNotStrandTasks(t *testing.T) {
	t.Parallel()
	k := setupTimed(t, nil)
	c, ctx := k.c, k.ctx
	k.beats()
	c.core.Signals.Looked.Init(t)
	h := newHandledBy()
	byID := map[string]*Worker{}
	for range 3 {
		w := newWorker(t, c, fast)
		require.NoError(t, w.Handle(ctx, "q", h.handler(w.ID()), HandleOptions{}))
		byID[w.ID()] = w
	}
	ids := settledParking(t, c, "q", 3)
	crash(byID[ids[0]]) // the two the next enqueue will name
	crash(byID[ids[1]])
	start := time.Now()
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("t"))))
	select {
	case <-h.got:
		t.Fatal("taken before the dead workers were reclaimed: the survivor was woken although not named")
	case <-time.After(300 * time.Millisecond):
	}
	k.run(fast.TTL + fast.RenewInterval)
	recv(t, h.got, testsignal.Wait, "task taken by the survivor")
	t.Logf("taken after %v", time.Since(start))
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, []string{ids[2]}, h.by["t"])
}

// A runtime named while it no longer takes work (Shutdown's grace period,
// StopWork) passes the event on to everyone; and leaving the queue wakes
// everyone if tasks wait, for events it missed once unsubscribed.
func TestStoppingRuntimesPassWorkOn(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	h := newHandledBy()
	require.NoError(t, w.Handle(ctx, "q", h.handler("w"), HandleOptions{}))
	id := settledParking(t, c, "q", 1)[0]
	w.core.Lock()
	r := w.core.Served()["q"].Runtime
	w.core.Unlock()
	r.StopTaking() // as Shutdown does before its grace period

	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte(tooBig("t")))))
	expectMessage(t, events, "w1:"+id)
	expectMessage(t, events, "w1") // passed on

	require.NoError(t, w.StopWork(ctx, "q"))
	expectMessage(t, events, "w1") // the release's wake: a task waits
	assert.Empty(t, parked(t, c, "q"))
	select {
	case task := <-h.got:
		t.Fatalf("a stopped runtime handled %q", task)
	default:
	}
}

// A retried task wakes the queue as an enqueued one does: its work event
// names parked runtimes, which alone look at the queue (a retry does not
// wake every runtime of the fleet).
func TestRetryWakesOnlyParkedRuntimes(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	manual := newWorker(t, c, WorkerOptions{})
	require.NoError(t, manual.StartWork(ctx, "q", Events{}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("t"))))
	p, err := manual.Dequeue(ctx, "q")
	require.NoError(t, err)

	h := newHandledBy()
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", h.handler(w.ID()), HandleOptions{}))
	require.Equal(t, []string{w.ID()}, settledParking(t, c, "q", 1))
	events := b.listen(c.core.Store.Keys().Queue("q").Channel)
	require.NoError(t, p.Retry(ctx, 0, errors.New("again")))
	assert.Equal(t, "w1:"+w.ID(), expectPrefix(t, events, "w"))
	assert.Equal(t, "t", recv(t, h.got, 5*time.Second, "the retried task handled by the parked runtime"))
}
