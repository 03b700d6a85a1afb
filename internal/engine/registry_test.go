package engine

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// A registry entry registers a fresh id that tells the client's time,
// records the queues joined and the handler slots; a registry lease
// found gone when joining fences the worker, and a slots record for a
// worker whose lease is gone is not worth a warning.
func TestRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFakeWorker(t, testID) // for its store and clock
	var fenced []string
	var served []string
	var logs bytes.Buffer
	slots := []store.QueueSlots{{Queue: "q", Slots: 3}}
	var g Registry
	g.Init(&RegistryEnv{
		Clock:  w.clk,
		Store:  w.env.Store,
		Fail:   w.env.Fail,
		TTL:    time.Minute,
		Fence:  func(id string, _ error) { fenced = append(fenced, id) },
		Served: func(_ context.Context, queue string) { served = append(served, queue) },
		Slots:  func() []store.QueueSlots { return slots },
		Log:    func() *slog.Logger { return slog.New(slog.NewTextHandler(&logs, nil)) },
	})

	id, sent, err := g.Register(ctx)
	require.NoError(t, err)
	assert.Equal(t, w.clk.Now(), sent)
	u, err := uuid.Parse(id)
	require.NoError(t, err)
	assert.EqualValues(t, 7, u.Version())
	ms := int64(u[0])<<40 | int64(u[1])<<32 | int64(u[2])<<24 | int64(u[3])<<16 | int64(u[4])<<8 | int64(u[5])
	assert.Equal(t, w.clk.Now().UnixMilli(), ms, "the id does not tell the client's time")

	g.Lock()
	require.NoError(t, g.Join(ctx, id, "q"))
	g.RecordSlots(ctx, id)
	g.Unlock()
	qs, err := w.env.Store.WorkerQueues(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{"q"}, qs)
	assert.Equal(t, []string{"q"}, served, "the workflow notices were not told the queue is served")
	live, err := w.env.Store.LiveWorkers(ctx)
	require.NoError(t, err)
	var recorded []store.QueueSlots
	for _, l := range live {
		if l.ID == id {
			recorded = l.Slots
		}
	}
	assert.Equal(t, slots, recorded)
	assert.Empty(t, fenced)

	err = g.Join(ctx, staleID, "q")
	assert.ErrorIs(t, err, errs.ErrWorkerFenced)
	assert.Equal(t, []string{staleID}, fenced, "a registry lease found gone did not fence the worker")
	g.RecordSlots(ctx, staleID)
	assert.Empty(t, logs.String(), "a slots record for a lease gone was warned of")
}
