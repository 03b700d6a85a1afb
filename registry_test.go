package worqr

// The registry (registry.go) on its own: the slots a worker records per
// queue, as the queues it handles change, read back from Redis.

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// recordedSlots are the slots worker id has recorded, as Workers shows.
func recordedSlots(t *testing.T, c *Client, id string) []QueueSlots {
	t.Helper()
	ws, err := c.Workers(context.Background())
	require.NoError(t, err)
	for _, wi := range ws {
		if wi.ID == id {
			return wi.Slots
		}
	}
	t.Fatalf("worker %s not registered", id)
	return nil
}

// The slots recorded are those of the queues a runtime serves, sorted by
// queue; a queue served with StartWork alone has none. Handle records
// them as it starts, StopWork as it ends one; a write is only ever of the
// whole set.
func TestRegistryRecordsSlots(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	nop := func(context.Context, *Process) error { return nil }
	require.NoError(t, w.Handle(ctx, "b", nop, HandleOptions{Concurrency: 3}))
	require.NoError(t, w.StartWork(ctx, "c", Events{}))
	require.NoError(t, w.Handle(ctx, "a", nop, HandleOptions{Concurrency: 2}))

	w.core.Lock()
	qs := w.core.Served().Slots()
	w.core.Unlock()
	assert.Equal(t, []store.QueueSlots{{Queue: "a", Slots: 2}, {Queue: "b", Slots: 3}}, qs)
	assert.Equal(t, []QueueSlots{{Queue: "a", Slots: 2}, {Queue: "b", Slots: 3}}, recordedSlots(t, c, w.ID()))

	require.NoError(t, w.StopWork(ctx, "b"))
	assert.Equal(t, []QueueSlots{{Queue: "a", Slots: 2}}, recordedSlots(t, c, w.ID()))
	require.NoError(t, w.StopWork(ctx, "c"), "a queue without a runtime")
	assert.Equal(t, []QueueSlots{{Queue: "a", Slots: 2}}, recordedSlots(t, c, w.ID()))
}

// A worker's id tells when it joined by the client's clock, which the
// reclaimers read its age against (Redis's time): not by the system's,
// which a client on another clock does not run by.
func TestWorkerIDTellsTheClientsTime(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	k.idle(time.Hour) // an hour away from the system's time
	w := newWorker(t, k.c, fast)
	u, err := uuid.Parse(w.ID())
	require.NoError(t, err)
	require.EqualValues(t, 7, u.Version())
	ms := int64(u[0])<<40 | int64(u[1])<<32 | int64(u[2])<<24 | int64(u[3])<<16 | int64(u[4])<<8 | int64(u[5])
	assert.Equal(t, k.clk.Now().UnixMilli(), ms, "joined at the client's time")
}
