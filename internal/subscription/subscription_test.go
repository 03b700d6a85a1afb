package subscription

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

func TestMailboxMergesWorkEvents(t *testing.T) {
	work := func(count int64, to string) Event {
		return Event{Event: store.Event{Kind: store.EventWork, Count: count, To: to}}
	}
	m := NewMailbox()
	m.Push(work(1, "a"))
	m.Push(work(2, "b"))
	assert.Equal(t, []Event{work(3, "a,b")}, m.Take(), "targets add up")
	m.Push(work(1, "a"))
	m.Push(work(1, ""))
	assert.Equal(t, []Event{work(2, "")}, m.Take(), "an untargeted event wakes everyone")
	m.Push(work(1, ""))
	m.Push(Event{Subscribed: true})
	m.Push(work(1, ""))
	assert.Len(t, m.Take(), 3, "a catch-up request is not merged away")
}

// BenchmarkMailbox is the hand-over from the Redis reader to the
// dispatcher: a push and, every few pushes, a take.
func BenchmarkMailbox(b *testing.B) {
	m := NewMailbox()
	e := Event{Event: store.Event{Kind: store.EventWork, Count: 1}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Push(e)
		if i++; i%4 == 0 {
			<-m.signal
			_ = m.Take()
		}
	}
}

// The dispatcher hands the session a request to catch up when the server
// confirms the subscription, then the queue's events in their order, and
// stops when the subscription ends.
func TestSubscriptionDispatchesItsQueuesEvents(t *testing.T) {
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	st := store.New(rdb, "subtest", false, false)
	ctx := context.Background()
	got := make(chan Event, 10)
	sub := New(ctx, st, "q", func(_ context.Context, e Event) { got <- e }, func() bool { return false })
	first := recv(t, got)
	assert.True(t, first.Subscribed, "a catch-up first")
	assert.False(t, first.Again, "the first confirmation")
	assert.True(t, sub.IsReady())
	assert.EqualValues(t, 1, sub.Confirmed())

	require.NoError(t, st.Publish(ctx, "q", store.WorkMessage(3)))
	e := recv(t, got)
	assert.Equal(t, store.EventWork, e.Kind)
	assert.EqualValues(t, 3, e.Count)

	stopped := sub.Stopped()
	sub.Unsubscribe(ctx)
	select {
	case <-stopped:
	default:
		t.Fatal("Unsubscribe returned before the dispatcher stopped")
	}
}

func recv(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return Event{}
	}
}
