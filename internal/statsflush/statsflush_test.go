package statsflush

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/store"
)

func recv(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("not within 5s: %s", what)
	}
}

// The flusher's run lasts while counts are pending: the first count
// starts it, it writes them when the queue has been idle long enough (on
// the store's clock, here a fake one) and stops by itself; the next count
// starts another, and Close stops the one going, which writes nothing
// more.
func TestFlusherRunsWhileCountsArePending(t *testing.T) {
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	ctx := context.Background()
	clk := clock.NewFake(time.Now())
	s := store.New(rdb, "flushtest", false, true)
	s.SetClock(clk)
	s.SetStatsTiming(time.Second, time.Second)
	f := New(s, slog.New(slog.DiscardHandler), clk)
	t.Cleanup(f.Close)
	stats := s.Keys().Queue("q").Stats
	written := func() bool { return m.Exists(stats) }

	started := f.Started()
	_, err = s.Enqueue(ctx, "q", [][]byte{[]byte("1")}, store.EnqueueArgs{})
	require.NoError(t, err)
	recv(t, started, "a count started a run")
	stopped := f.Stopped()
	require.NoError(t, clk.WaitTimers(ctx, 1), "the run waits for the queue to go idle")
	assert.False(t, written(), "nothing written before the queue is idle")
	clk.Advance(2 * time.Second)
	recv(t, stopped, "the run stopped by itself, the counts written")
	assert.True(t, written())

	m.Del(stats)
	started = f.Started()
	_, err = s.Enqueue(ctx, "q", [][]byte{[]byte("2")}, store.EnqueueArgs{})
	require.NoError(t, err)
	recv(t, started, "the next count started another run")
	stopped = f.Stopped()
	require.NoError(t, clk.WaitTimers(ctx, 1))
	f.Close()
	recv(t, stopped, "Close stopped the run")
	assert.False(t, written(), "the counts stay held: the client's Close writes them")
}
