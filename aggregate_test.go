package worqr

// Aggregation (Aggregate): tasks gathered under a key become one task when
// the MaxSize-th arrives, or when MaxDelay has passed since the first,
// exactly once, whoever enqueues or promotes.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// aggregatedWaiting dequeues every waiting task of queue with a worker of
// its own and returns each one's members (nil for a task not aggregated).
func aggregatedWaiting(t *testing.T, c *Client, queue string) [][]AggregateMember {
	t.Helper()
	ctx := ctxT(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, queue, Events{}))
	var out [][]AggregateMember
	for {
		p, err := w.Dequeue(ctx, queue)
		if errors.Is(err, ErrNoTask) {
			return out
		}
		require.NoError(t, err)
		ms, _ := p.Aggregated()
		out = append(out, ms)
		require.NoError(t, p.Finish(ctx))
	}
}

// The MaxSize-th task's enqueue flushes the gathering, when the tasks come
// from many goroutines of two clients at once: one aggregated task, with
// every task enqueued once, in id order; the tasks beyond are the next
// gathering's.
func TestAggregateMaxSizeReachedByConcurrentEnqueuers(t *testing.T) {
	t.Parallel()
	b, c1, ctx := setup(t)
	c2 := b.client()
	const size = 40
	require.NoError(t, c1.SetAggregation(ctx, "q", AggregateSettings{MaxSize: size, MaxDelay: time.Hour}, CreateQueue()))
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for i := range size {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		wg.Go(func() {
			id, err := c.Enqueue(ctx, "q", fmt.Appendf(nil, "t%02d", i), Aggregate("customer:7"), Kind("digest"))
			assert.NoError(t, err)
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		})
	}
	wg.Wait()
	info, err := c1.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, info.Waiting, "one aggregated task")
	assert.Zero(t, info.Gatherings)
	assert.Zero(t, info.Gathering)

	// One more opens the next gathering.
	extra, err := c2.Enqueue(ctx, "q", []byte("next"), Aggregate("customer:7"))
	require.NoError(t, err)
	info, err = c1.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, info.Gatherings)
	assert.EqualValues(t, 1, info.Gathering)
	assert.Equal(t, AggregateSettings{MaxSize: size, MaxDelay: time.Hour}, info.Aggregation)

	got := aggregatedWaiting(t, c1, "q")
	require.Len(t, got, 1)
	slices.Sort(ids)
	var gotIDs []string
	payloads := map[string]bool{}
	for _, m := range got[0] {
		gotIDs = append(gotIDs, m.TaskID)
		payloads[string(m.Task)] = true
	}
	assert.Equal(t, ids, gotIDs, "every task once, in id order")
	assert.Len(t, payloads, size)
	assert.NotContains(t, gotIDs, extra)
}

// A gathering whose MaxDelay has passed is flushed by the workers' timers
// (the Fake clock and miniredis's moved together), exactly once though
// two workers of two clients promote the queue at that time.
func TestAggregateMaxDelayFlushesOnceWithTwoPromoters(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c2 := k.client()
	for _, c := range []*Client{k.c, c2} {
		c.core.Signals.Armed.Init(t)
		c.core.Signals.Promoted.Init(t)
		w := newWorker(t, c, long)
		require.NoError(t, w.StartWork(k.ctx, "q", Events{}))
	}
	require.NoError(t, k.c.SetAggregation(k.ctx, "q", AggregateSettings{MaxSize: 10, MaxDelay: time.Hour}))
	var ids []string
	for i := range 3 {
		id, err := k.c.Enqueue(k.ctx, "q", fmt.Appendf(nil, "m%d", i), Aggregate("k"))
		require.NoError(t, err)
		ids = append(ids, id)
		if i == 0 {
			due := k.at(time.Hour).UnixMicro()
			for _, c := range []*Client{k.c, c2} {
				require.Equal(t, due, c.core.Signals.Armed.WaitOrTimeout(), "the timer is set for the deadline")
			}
		}
		k.advance(time.Minute)
	}
	k.advance(time.Hour - 3*time.Minute - time.Millisecond)
	for _, c := range []*Client{k.c, c2} {
		c.core.Signals.Promoted.RequireEmpty()
	}
	info, err := k.c.QueueInfo(k.ctx, "q")
	require.NoError(t, err)
	assert.Zero(t, info.Waiting, "flushed early")
	assert.EqualValues(t, 3, info.Gathering)

	k.advance(time.Millisecond)
	for _, c := range []*Client{k.c, c2} {
		require.Equal(t, "q", c.core.Signals.Promoted.WaitOrTimeout(), "both promote")
	}
	info, err = k.c.QueueInfo(k.ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, info.Waiting, "one flush")
	assert.Zero(t, info.Gatherings)
	got := aggregatedWaiting(t, k.c, "q")
	require.Len(t, got, 1)
	var gotIDs []string
	for _, m := range got[0] {
		gotIDs = append(gotIDs, m.TaskID)
	}
	assert.Equal(t, ids, gotIDs)
}

