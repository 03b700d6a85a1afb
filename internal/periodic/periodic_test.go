package periodic

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// every is a schedule of ticks aligned on multiples of its interval.
type every time.Duration

func (e every) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(e)).Add(time.Duration(e)).UTC()
}

// latestDue walks to the latest tick, jumping near now first.
func TestLatestDueJumpsToTheLatestTick(t *testing.T) {
	now := time.Date(2026, 3, 4, 10, 2, 30, 0, time.UTC)
	first := time.Date(2020, 1, 1, 0, 1, 0, 0, time.UTC)
	assert.Equal(t, time.Date(2026, 3, 4, 10, 2, 0, 0, time.UTC), latestDue(every(time.Minute), first, now))
	assert.Equal(t, first, latestDue(every(time.Minute), first, first.Add(30*time.Second)), "the first is the latest")
}

// A tick's identity rounds up to the millisecond.
func TestTickMsRoundsUp(t *testing.T) {
	at := time.UnixMilli(5000)
	assert.EqualValues(t, 5000, TickMs(at))
	assert.EqualValues(t, 5001, TickMs(at.Add(time.Microsecond)))
}

// A schedule enqueues its next tick when the clock reaches it, and tells
// the observer; its payload is made from the tick when Payload is set.
func TestScheduleEnqueuesItsTickWhenItComes(t *testing.T) {
	m := miniredis.RunT(t)
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	m.SetTime(start)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	clk := clock.NewFake(start)
	log := slog.New(slog.DiscardHandler)
	var mu sync.Mutex
	var told []string
	env := &Env{
		Clock:       clk,
		Redis:       &delayed.RedisClock{},
		Store:       store.New(rdb, "periodictest", false, false),
		Outage:      outage.New(log, clk, func(error) bool { return false }),
		Fail:        func(op, _ string, err error) error { return errors.Join(errors.New(op), err) },
		Log:         func() *slog.Logger { return log },
		TTL:         time.Minute,
		MaxTaskSize: 1 << 20,
		Enqueued: func(_ context.Context, queue, id string) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, queue+"/"+id)
		},
		Ticked: new(testsignal.Signal[time.Time]),
	}
	env.Ticked.Init(t)
	ctx := context.Background()
	p := New(env, "q", "hourly", every(time.Hour), nil, Options{Payload: func(tick time.Time) []byte { return []byte(tick.Format(time.Kitchen)) }})
	p.Start(ctx, start)
	defer p.Stop()

	require.NoError(t, clk.WaitTimers(ctx, 1))
	clk.Advance(time.Hour - time.Millisecond)
	m.SetTime(clk.Now())
	env.Ticked.RequireEmpty()
	clk.Advance(time.Millisecond)
	m.SetTime(clk.Now())
	require.Equal(t, start.Add(time.Hour), env.Ticked.WaitOrTimeout())
	n, err := env.Store.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	got, err := rdb.Do(ctx, rdb.B().Lrange().Key(env.Store.Keys().Queue("q").Waiting).Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "11:00AM", "the payload made from the tick")
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, told, 1)
}
