package worqr

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/pacer"
	"github.com/worqr/worqr/internal/slotpolicy"
	"github.com/worqr/worqr/internal/store"
)

// schedulerOf makes a slot scheduler of size slots, not started, with a
// member per weight (named A, B, ...; maxSlots from caps), each taking
// work and marked as maybe having tasks.
func schedulerOf(w *Worker, order Order, size int, weights, caps []int) *slotScheduler {
	s := newSlotScheduler(w, size, order)
	for i, weight := range weights {
		r := s.add(string(rune('A'+i)), nil, HandleOptions{}, caps[i], weight)
		r.takes, r.more = true, true
	}
	return s
}

// planned is the scheduler's plan for n free slots, as "A2 B3".
func planned(s *slotScheduler, n int) string {
	s.mu.Lock()
	room := make([]int, len(s.members))
	for i, r := range s.members {
		room[i] = r.roomLocked()
	}
	s.mu.Unlock()
	var parts []string
	for _, sh := range slotpolicy.Plan(s.order == OrderStrict, n, room, s.parts, s.current, nil) {
		parts = append(parts, fmt.Sprintf("%s%d", s.members[sh.Member].queue, sh.N))
	}
	return strings.Join(parts, " ")
}

// The plan of a scheduler's members: a member's room is what it may take
// (its MaxSlots), and none for one that does not take work, has none, or
// is blocked; the sharing itself is internal/slotpolicy's.
func TestSchedulerPlan(t *testing.T) {
	t.Parallel()
	s := schedulerOf(nil, OrderStrict, 5, []int{1, 1, 1}, []int{2, 0, 0})
	assert.Equal(t, "A2 B3", planned(s, 5), "strict: the first queue up to its MaxSlots, the rest to the next")
	s.members[0].more = false
	assert.Equal(t, "B5", planned(s, 5), "strict: a queue without work is passed over")
	s.members[1].blocked = true
	assert.Equal(t, "C5", planned(s, 5), "strict: a blocked queue is passed over")
	s.members[2].takes = false
	assert.Empty(t, planned(s, 5), "a queue that stopped taking has no room")

	s = schedulerOf(nil, OrderShared, 4, []int{3, 1}, []int{0, 0})
	var seq []string
	for range 4 {
		seq = append(seq, planned(s, 1))
	}
	assert.Equal(t, "A1 A1 B1 A1", strings.Join(seq, " "), "shared: by the members' shares")
}

// One set of counts: a member's share and the scheduler's move together,
// the free slots are bounded by the handlers running and by the outcomes
// being written, a hand-off's claim never takes a slot a dequeue in flight
// asked for nor goes past the member's MaxSlots, and a member's drain
// waits for its own handlers only.
func TestSchedulerCounts(t *testing.T) {
	t.Parallel()
	s := schedulerOf(nil, OrderStrict, 2, []int{1, 1}, []int{0, 1})
	a, b := s.members[0], s.members[1]
	counts := func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Sprintf("%+v a%+v b%+v", s.slots, a.slots, b.slots)
	}

	room := make([]int, 2)
	n := s.reserve(room)
	assert.Equal(t, 2, n, "both slots free")
	assert.Equal(t, []int{2, 1}, room, "b's MaxSlots is 1")
	_, ok := a.hand.claim()
	assert.False(t, ok, "a hand-off does not take a slot a dequeue asked for")
	s.mu.Lock()
	s.asking -= n // the dequeues came back with nothing
	s.mu.Unlock()

	_, ok = b.hand.claim()
	require.True(t, ok)
	_, ok = b.hand.claim()
	assert.False(t, ok, "b is at its MaxSlots")
	assert.True(t, b.full())
	assert.False(t, a.full())
	_, ok = a.hand.claim()
	require.True(t, ok)
	assert.Equal(t, "{busy:2 settling:0 asking:0} a{busy:1 settling:0 asking:0} b{busy:1 settling:0 asking:0}", counts())
	assert.True(t, a.full(), "every slot taken")
	assert.Zero(t, a.free())

	drainedA := a.drained()
	s.returned(a) // a's handler returned; its outcome is being written
	assert.Equal(t, "{busy:1 settling:1 asking:0} a{busy:0 settling:1 asking:0} b{busy:1 settling:0 asking:0}", counts())
	assert.Equal(t, 1, a.free(), "a slot frees when its handler returns")
	select {
	case <-drainedA:
		t.Fatal("drained while a's outcome is being written")
	default:
	}
	assert.False(t, a.idle())

	quit, ok := a.hand.claim()
	require.True(t, ok)
	select {
	case <-quit:
	default:
		t.Fatal("the loop does not run: a new handler goroutine leaves after its job")
	}
	s.returned(a)
	s.returned(b)
	assert.Equal(t, "{busy:0 settling:3 asking:0} a{busy:0 settling:2 asking:0} b{busy:0 settling:1 asking:0}", counts())
	assert.Equal(t, 1, slotpolicy.Free(s.size, s.busy, s.settling), "at most size outcomes unwritten besides the handlers")

	a.settled(job{r: a, cancel: func(error) {}})
	a.settled(job{r: a, cancel: func(error) {}})
	recv(t, drainedA, time.Second, "a drained once its outcomes are written")
	assert.True(t, a.idle())
	assert.False(t, b.idle(), "b's outcome is still being written")
	b.settled(job{r: b, cancel: func(error) {}})
	assert.Equal(t, "{busy:0 settling:0 asking:0} a{busy:0 settling:0 asking:0} b{busy:0 settling:0 asking:0}", counts())
}

