package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// The keeper's loop registers the worker again once a fence wakes it.
func TestKeeperLoopRegistersAFencedWorkerAgain(t *testing.T) {
	t.Parallel()
	w := newFakeWorker(t, testID)
	var g Registry
	var k Keeper
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
