package engine

// Starting and stopping work on a queue on their own (Serve, Unserve,
// ServePool), over the test's worker as their host: what they record,
// and what they undo when a step fails.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/testsignal"
)

// serveHost is the test's worker as Serve and ServePool take it: it
// makes subscribed sessions, and signals each record of its slots.
type serveHost struct {
	*fakeWorker
	// made, if set, is called with each session made, before Serve waits
	// for its subscription.
	made  func(*Session)
	slots testsignal.Signal[string]
	pools []*Scheduler // guarded by the worker's mu
}

func newServeHost(t *testing.T) *serveHost {
	h := &serveHost{fakeWorker: newFakeWorker(t, testID)}
	h.slots.Init(t)
	return h
}

func (h *serveHost) NewSession(queue string, events Events, r *Runtime, deadline time.Time) *Session {
	s := &Session{}
	s.Init(h.fakeWorker, &h.env, queue, events, r, deadline, nil)
	h.withTimer(s)
	s.Subscribe(h.life)
	if h.made != nil {
		h.made(s)
	}
	return s
}

func (h *serveHost) RecordSlots(_ context.Context, id string) { h.slots.Signal(id) }

func (h *serveHost) AddPool(pool *Scheduler) { h.pools = append(h.pools, pool) }

// serving reports whether the worker serves queue.
func (h *serveHost) serving(queue string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions.Serves(queue)
}

// Serve joins the queue, makes its session and returns once it hears the
// queue's events, its runtime taking work and its slots recorded; a
// second Serve fails; Unserve stops the runtime, leaves the queue and
// records the slots again; a second Unserve fails.
func TestServeAndUnserve(t *testing.T) {
	t.Parallel()
	h := newServeHost(t)
	r := member(h.fakeWorker, "q", 1)
	ctx := context.Background()

	require.NoError(t, Serve(ctx, h, &h.env, "q", Events{}, r))
	assert.Equal(t, "q", h.reg.joined.WaitOrTimeout())
	assert.Equal(t, testID, h.slots.WaitOrTimeout(), "a runtime's slots were not recorded")
	require.True(t, h.serving("q"))
	s := h.Session("q")
	assert.True(t, isClosed(s.Sub.Ready()), "Serve returned before the subscription was ready")
	assert.True(t, r.Taking())

	require.ErrorIs(t, Serve(ctx, h, &h.env, "q", Events{}, r), errs.ErrAlreadyServing)
	assert.True(t, r.Taking(), "a failed Serve stopped the runtime serving the queue")

	require.NoError(t, Unserve(ctx, h, "q"))
	assert.False(t, h.serving("q"))
	assert.False(t, r.Taking())
	assert.Equal(t, testID, h.slots.WaitOrTimeout(), "the slots were not recorded again")
	require.ErrorIs(t, Unserve(ctx, h, "q"), errs.ErrNotServing)

	// The application's queue records no slots.
	require.NoError(t, Serve(ctx, h, &h.env, "plain", Events{}, nil))
	h.reg.joined.WaitOrTimeout()
	require.NoError(t, Unserve(ctx, h, "plain"))
	h.slots.RequireEmpty()
}

// A Serve whose context ends while it waits for the subscription leaves
// the queue again and stops its runtime; one whose join fails serves
// nothing.
func TestServeFails(t *testing.T) {
	t.Parallel()
	h := newServeHost(t)
	r := member(h.fakeWorker, "q", 1)
	r.StartLoop()
	ctx, cancel := context.WithCancel(context.Background())
	h.made = func(*Session) { cancel() }

	err := Serve(ctx, h, &h.env, "q", Events{}, r)
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "waiting for the subscription")
	assert.False(t, h.serving("q"), "a Serve that failed left the queue served")
	assert.False(t, r.Taking(), "a Serve that failed left its runtime taking work")
	h.slots.RequireEmpty()

	h.made = nil
	h.mu.Lock()
	h.reg.joinErr = errs.ErrWorkerFenced
	h.mu.Unlock()
	r.StartLoop()
	require.ErrorIs(t, Serve(context.Background(), h, &h.env, "q", Events{}, r), errs.ErrWorkerFenced)
	assert.False(t, h.serving("q"))
	assert.False(t, r.Taking())
}

// A worker that drains serves nothing new, and one that is closed stops
// serving nothing.
func TestServeClosedWorker(t *testing.T) {
	t.Parallel()
	h := newServeHost(t)
	ctx := context.Background()
	require.NoError(t, Serve(ctx, h, &h.env, "kept", Events{}, nil))

	h.mu.Lock()
	h.state.ToDraining()
	h.mu.Unlock()
	require.ErrorIs(t, Serve(ctx, h, &h.env, "q", Events{}, nil), errs.ErrWorkerClosed)
	assert.False(t, h.serving("q"), "a draining worker serves a new queue")

	h.mu.Lock()
	h.state.ToClosed()
	h.mu.Unlock()
	require.ErrorIs(t, Unserve(ctx, h, "kept"), errs.ErrWorkerClosed)
	assert.True(t, h.serving("kept"), "a closed worker's StopWork left the queue")
}

// A pool is served whole: every member's queue, then the pool recorded
// and ready; if a member fails, those served already are left again.
func TestServePool(t *testing.T) {
	t.Parallel()
	h := newServeHost(t)
	ctx := context.Background()
	call := func(context.Context, *Proc) error { return nil }

	pool := NewScheduler(h.fakeWorker, 2, true, false)
	pool.Add("a", call, MemberOptions{}, 0, 1)
	pool.Add("b", call, MemberOptions{}, 0, 1)
	require.NoError(t, ServePool(ctx, h, &h.env, pool, []Events{{}, {}}))
	assert.True(t, h.serving("a") && h.serving("b"))
	h.mu.Lock()
	if assert.Len(t, h.pools, 1, "the pool was not recorded") {
		assert.Same(t, pool, h.pools[0])
	}
	h.mu.Unlock()

	second := NewScheduler(h.fakeWorker, 2, true, false)
	c := second.Add("c", call, MemberOptions{}, 0, 1)
	second.Add("a", call, MemberOptions{}, 0, 1) // served by the first pool
	err := ServePool(ctx, h, &h.env, second, []Events{{}, {}})
	require.ErrorIs(t, err, errs.ErrAlreadyServing)
	assert.False(t, h.serving("c"), "a pool that failed left a member's queue served")
	assert.False(t, c.Taking())
	h.mu.Lock()
	assert.Len(t, h.pools, 1, "a pool that failed was recorded")
	h.mu.Unlock()
}

// An undo that failed too is told after the call's error, without its
// prefix said again, and matches both errors.
func TestUndoFailed(t *testing.T) {
	t.Parallel()
	undo := fmt.Errorf("worqr: release: %w", errs.ErrUnavailable)
	err := error(UndoFailed{Err: context.Canceled, What: "leaving the queue again failed", Undo: undo})
	assert.True(t, errors.Is(err, context.Canceled))
	assert.True(t, errors.Is(err, errs.ErrUnavailable))
	assert.Equal(t, "context canceled (and leaving the queue again failed: release: "+errs.ErrUnavailable.Error()+")", err.Error())
}
