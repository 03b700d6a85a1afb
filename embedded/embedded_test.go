package embedded_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/embedded"
)

// TestMain fails the run if any goroutine outlives the tests (the same
// rule, and the same two rueidis timers excused, as the root package's).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
	)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func start(t *testing.T, opts embedded.Options) *embedded.Redis {
	t.Helper()
	r, err := embedded.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// The client Start returns serves every flow that needs pub/sub: a
// handler woken by an enqueue, and Wait on the task's outcome.
func TestStartGivesAWorkingClient(t *testing.T) {
	t.Parallel()
	r := start(t, embedded.Options{Client: worqr.Options{Prefix: "app", Logger: quiet()}})
	c, ctx := r.Client(), ctxT(t)
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *worqr.Process) error {
		p.SetResult(append([]byte("did "), p.Task()...))
		return nil
	}, worqr.HandleOptions{}))
	id, err := c.Enqueue(ctx, "q", []byte("it"), worqr.Retain(time.Minute))
	require.NoError(t, err)
	out, err := c.Wait(ctx, "q", id)
	require.NoError(t, err)
	assert.Equal(t, worqr.OutcomeSucceeded, out.Status)
	assert.Equal(t, "did it", string(out.Result))
	require.NoError(t, w.Shutdown(ctx))
}

// Addr is a Redis that worqr.New joins; NewClient's clients share the
// data under the same prefix and not under another; Close closes them all.
func TestAddrAndNewClient(t *testing.T) {
	t.Parallel()
	r := start(t, embedded.Options{Addr: "127.0.0.1:0", Client: worqr.Options{Logger: quiet()}})
	ctx := ctxT(t)
	_, err := r.Client().Enqueue(ctx, "q", []byte("one"))
	require.NoError(t, err)

	joined, err := worqr.New(worqr.Options{Addr: r.Addr(), Logger: quiet()})
	require.NoError(t, err)
	defer joined.Close(ctx)
	n, err := joined.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)

	same, err := r.NewClient(worqr.Options{Logger: quiet()})
	require.NoError(t, err)
	other, err := r.NewClient(worqr.Options{Prefix: "other", Logger: quiet()})
	require.NoError(t, err)
	n, err = same.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	n, err = other.QueueLen(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 0, n)

	require.NoError(t, r.Close(ctx))
	for _, c := range []*worqr.Client{r.Client(), same, other} {
		_, err := c.Enqueue(ctx, "q", []byte("late"))
		assert.ErrorIs(t, err, worqr.ErrClientClosed)
	}
	require.NoError(t, r.Close(ctx), "a second Close")
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = joined.QueueLen(short, "q") // rueidis retries reads until ctx ends
	assert.Error(t, err, "the Redis is gone")
}

// The whole lease cycle works on the embedded Redis: a worker cut off
// from it while it holds a task fences itself, and a live worker
// reclaims the task within TTL and a check interval.
func TestLeasesExpire(t *testing.T) {
	t.Parallel()
	r := start(t, embedded.Options{Client: worqr.Options{Logger: quiet()}})
	ctx := ctxT(t)
	// A lease of 3 s: a worker stalled a second on a loaded machine keeps
	// it, and the reclaim still comes within seconds.
	leased := worqr.WorkerOptions{TTL: 3 * time.Second, RenewInterval: 250 * time.Millisecond}

	// The doomed worker runs on a connection of its own, which the test
	// cuts.
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{r.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true,
	})
	require.NoError(t, err)
	doomed, err := worqr.New(worqr.Options{Redis: rdb, Logger: quiet()})
	require.NoError(t, err)
	defer doomed.Close(ctx)
	w1, err := doomed.NewWorker(ctx, leased)
	require.NoError(t, err)
	require.NoError(t, w1.StartWork(ctx, "q", worqr.Events{}))
	_, err = r.Client().Enqueue(ctx, "q", []byte("survivor"))
	require.NoError(t, err)
	p, err := w1.Dequeue(ctx, "q")
	require.NoError(t, err)
	rdb.Close()
	<-p.Done() // the doomed worker fences itself

	got := make(chan string, 1)
	w2, err := r.Client().NewWorker(ctx, leased)
	require.NoError(t, err)
	require.NoError(t, w2.Handle(ctx, "q", func(_ context.Context, p *worqr.Process) error {
		got <- string(p.Task())
		return nil
	}, worqr.HandleOptions{}))
	select {
	case task := <-got:
		assert.Equal(t, "survivor", task)
	case <-time.After(10 * time.Second):
		t.Fatal("the dead worker's task was not reclaimed within 10 s")
	}
	require.NoError(t, w2.Shutdown(ctx))
}

func TestOptionsNamingARedisAreRefused(t *testing.T) {
	t.Parallel()
	_, err := embedded.Start(embedded.Options{Client: worqr.Options{Addr: "127.0.0.1:6379"}})
	assert.ErrorIs(t, err, worqr.ErrInvalidOptions)
	r := start(t, embedded.Options{Client: worqr.Options{Logger: quiet()}})
	_, err = r.NewClient(worqr.Options{Addr: "127.0.0.1:6379"})
	assert.ErrorIs(t, err, worqr.ErrInvalidOptions)
	_, err = embedded.Start(embedded.Options{Addr: r.Addr()}) // taken
	assert.Error(t, err)
	_, err = embedded.Start(embedded.Options{Client: worqr.Options{Prefix: "{bad}"}})
	assert.ErrorIs(t, err, worqr.ErrInvalidOptions)
}