// envAggChild makes the test binary the worker process of
// TestAggregatedTaskReclaimedWithItsMembers that dies holding the
// aggregated task: "prefix|mini|seed,seed…" (mini: 1 for miniredis).
const envAggChild = "WORQR_TEST_AGG_CHILD"

// An aggregated task held by a worker process that is SIGKILLed is
// reclaimed whole and runs again, with all its members. The holder is
// this test binary run again (aggChild), on the same Redis.
func TestAggregatedTaskReclaimedWithItsMembers(t *testing.T) {
	if spec := os.Getenv(envAggChild); spec != "" {
		aggChild(t, spec)
		return
	}
	t.Parallel()
	// On miniredis the test's clock, which the scripts read too: the
	// holder's lease runs out when the test moves it, not after a second.
	k := setupTimed(t, nil)
	b, c, ctx := k.b, k.c, k.ctx
	require.NoError(t, c.SetAggregation(ctx, "q", AggregateSettings{MaxSize: 3}, CreateQueue()))
	for _, s := range []string{"a", "b", "c"} {
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte(s), Aggregate("k"))))
	}

	mini := "0"
	if !b.real {
		mini = "1"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAggregatedTaskReclaimedWithItsMembers$", "-test.count=1")
	cmd.Env = append(os.Environ(), envAggChild+"="+strings.Join([]string{b.prefix, mini, strings.Join(b.seeds, ",")}, "|"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == aggChildStarted {
				close(started)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	select {
	case <-started:
	case <-exited:
		t.Fatalf("the worker process exited before its handler started: %s", stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("the worker process's handler did not start: %s", stderr.String())
	}
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1, "the aggregated task in flight in the worker process")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	recv(t, exited, 10*time.Second, "the worker process reaped")

	pc, peer := k.reclaimingPeer()
	ran := make(chan []string, 1)
	require.NoError(t, peer.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		ms, ok := p.Aggregated()
		if !ok {
			return Permanent(errors.New("not aggregated"))
		}
		var got []string
		for _, m := range ms {
			got = append(got, string(m.Task))
		}
		got = append(got, fmt.Sprint("attempt ", p.Attempt()))
		ran <- got
		return nil
	}, HandleOptions{}))
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, pc)
	assert.Equal(t, []string{"a", "b", "c", "attempt 2"}, recv(t, ran, testsignal.Wait, "the peer ran it"))
}

// aggChildStarted is what aggChild writes once its handler holds the
// task.
const aggChildStarted = "started"

// aggChild is the worker process of
// TestAggregatedTaskReclaimedWithItsMembers: it serves queue q, says so
// on its standard output once a handler holds a task, and holds it until
// it is killed.
func aggChild(t *testing.T, spec string) {
	f := strings.Split(spec, "|")
	require.Len(t, f, 3)
	opt := rueidis.ClientOption{InitAddress: strings.Split(f[2], ","), DisableCache: true}
	if f[1] == "1" {
		opt.AlwaysRESP2, opt.ForceSingleClient = true, true // miniredis: see backend.redisWith
	}
	rdb, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	defer rdb.Close()
	c, err := New(Options{Redis: rdb, Prefix: f[0], Logger: testLogger(t)})
	require.NoError(t, err)
	ctx := context.Background()
	w, err := c.NewWorker(ctx, fast)
	require.NoError(t, err)
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, _ *Process) error {
		fmt.Println(aggChildStarted)
		<-ctx.Done()
		return ctx.Err()
	}, HandleOptions{}))
	select {} // until SIGKILL
}

