package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
	"github.com/worqr/worqr/internal/testsignal"
)

// A fenced worker registers again under a new id, takes a lease on each
// queue it serves, serves them until the new registry lease's deadline
// (the timer armed again) and looks for work at once; a closed worker
// does not.
func TestKeeperReregisterOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFakeWorker(t, testID)
	k := newReregisteringKeeper(w)
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", w.clk.Now().Add(time.Second), &events)
	w.Lock()
	k.Extend(w.clk.Now())
	w.Unlock()
	k.Fence(testID, errTestCause)
	w.fenced.WaitOrTimeout()
	<-k.kick
	require.Zero(t, w.clk.Timers())

	ok, err := k.ReregisterOnce(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	w.Lock()
	id, fenced := w.state.ID(), w.state.IsFenced()
	w.Unlock()
	assert.NotEqual(t, testID, id, "registered again under the fenced id")
	assert.False(t, fenced)
	assert.Equal(t, id, w.registered.WaitOrTimeout())
	qs, err := w.env.Store.WorkerQueues(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{"q"}, qs, "the queue was not joined under the new id")
	at, serving := s.Lease.Deadline()
	assert.True(t, serving)
	assert.Equal(t, k.Of(w.clk.Now()), at, "the queue lease does not derive from the new registry lease")
	assert.Equal(t, 1, w.clk.Timers(), "the deadline timer was not armed again")
	assert.True(t, lookedForWork(&events), "the session did not look for work")

	k.Fence(id, errTestCause)
	w.Lock()
	w.state.ToClosed()
	w.Unlock()
	ok, err = k.ReregisterOnce(ctx)
	assert.False(t, ok)
	assert.ErrorIs(t, err, errs.ErrWorkerClosed, "a closed worker registered again")
}

// The keeper's loop registers the worker again once a fence wakes it.
func TestKeeperLoopRegistersAFencedWorkerAgain(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	k := newReregisteringKeeper(w)
	require.NoError(t, k.loop.Start(w.life))
	t.Cleanup(k.loop.Stop)

	k.Fence(testID, errTestCause)
	id := w.registered.WaitOrTimeout()
	assert.NotEqual(t, testID, id)
	w.Lock()
	defer w.Unlock()
	assert.Equal(t, id, w.state.ID())
	assert.False(t, w.state.IsFenced())
}

// newReregisteringKeeper is a keeper of w's leases (a TTL of a second)
// whose registry entry registers it again, as a worker's does.
func newReregisteringKeeper(w *fakeWorker) *Keeper {
	var g Registry
	k := new(Keeper)
	g.Init(&RegistryEnv{
		Clock:  w.clk,
		Store:  w.env.Store,
		Fail:   w.env.Fail,
		TTL:    time.Minute,
		Fence:  k.Fence,
		Served: func(context.Context, string) {},
		Slots:  func() []store.QueueSlots { return nil },
		Log:    w.env.logger,
	})
	w.env.TTL = time.Second
	k.Init(w, &w.env, &g)
	return k
}