// A slot that frees wakes the loop only when a member may take it.
func TestSchedulerWakesOnlyForAMemberWithWork(t *testing.T) {
	t.Parallel()
	s := schedulerOf(nil, OrderStrict, 2, []int{1}, []int{0})
	r := s.members[0]
	woken := func() bool {
		select {
		case <-s.wake:
			return true
		default:
			return false
		}
	}
	_, ok := r.hand.claim()
	require.True(t, ok)
	s.returned(r)
	assert.True(t, woken(), "a slot freed while the queue may hold tasks")
	r.clearMore(r.gen)
	r.settled(job{r: r, cancel: func(error) {}})
	assert.False(t, woken(), "nothing to plan: the queue looked empty")
	r.workArrived()
	assert.True(t, woken(), "a work event")
}

// What the policy does to a member: an empty queue clears its work flag,
// a fenced one blocks it until a work event, and a Redis failure blocks it
// until its backoff, timed on the client's clock, ends; stopping the
// member stops that timer.
func TestDequeueFailureAppliedToAMember(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	fake := clock.NewFake(time.Now())
	c, err := New(Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), clock: fake})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	s := schedulerOf(&Worker{c: c}, OrderStrict, 2, []int{1}, []int{0})
	r := s.members[0]
	flags := func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Sprintf("more:%v blocked:%v room:%d", r.more, r.blocked, r.roomLocked())
	}
	fail := func(err error) {
		s.mu.Lock()
		gen := r.gen
		s.mu.Unlock()
		r.afterDequeue(slotpolicy.Decide(err), c.outage.Begin(), gen, err)
	}

	fail(ErrNoTask)
	assert.Equal(t, "more:false blocked:false room:0", flags())
	r.workArrived()
	fail(ErrWorkerFenced)
	assert.Equal(t, "more:true blocked:true room:0", flags())
	r.workArrived() // a rejoin's
	assert.Equal(t, "more:true blocked:false room:2", flags())

	fail(fmt.Errorf("%w: connection reset (test)", ErrUnavailable))
	assert.Equal(t, "more:true blocked:true room:0", flags())
	assert.Equal(t, 1, fake.Timers(), "the backoff's timer")
	select {
	case <-s.wake: // the work events' above
	default:
	}
	fake.Advance(pacer.RetryMin)
	recv(t, s.wake, 5*time.Second, "the loop woken after the backoff")
	assert.Equal(t, "more:true blocked:false room:2", flags(), "looks again after the backoff")

	fail(fmt.Errorf("%w: connection reset (test)", ErrUnavailable))
	fake.Advance(pacer.RetryMin)
	assert.Equal(t, "more:true blocked:true room:0", flags(), "the backoff doubled")
	r.stopTaking()
	assert.Zero(t, fake.Timers(), "stopping the member stops its timer")
}

// The scheduler's loop runs while a member takes work and stops with the
// last one; once the worker closes, none of the goroutines it started
// (handler goroutines, outcome writes) outlives the close, and it starts
// no more.
func TestSchedulerStopsWithItsMembersAndItsGoroutinesWithTheWorker(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	done := make(chan string, 10)
	h := func(_ context.Context, p *Process) error { done <- string(p.Task()); return nil }
	require.NoError(t, w.Handle(ctx, "one", h, HandleOptions{Concurrency: 2}))
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{{Queue: "a", Handler: h}, {Queue: "b", Handler: h}}, PoolOptions{}))
	one, a, b := runnerOf(w, "one").sched, runnerOf(w, "a").sched, runnerOf(w, "b").sched
	require.Same(t, a, b, "a pool is one scheduler")
	recv(t, one.Started(), 5*time.Second, "Handle's loop started")
	recv(t, a.Started(), 5*time.Second, "the pool's loop started")

	poolStopped, oneStopped := a.Stopped(), one.Stopped() // this run's
	require.NoError(t, w.StopWork(ctx, "a"))
	select {
	case <-poolStopped:
		t.Fatal("the pool's loop stopped while b is served")
	default:
	}
	require.NoError(t, w.StopWork(ctx, "b"))
	recv(t, poolStopped, 5*time.Second, "the pool's loop stopped with its last member")

	for _, task := range []string{"x", "y", "z"} {
		require.NoError(t, second(c.Enqueue(ctx, "one", []byte(task))))
		recv(t, done, 5*time.Second, "handled")
	}
	settledQueue(t, c, "one")
	require.NoError(t, w.Close(ctx))
	recv(t, oneStopped, 5*time.Second, "Handle's loop stopped")
	assert.False(t, one.jobs.Go(func() {}), "the handler goroutines were waited for and no more start")
}

