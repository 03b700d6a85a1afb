package engine

// The hand-off event (h<worker>,<pid>,<entry>) through the queue's
// dispatcher (Session.Dispatch): the one naming this worker reaches its
// runtime's starter, which starts the task in a free slot; one naming
// another worker, or met by the application's session, starts nothing;
// one the runtime cannot start (it stops taking, or no slot is free) goes
// back to the front of the queue. The application hears of work each time.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
)

// handing is a worker whose runtime of queue q (one slot) takes work
// with no loop running, so that only hand-offs start tasks; its handler
// tells ran of each process and returns once the test ends. The worker
// staleID serves q too, as a peer.
type handing struct {
	w     *fakeWorker
	r     *Runtime
	sess  *Session
	heard *heard
	ran   chan string
}

func newHanding(t *testing.T) *handing {
	t.Helper()
	w := newTestWorker(t)
	h := &handing{w: w, ran: make(chan string, 2)}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	sched := NewScheduler(w, 1, true, false)
	h.r = sched.Add("q", func(_ context.Context, p *Proc) error {
		h.ran <- p.ID
		<-release
		return nil
	}, MemberOptions{}, 0, 1)
	h.sess = w.handle("q", h.r)
	h.heard = listen(t, h.sess)
	joined(t, w, "q")
	require.NoError(t, w.env.Store.RegisterWorker(t.Context(), staleID, time.Minute))
	_, err := w.env.Store.JoinQueue(t.Context(), "q", staleID)
	require.NoError(t, err)
	w.mu.Lock()
	w.refuse = errRefused // no Finish: the test's Env has no coalescer
	w.mu.Unlock()
	sched.mu.Lock()
	h.r.takes = true // taking work, the queue looked empty
	sched.mu.Unlock()
	return h
}

// handOff is the event an enqueue publishes when it hands process pid,
// which it started for worker to, straight to that worker's runtime.
func handOff(t *testing.T, to, pid string) subscription.Event {
	t.Helper()
	e, ok := store.ParseEvent("h" + to + "," + pid + ",x")
	require.True(t, ok)
	return subscription.Event{Event: e}
}

// wakes is the runtime's count of looks for work, and its slots taken.
func (h *handing) wakes() (gen uint64, busy int) {
	h.r.sched.mu.Lock()
	defer h.r.sched.mu.Unlock()
	return h.r.gen, h.r.busy
}

// booked lists the ids of the processes in the session's books.
func (h *handing) booked() []string {
	var ids []string
	for _, p := range h.sess.Books.Processes() {
		ids = append(ids, p.ID)
	}
	return ids
}

// front takes the task at the front of q, as the peer, returning its id.
func (h *handing) front(t *testing.T) string {
	t.Helper()
	ps, _, _, err := h.w.env.Store.Dequeue(t.Context(), "q", staleID, 1, false)
	require.NoError(t, err)
	require.Len(t, ps, 1, "nothing waits in the queue")
	return ps[0].Task.ID
}

// A hand-off naming this worker starts its task in the free slot: the
// process is adopted, told to the observer and run, and the application
// hears of one task.
func TestDispatchStartsAHandOff(t *testing.T) {
	t.Parallel()
	h := newHanding(t)
	ps := h.w.hold(t, "q", testID, 1) // the worker's in Redis, as the enqueue made it

	h.sess.Dispatch(t.Context(), handOff(t, testID, ps[0].PID))
	assert.Equal(t, ps[0].PID, recv(t, h.ran, "the handed task ran"))
	assert.Equal(t, ps[0].PID, h.w.started.WaitOrTimeout(), "told to the observer")
	assert.Equal(t, []string{ps[0].PID}, h.booked(), "adopted into the books")
	assert.Equal(t, int64(1), h.heard.work.WaitOrTimeout())
}

// A hand-off naming another worker is that worker's: nothing claims a
// slot or looks for work for it, nothing is adopted or given back. The
// application's own session starts nothing either. Both tell the
// application of the task.
func TestDispatchIgnoresAnotherWorkersHandOff(t *testing.T) {
	t.Parallel()
	h := newHanding(t)
	ps := h.w.hold(t, "q", staleID, 1)
	gen, _ := h.wakes()

	h.sess.Dispatch(t.Context(), handOff(t, staleID, ps[0].PID))
	assert.Equal(t, int64(1), h.heard.work.WaitOrTimeout())
	after, busy := h.wakes()
	assert.Equal(t, gen, after, "the runtime looked for work for another worker's task")
	assert.Zero(t, busy, "a slot was claimed for another worker's task")
	assert.Empty(t, h.booked(), "another worker's task was adopted")
	assert.Len(t, h.w.held(t, "q", staleID, ps), 1, "another worker's task was given back")
	h.w.started.RequireEmpty()

	plain := h.w.handle("plain", nil)
	told := listen(t, plain)
	plain.Dispatch(t.Context(), handOff(t, testID, "1"))
	assert.Equal(t, int64(1), told.work.WaitOrTimeout())
}

// A hand-off the runtime cannot start, because it stops taking work (a
// StopWork, or the worker draining) or because its only slot is busy with
// no dequeue of its own in flight, goes back to the front of the queue,
// ahead of the task enqueued after it, unstarted and not adopted.
func TestDispatchGivesBackAHandOffItCannotStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, h *handing)
	}{
		{"stopping", func(_ *testing.T, h *handing) { h.r.StopTaking() }},
		{"no free slot", func(t *testing.T, h *handing) {
			busy := h.w.hold(t, "q", testID, 1)
			h.sess.Dispatch(t.Context(), handOff(t, testID, busy[0].PID))
			recv(t, h.ran, "the task in the only slot")
			h.heard.work.WaitOrTimeout()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHanding(t)
			tc.prepare(t, h)
			ps := h.w.hold(t, "q", testID, 1)
			_, err := h.w.env.Store.Enqueue(t.Context(), "q", [][]byte{[]byte("later")}, store.EnqueueArgs{})
			require.NoError(t, err)
			books := h.booked()

			h.sess.Dispatch(t.Context(), handOff(t, testID, ps[0].PID))
			assert.Equal(t, int64(1), h.heard.work.WaitOrTimeout())
			assert.Empty(t, h.w.held(t, "q", testID, ps), "the task stayed the worker's: %s", h.w.logs)
			assert.Equal(t, books, h.booked(), "a task given back was adopted")
			assert.Equal(t, ps[0].Task.ID, h.front(t), "the task went back behind a later one")
			select {
			case pid := <-h.ran:
				t.Fatalf("%s ran without a slot", pid)
			default:
			}
		})
	}
}