// A typed handler gets the members decoded; a task without the option is
// a gathering of one to it.
func TestAggregatedJSON(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetAggregation(ctx, "q", AggregateSettings{MaxSize: 2}, CreateQueue()))
	type email struct{ To string }
	w := newWorker(t, c, WorkerOptions{})
	got := make(chan []email, 2)
	require.NoError(t, HandleAggregatedJSON(ctx, w, "q", func(_ context.Context, _ *Process, es []email) error {
		got <- es
		return nil
	}, HandleOptions{}))
	require.NoError(t, second(EnqueueJSON(ctx, c, "q", email{To: "ada"}, Aggregate("k"))))
	require.NoError(t, second(EnqueueJSON(ctx, c, "q", email{To: "bob"}, Aggregate("k"))))
	assert.Equal(t, []email{{"ada"}, {"bob"}}, recv(t, got, 5*time.Second, "the aggregated task"))
	require.NoError(t, second(EnqueueJSON(ctx, c, "q", email{To: "cy"})))
	assert.Equal(t, []email{{"cy"}}, recv(t, got, 5*time.Second, "a plain task"))
}

// DeleteQueue drops the gatherings and their deadlines; options an
// aggregated task cannot honour are refused.
func TestAggregateDeleteAndRefusals(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	for _, key := range []string{"a", "b"} {
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"), Aggregate(key))))
	}
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("plain"))))
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 2, info.Gatherings)
	assert.EqualValues(t, 2, info.Gathering)
	assert.EqualValues(t, 1, info.Waiting)
	assert.Equal(t, AggregateSettings{MaxSize: DefaultAggregateMaxSize, MaxDelay: DefaultAggregateMaxDelay}, info.Aggregation)
	n, err := c.DeleteQueue(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	k := c.core.Store.Keys().Queue("q")
	rdb := c.core.Store.Redis()
	for _, key := range []string{k.Gather, k.GatherDue} {
		exists, err := rdb.Do(ctx, rdb.B().Exists().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		assert.Zero(t, exists, key)
	}

	for name, opts := range map[string][]EnqueueOption{
		"empty key": {Aggregate("")},
		"NUL":       {Aggregate("a\x00b")},
		"front":     {Aggregate("k"), AtFront()},
		"delay":     {Aggregate("k"), In(time.Second)},
		"unique":    {Aggregate("k"), Unique("u")},
		"retain":    {Aggregate("k"), Retain(time.Minute)},
		"group":     {Aggregate("k"), Group("g")},
		// The aggregated task takes its first member's header: one
		// member's mark would be lost, or given to the others.
		"persistent": {Aggregate("k"), Persistent()},
	} {
		_, err := c.Enqueue(ctx, "q", []byte("x"), opts...)
		assert.ErrorIs(t, err, ErrInvalidOptions, name)
	}
	assert.ErrorIs(t, c.SetAggregation(ctx, "q", AggregateSettings{MaxDelay: time.Microsecond}, CreateQueue()), ErrInvalidOptions)
	_, ok := store.ParseAggregated([]byte("1,5:abc"))
	assert.False(t, ok, "a length past the end")
}

// A detached process can stand for an aggregated task's, for a handler's
// unit test: its members, payloads with ',' and ':' among them, come back
// whole from Aggregated and decoded from TypedAggregated.
func TestDetachedAggregatedProcess(t *testing.T) {
	t.Parallel()
	members := []AggregateMember{{TaskID: "a1", Task: []byte(`{"To":"x,y:z"}`)}, {TaskID: "a2", Task: []byte(`{"To":""}`)}}
	p := NewDetachedProcess(nil, DetachedOptions{Members: members})
	got, ok := p.Aggregated()
	require.True(t, ok)
	assert.Equal(t, members, got)
	type email struct{ To string }
	var decoded []email
	h := TypedAggregated[email](nil, func(_ context.Context, _ *Process, es []email) error {
		decoded = es
		return nil
	})
	require.NoError(t, h(context.Background(), p))
	assert.Equal(t, []email{{"x,y:z"}, {""}}, decoded)
	_, ok = NewDetachedProcess([]byte("a1,3:abc"), DetachedOptions{}).Aggregated()
	assert.False(t, ok, "a plain task's payload is never read as members")
}

// Items' unique keys cannot gather: an aggregated task ends under an id
// of its own, so the keys its members took (held by their ids) would never
// be given up. EnqueueBatchItems refuses them with Aggregate, and a key
// an earlier aggregated call might have taken stays free.
func TestAggregateRefusesItemUniqueKeys(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	require.NoError(t, c.SetAggregation(ctx, "q", AggregateSettings{MaxSize: 1, MaxDelay: time.Hour}, CreateQueue()))
	_, err := c.EnqueueBatchItems(ctx, "q", []BatchItem{{Payload: []byte("a"), UniqueKey: "k"}}, Aggregate("x"))
	require.ErrorIs(t, err, ErrInvalidOptions)
	// Nothing was enqueued, and the key is free.
	assert.Empty(t, aggregatedWaiting(t, c, "q"))
	res, err := c.EnqueueBatchItems(ctx, "q", []BatchItem{{Payload: []byte("b"), UniqueKey: "k"}})
	require.NoError(t, err)
	assert.False(t, res[0].Duplicate)
}

// A gathering flushes early, before MaxSize, when its next task would take
// the aggregated task past the client's MaxTaskSize: every aggregated task
// a worker gets stays within it, and holds every task once, in order.
func TestAggregateFlushesBeforePassingMaxTaskSize(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	const limit = 200
	c, err := New(Options{Redis: b.redis(), Prefix: b.prefix, MaxTaskSize: limit, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	ctx := ctxT(t)
	require.NoError(t, c.SetAggregation(ctx, "q", AggregateSettings{MaxSize: 100, MaxDelay: time.Hour}, CreateQueue()))
	var ids []string
	for i := range 8 {
		id, err := c.Enqueue(ctx, "q", fmt.Appendf(nil, "%02d%s", i, make([]byte, 58)), Aggregate("k"))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	batch, err := c.EnqueueBatch(ctx, "q", [][]byte{fmt.Appendf(nil, "08%s", make([]byte, 58)), fmt.Appendf(nil, "09%s", make([]byte, 58)), fmt.Appendf(nil, "10%s", make([]byte, 58))}, Aggregate("k"))
	require.NoError(t, err)
	ids = append(ids, batch...)
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, info.Gatherings, "the last tasks still gather")

	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	var got []string
	for {
		p, err := w.Dequeue(ctx, "q")
		if errors.Is(err, ErrNoTask) {
			break
		}
		require.NoError(t, err)
		assert.LessOrEqual(t, len(p.Task()), limit, "an aggregated task within MaxTaskSize")
		ms, ok := p.Aggregated()
		require.True(t, ok)
		assert.Greater(t, len(ms), 1, "the bound flushes, not every task alone")
		for _, m := range ms {
			got = append(got, m.TaskID)
		}
		require.NoError(t, p.Finish(ctx))
	}
	require.NotEmpty(t, got, "flushed before MaxSize")
	held := len(ids) - len(got)
	assert.EqualValues(t, held, info.Gathering)
	assert.Equal(t, ids[:len(got)], got, "every flushed task once, in id order")
}

// A gathering whose deadline entry is lost would never be flushed by
// time: Check reports it, and its repair gives it a deadline of now, which
// the worker serving the queue hears of and flushes it for; the next Check
// finds nothing.
func TestCheckRepairsAGatheringWithoutDeadline(t *testing.T) {
	t.Parallel()
	b, c, ctx := setup(t)
	require.NoError(t, c.SetAggregation(ctx, "q", AggregateSettings{MaxSize: 10, MaxDelay: time.Hour}, CreateQueue()))
	wc := b.client()
	wc.core.Signals.Armed.Init(t)
	wc.core.Signals.Promoted.Init(t)
	w := newWorker(t, wc, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	var ids []string
	for i := range 2 {
		id, err := c.Enqueue(ctx, "q", fmt.Appendf(nil, "m%d", i), Aggregate("k"))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	wc.core.Signals.Armed.WaitOrTimeout() // the worker hears of the gathering
	requireClean(t, c)
	do(t, c, c.core.Redis.B().Del().Key(c.core.Store.Keys().Queue("q").GatherDue).Build())

	rep := check(t, c, false)
	assert.EqualValues(t, 1, rep.UndueGatherings)
	assert.Equal(t, 1, rep.Problems())
	rep = check(t, c, true)
	assert.EqualValues(t, 1, rep.Repaired.RescheduledGatherings)
	// The worker's timer was armed for the hour; the repair's event brings
	// the promotion forward.
	require.Equal(t, "q", wc.core.Signals.Promoted.WaitOrTimeout())
	requireClean(t, c)

	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	ms, ok := p.Aggregated()
	require.True(t, ok)
	require.Len(t, ms, 2)
	assert.Equal(t, ids, []string{ms[0].TaskID, ms[1].TaskID})
	require.NoError(t, p.Finish(ctx))
}
