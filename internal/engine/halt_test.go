package engine

// The closer's Halt, which freezes a worker as tests make one: its life
// ends and its one-shot goroutines are waited for, and nothing else
// stops or is given back.

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/lifecycle"
)

// Halt ends the worker's life and returns only once the one-shot
// goroutines running then have returned; it leaves them open to more.
func TestCloserHaltWaitsForItsGoroutines(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		life, end := context.WithCancel(context.Background())
		defer end()
		k := &Closer{}
		k.Init(nil, nil, end)
		release := make(chan struct{})
		sawEnd := make(chan struct{})
		k.Go(func() {
			<-life.Done() // as a renewal on the worker's life ends with it
			close(sawEnd)
			<-release // and is still returning
		})
		halted := make(chan struct{})
		go func() {
			k.Halt()
			close(halted)
		}()
		synctest.Wait()
		assert.True(t, isClosed(sawEnd), "Halt did not end the worker's life")
		assert.False(t, isClosed(halted), "Halt returned before a one-shot goroutine did")
		close(release)
		synctest.Wait()
		assert.True(t, isClosed(halted), "Halt did not return once its goroutines had")

		// The goroutines are waited for, not closed: a halted worker
		// still starts them (they end at once on its ended life).
		ran := make(chan struct{})
		k.Go(func() { close(ran) })
		synctest.Wait()
		assert.True(t, isClosed(ran), "Halt closed the one-shot goroutines")
	})
}

// Halt stops nothing else: none of the host's components is stopped and
// the client is told nothing, the worker is neither draining nor closed,
// its sessions stay attached and serving, their processes running, and
// its tasks stay its own in Redis, where it stays registered. A Close
// after it still closes the worker.
func TestCloserHaltStopsNothingElse(t *testing.T) {
	t.Parallel()
	h, k, life, s, p, held := closing(t)
	ops := h.recordOps(nil)
	lease := s.Lease.View()

	k.Halt()
	require.Error(t, life.Err(), "the worker's life did not end")
	h.told.RequireEmpty()
	h.mu.Lock()
	assert.Equal(t, lifecycle.Serving, h.state.Phase(), "Halt moved the worker on")
	assert.Same(t, s, h.sessions["q"], "Halt detached the session")
	h.mu.Unlock()
	assert.Equal(t, lease, s.Lease.View(), "Halt changed the session's lease")
	assert.NoError(t, p.St.Err(), "Halt ended a process")
	h.env.Store.SetFault(nil)
	assert.Empty(t, ops(), "Halt wrote to Redis")
	assert.Len(t, h.held(t, "q", testID, held), 2, "Halt gave tasks back")

	require.NoError(t, k.Close(context.Background(), "close"))
	assert.Empty(t, h.held(t, "q", testID, held), "a Close after Halt gave nothing back")
}
