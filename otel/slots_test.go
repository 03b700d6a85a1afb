package worqrotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/worqr/worqr"
	worqrotel "github.com/worqr/worqr/otel"
)

// worqr.handler.slots: each pool's busy and free slots, exactly, while
// handlers are held; the pools of one name of the program's workers
// summed; past MaxPools, pools are OtherQueue.
func TestSlotMetricsReportSaturation(t *testing.T) {
	t.Parallel()
	c := clientOn(t, redisOn(t, backend(t)), nil)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	reg, err := worqrotel.RegisterSlotMetrics(c, worqrotel.SlotMetricsOptions{MeterProvider: mp, MaxPools: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Unregister() })
	ctx := context.Background()
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	hold := func(ctx context.Context, p *worqr.Process) error {
		started <- struct{}{}
		<-release
		return nil
	}
	slots := func(pool, state string) int64 {
		return sum(t, collect(t, reader), "worqr.handler.slots", worqrotel.PoolKey.String(pool), worqrotel.SlotStateKey.String(state))
	}

	w1 := newWorker(t, c, worqr.WorkerOptions{})
	require.NoError(t, w1.Handle(ctx, "a", hold, worqr.HandleOptions{Concurrency: 3}))
	require.NoError(t, w1.HandleQueues(ctx, []worqr.QueueSpec{{Queue: "b", Handler: hold}, {Queue: "c", Handler: hold}}, worqr.PoolOptions{Concurrency: 4}))
	assert.Equal(t, int64(3), slots("a", worqrotel.SlotFree))
	assert.Equal(t, int64(4), slots("b,c", worqrotel.SlotFree))

	// A second worker of the program: its pool "a" adds to the first's,
	// its pool "d" is past the bound.
	w2 := newWorker(t, c, worqr.WorkerOptions{})
	require.NoError(t, w2.Handle(ctx, "a", hold, worqr.HandleOptions{Concurrency: 2}))
	require.NoError(t, w2.Handle(ctx, "d", hold, worqr.HandleOptions{Concurrency: 1}))
	for _, q := range []string{"a", "a", "a", "b", "c", "d"} {
		_, err := c.Enqueue(ctx, q, []byte("t"))
		require.NoError(t, err)
	}
	for range 6 {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("the handlers did not start")
		}
	}
	got := map[string]int64{}
	for _, pool := range []string{"a", "b,c", worqrotel.OtherQueue} {
		for _, state := range []string{worqrotel.SlotBusy, worqrotel.SlotFree, worqrotel.SlotHeld} {
			got[pool+" "+state] = slots(pool, state)
		}
	}
	assert.Equal(t, map[string]int64{
		"a busy": 3, "a free": 2, "a held": 0,
		"b,c busy": 2, "b,c free": 2, "b,c held": 0,
		"(other) busy": 1, "(other) free": 0, "(other) held": 0,
	}, got)
	assert.Equal(t, int64(-1), slots("d", worqrotel.SlotBusy), "d is past the bound")
	close(release)
	require.NoError(t, w1.Shutdown(ctx))
	require.NoError(t, w2.Shutdown(ctx))
}