// Slots reports each pool's busy and free slots exactly while handlers
// are held, per worker and for the client, and the slots freed when they
// return; a pool whose queues are all left is not reported.
func TestSlotsReportBusyAndFreeHandlersPerPool(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	started := make(chan string, 10)
	release := make(chan struct{})
	hold := func(ctx context.Context, p *Process) error {
		started <- p.Queue()
		<-release
		return nil
	}
	w := newWorker(t, c, fast)
	require.NoError(t, w.Handle(ctx, "a", hold, HandleOptions{Concurrency: 3}))
	require.NoError(t, w.HandleQueues(ctx, []QueueSpec{{Queue: "b", Handler: hold}, {Queue: "c", Handler: hold}}, PoolOptions{Concurrency: 4}))
	other := newWorker(t, c, fast)
	require.NoError(t, other.Handle(ctx, "d", hold, HandleOptions{Concurrency: 2}))

	for _, q := range []string{"a", "a", "b", "c", "c", "d"} {
		_, err := c.Enqueue(ctx, q, []byte("t"))
		require.NoError(t, err)
	}
	for range 6 {
		recv(t, started, 5*time.Second, "a handler started")
	}
	want := []PoolSlots{
		{Worker: w.ID(), Queues: []string{"b", "c"}, Size: 4, Busy: 3, Free: 1},
		{Worker: w.ID(), Queues: []string{"a"}, Size: 3, Busy: 2, Free: 1},
	}
	assert.Equal(t, want, w.Slots())
	assert.Equal(t, []PoolSlots{{Worker: other.ID(), Queues: []string{"d"}, Size: 2, Busy: 1, Free: 1}}, other.Slots())
	all := c.Slots()
	assert.Len(t, all, 3)
	assert.Subset(t, all, append(want, other.Slots()...))

	close(release)
	eventually(t, 5*time.Second, "the slots freed", func() bool {
		for _, ps := range c.Slots() {
			if ps.Busy != 0 || ps.Free != ps.Size {
				return false
			}
		}
		return true
	})
	require.NoError(t, w.StopWork(ctx, "a"))
	assert.Equal(t, []PoolSlots{{Worker: w.ID(), Queues: []string{"b", "c"}, Size: 4, Busy: 0, Free: 4}}, w.Slots())
	require.NoError(t, other.Close(ctx))
	assert.Empty(t, other.Slots())
	assert.Len(t, c.Slots(), 1)
}

// A hand-off that finds no free slot waits for the reply of its member's
// own dequeue when that dequeue asked for the last slots, and takes a
// slot the reply leaves free; one whose slots another member's dequeue
// asked for, or a member that stops taking, goes back at once.
func TestHandOffHeldForTheMembersDequeue(t *testing.T) {
	t.Parallel()
	s := schedulerOf(nil, OrderStrict, 1, []int{1, 1}, []int{0, 0})
	a, b := s.members[0], s.members[1]
	e := store.Event{Kind: store.EventHandOff, PID: "1"}

	s.mu.Lock()
	s.asking, a.asking = 1, 1 // a's dequeue asked for the slot
	s.mu.Unlock()
	_, room := b.hand.claimOrHold(e)
	assert.Equal(t, 0, room, "b's slot went to a's dequeue: b gives it back")
	_, room = a.hand.claimOrHold(e)
	assert.Equal(t, -1, room, "held for a's dequeue")

	s.mu.Lock()
	s.asking, a.asking = 0, 0 // the reply came back empty
	held, room := a.hand.takeHeldLocked()
	s.mu.Unlock()
	assert.Equal(t, []store.Event{e}, held)
	assert.Equal(t, 1, room, "the slot the reply left free")

	s.mu.Lock()
	s.asking, a.asking = 1, 1 // and a full one takes the slot
	s.mu.Unlock()
	_, room = a.hand.claimOrHold(e)
	require.Equal(t, -1, room)
	s.mu.Lock()
	s.asking, a.asking = 0, 0
	a.busy++
	s.busy++
	held, room = a.hand.takeHeldLocked()
	s.mu.Unlock()
	assert.Len(t, held, 1)
	assert.Zero(t, room, "no slot beyond the dequeue's: start chooses between them")
	assert.Nil(t, a.hand.held)

	a.stopTaking()
	s.mu.Lock()
	a.asking = 1
	s.mu.Unlock()
	_, room = a.hand.claimOrHold(e)
	assert.Equal(t, 0, room, "a member that stopped taking gives it back")
}
