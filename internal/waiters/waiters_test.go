package waiters

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

func newWaiters(t *testing.T) (*Waiters, *store.Store) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	s := store.New(rdb, "waitertest", false, false)
	ws := New(s)
	t.Cleanup(ws.Close)
	return ws, s
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("not within 5s: %s", what)
		var zero T
		return zero
	}
}

// A queue's subscription for Wait is a service: it starts with the
// queue's first waiter, lasts while any waits, stops with the last, and
// with the client.
func TestWaitSubscriptionStartsAndStopsWithItsWaiters(t *testing.T) {
	t.Parallel()
	ws, _ := newWaiters(t)
	listenOf := func(q string) *queueWaiter {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		return ws.queues[q]
	}
	w1 := ws.Add("q", "t1", false)
	qw := listenOf("q")
	recv(t, qw.listen.Started(), "the queue's subscription started")
	stopped := qw.listen.Stopped()
	w2 := ws.Add("q", "t2", true)
	require.Same(t, qw, listenOf("q"), "one subscription per queue")
	ws.Remove("q", "t1", w1)
	select {
	case <-stopped:
		t.Fatal("stopped while a waiter was left")
	default:
	}
	ws.Remove("q", "t2", w2)
	recv(t, stopped, "stopped with the last waiter")
	require.Nil(t, listenOf("q"))

	w3 := ws.Add("r", "t3", false)
	other := listenOf("r").listen
	recv(t, other.Started(), "r's subscription started")
	otherStopped := other.Stopped()
	ws.Close()
	recv(t, otherStopped, "stopped with the client")
	recv(t, w3.Closed(), "the waiter told the client closed")
}

// The subscription wakes every waiter once it is confirmed; an event that
// says a task was cancelled wakes its waiters, and only them, with the
// cancelled error, told once.
func TestEventsWakeTheirWaitersWithWhy(t *testing.T) {
	t.Parallel()
	ws, s := newWaiters(t)
	ctx := context.Background()
	a, b := ws.Add("q", "a", false), ws.Add("q", "b", false)
	recv(t, a.Wake(), "a woken by the subscription")
	recv(t, b.Wake(), "b woken by the subscription")
	assert.NoError(t, a.TakeGone())

	ids, err := s.Enqueue(ctx, "q", [][]byte{[]byte("x")}, store.EnqueueArgs{Retain: time.Minute}) // retained: its waiters are told
	require.NoError(t, err)
	c := ws.Add("q", ids[0], false)
	recv(t, c.Wake(), "c, subscribed already")
	_, _, err = s.CancelID(ctx, "q", ids[0])
	require.NoError(t, err)
	recv(t, c.Wake(), "c woken by the cancel")
	assert.ErrorIs(t, c.TakeGone(), errs.ErrTaskCancelled)
	assert.NoError(t, c.TakeGone(), "told once")
	select {
	case <-a.Wake():
		t.Fatal("a woken by another task's cancel")
	default:
	}
}
