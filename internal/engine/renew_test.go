package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
	"github.com/worqr/worqr/internal/testsignal"
)

// A round renews the registry lease and, on a single Redis in the same
// script, the lease of each session that holds one; a fenced worker, or a
// keeper that left the beat, renews nothing.
func TestKeeperRenewal(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	var k Keeper
	w.env.TTL = time.Second
	k.Init(w, &w.env, nil)
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", w.clk.Now().Add(time.Second), &events)
	require.True(t, w.env.Store.JointRenewals())

	r, ok := k.Renewal()
	require.True(t, ok)
	assert.Equal(t, Renewal{ID: testID, Keepalive: store.Keepalive{Worker: testID, Queues: []string{"q"}}, With: []QueueRenewal{{S: s}}}, r)

	s.Lease.Lost()
	r, ok = k.Renewal()
	require.True(t, ok)
	assert.Empty(t, r.With, "a session that gave its lease up had it renewed")
	assert.Empty(t, r.Keepalive.Queues)

	k.Leave()
	_, ok = k.Renewal()
	assert.False(t, ok, "a keeper that left the beat renewed")
}

// An answer moves the registry lease's and the sessions' deadlines to
// TTL less the margin after the round was sent, and tells the reclaimer
// what it heard; a failed round moves nothing; a queue lease found gone
// fences the worker, unless the keeper has left the beat.
func TestKeeperRenewed(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	var k Keeper
	w.env.TTL = time.Second
	k.Init(w, &w.env, nil)
	t0 := w.clk.Now()
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", t0.Add(500*time.Millisecond), &events)
	w.Lock()
	k.Extend(t0)
	w.Unlock()
	r, ok := k.Renewal()
	require.True(t, ok)

	sent := t0.Add(200 * time.Millisecond)
	k.Renewed(r, sent, store.KeptAlive{}, errors.New("no answer"))
	at, _ := s.Lease.Deadline()
	assert.Equal(t, t0.Add(500*time.Millisecond), at, "a failed round moved a deadline")
	k.Renewed(r, sent, store.KeptAlive{QueueGone: []bool{false}, Workers: 3}, nil)
	assert.Equal(t, int64(3), w.heard.WaitOrTimeout(), "the reclaimer did not hear the answer")
	w.Lock()
	registry := k.At()
	w.Unlock()
	assert.Equal(t, k.Of(sent), registry)
	at, _ = s.Lease.Deadline()
	assert.Equal(t, k.Of(sent), at)

	k.Leave()
	k.Renewed(r, sent, store.KeptAlive{QueueGone: []bool{true}}, nil)
	assert.False(t, w.state.IsFenced(), "an answer after leaving the beat was taken in")
	var back Keeper
	back.Init(w, &w.env, nil)
	back.Renewed(r, sent, store.KeptAlive{QueueGone: []bool{true}}, nil)
	assert.True(t, w.state.IsFenced(), "a queue lease found gone did not fence the worker")
	assert.Equal(t, "", w.fenced.WaitOrTimeout().queue, "not the whole worker fenced")
}

// On a Cluster each queue lease is renewed apart from the registry lease,
// on a goroutine of the worker's tasks: the round carries the registry
// lease alone, the queue's answer moves the session's deadline to TTL
// less the margin after that renewal was sent, and a queue lease found
// gone fences the whole worker.
func TestKeeperRenewsQueuesApart(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	w.env.Store.RenewApart()
	var k Keeper
	w.env.TTL = testTTL
	k.Init(w, &w.env, nil)
	t0 := w.clk.Now()
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", t0.Add(500*time.Millisecond), &events)
	w.Lock()
	k.Extend(t0)
	w.Unlock()

	w.clk.Advance(100 * time.Millisecond)
	r, ok := k.Renewal()
	require.True(t, ok)
	assert.Equal(t, testID, r.ID)
	assert.Empty(t, r.With, "the queue lease rode with the registry lease")
	assert.Empty(t, r.Keepalive.Queues, "the queue lease rode with the registry lease")
	assert.Equal(t, "q", w.queueRenewed.WaitOrTimeout())
	at, ok := s.Lease.Deadline()
	assert.True(t, ok)
	assert.Equal(t, k.Of(t0.Add(100*time.Millisecond)), at, "the queue's answer did not move its deadline")
	w.Lock()
	assert.Equal(t, k.Of(t0), k.At(), "the queue's answer moved the registry lease's deadline")
	assert.False(t, w.state.IsFenced())
	w.Unlock()
	w.fenced.RequireEmpty()

	// The lease on the queue goes (as a peer's reclaim would take it).
	rel := w.env.Store.ReleaseOne(w.life, store.Release{Queue: "q", Worker: testID, Mode: store.ReleaseForce})
	require.NoError(t, rel.Err)
	_, ok = k.Renewal()
	require.True(t, ok)
	assert.Equal(t, "q", w.queueRenewed.WaitOrTimeout())
	told := w.fenced.WaitOrTimeout()
	assert.Equal(t, testID, told.id)
	assert.Equal(t, "", told.queue, "not the whole worker fenced")
	w.Lock()
	assert.True(t, w.state.IsFenced(), "a queue lease found gone did not fence the worker")
	w.Unlock()
}
