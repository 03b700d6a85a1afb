package worqr

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTracer gives each enqueue call the next of its traces and records
// what the calls' ends were told.
type fakeTracer struct {
	mu     sync.Mutex
	next   []string
	starts []EnqueueStart
	ends   [][]string
	errs   []error
}

func (f *fakeTracer) StartEnqueue(ctx context.Context, e EnqueueStart) (string, func([]string, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, e)
	trace := f.next[0]
	f.next = f.next[1:]
	return trace, func(ids []string, err error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.ends = append(f.ends, ids)
		f.errs = append(f.errs, err)
	}
}

func tracedClient(t *testing.T, b *backend, tr Tracer) *Client {
	t.Helper()
	c, err := New(Options{Redis: b.redis(), Prefix: b.prefix, Logger: testLogger(t), Tracer: tr})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

const (
	parentA = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	parentB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

// The trace context a Tracer gives an enqueue rides in the task's header
// and reaches every attempt's handler: after a retry through the delayed
// set, a requeue, a reclaim from a dead worker, and a requeue from the
// dead letters. The Tracer hears of each call's start and end.
func TestTraceRidesWithTheTaskThroughEveryReturn(t *testing.T) {
	t.Parallel()
	tr := &fakeTracer{next: []string{parentA, parentB, ""}}
	k := setupTimed(t, func(o *Options) { o.Tracer = tr })
	c, ctx := k.c, k.ctx
	k.beats()
	c.core.Signals.Looked.Init(t) // before its first worker joins

	id, err := c.Enqueue(ctx, "q", []byte("a"), Kind("k1"))
	require.NoError(t, err)
	ids, err := c.EnqueueBatch(ctx, "q", [][]byte{[]byte("b"), []byte("c")})
	require.NoError(t, err)
	none, err := c.Enqueue(ctx, "q", []byte("d"))
	require.NoError(t, err)
	assert.Equal(t, []string{none + ":d", ids[1] + ",T" + parentB + ":c", ids[0] + ",T" + parentB + ":b", id + ",kk1,T" + parentA + ":a"}, rawEntries(t, c, "q"))
	assert.Equal(t, []EnqueueStart{{Queue: "q", Kind: "k1", Tasks: 1}, {Queue: "q", Tasks: 2}, {Queue: "q", Tasks: 1}}, tr.starts)
	assert.Equal(t, [][]string{{id}, ids, {none}}, tr.ends)
	assert.Equal(t, []error{nil, nil, nil}, tr.errs)

	w := newWorker(t, c, fast)
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	take := func(want string) *Process {
		t.Helper()
		var p *Process
		eventually(t, 10*time.Second, "task "+want+" to come back", func() bool {
			var err error
			p, err = w.Dequeue(ctx, "q")
			if errors.Is(err, ErrNoTask) {
				return false
			}
			require.NoError(t, err)
			return true
		})
		require.Equal(t, want, p.TaskID())
		return p
	}
	p := take(id)
	assert.Equal(t, parentA, p.Trace())
	for _, want := range ids {
		q := take(want)
		assert.Equal(t, parentB, q.Trace())
		require.NoError(t, q.Finish(ctx))
	}
	q := take(none)
	assert.Empty(t, q.Trace())
	require.NoError(t, q.Finish(ctx))

	require.NoError(t, p.Retry(ctx, 10*time.Millisecond, errors.New("again")))
	k.run(fast.RenewInterval) // past the retry's due time
	p = take(id)              // promoted from the delayed set
	assert.Equal(t, parentA, p.Trace())
	assert.Equal(t, 2, p.Attempt())
	require.NoError(t, p.Requeue(ctx))
	p = take(id)
	assert.Equal(t, parentA, p.Trace())
	require.NoError(t, p.DeadLetter(ctx, errors.New("no")))
	ok, err := c.RequeueDeadLetter(ctx, "q", id)
	require.NoError(t, err)
	require.True(t, ok)
	p = take(id)
	assert.Equal(t, parentA, p.Trace())

	// Its holder dies: a peer reclaims it, and the trace goes on.
	crash(w)
	peer := newWorker(t, c, fast)
	require.NoError(t, peer.StartWork(ctx, "q", Events{}))
	k.run(fast.TTL + fast.RenewInterval)
	reclaimed(t, 1, c)
	back, err := peer.Dequeue(ctx, "q")
	require.NoError(t, err, "the dead worker's task is back")
	assert.Equal(t, id, back.TaskID())
	assert.Equal(t, parentA, back.Trace())
}

// A Tracer's trace context must fit a header: one that does not fails the
// enqueue, which queues nothing and tells the Tracer's end.
func TestATraceThatCannotRideFailsTheEnqueue(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	tr := &fakeTracer{next: []string{"00-a,b", string(make([]byte, MaxTraceLen+1))}}
	c := tracedClient(t, b, tr)
	ctx := ctxT(t)
	_, err := c.Enqueue(ctx, "q", []byte("a"))
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a")})
	require.ErrorIs(t, err, ErrInvalidOptions)
	assert.Empty(t, rawEntries(t, c, "q"))
	require.Len(t, tr.errs, 2)
	for _, err := range tr.errs {
		assert.ErrorIs(t, err, ErrInvalidOptions)
	}
}
