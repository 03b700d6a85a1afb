package worqrtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/worqrtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
	)
}

// backend is the Redis the suite runs on, as the root package's suite
// chooses it: the embedded one by default, a real one named by
// WORQR_TEST_REDIS, or a cluster by WORQR_TEST_CLUSTER.
func backend() worqrtest.Options {
	if seeds := os.Getenv("WORQR_TEST_CLUSTER"); seeds != "" {
		return worqrtest.Options{Addr: seeds}
	}
	return worqrtest.Options{Addr: os.Getenv("WORQR_TEST_REDIS")}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The test's client serves workers, and Wait, like any other.
func TestClientServesWorkers(t *testing.T) {
	t.Parallel()
	c, ctx := worqrtest.NewClient(t, backend()), ctxT(t)
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *worqr.Process) error {
		p.SetResult([]byte("ok"))
		return nil
	}, worqr.HandleOptions{}))
	id, err := c.Enqueue(ctx, "q", []byte("x"), worqr.Retain(time.Minute))
	require.NoError(t, err)
	out, err := c.Wait(ctx, "q", id)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(out.Result))
}

// Each test's client sees only its own tasks, and once the test ends
// its client is closed and its keys are gone.
func TestClientsAreTheTestsOwn(t *testing.T) {
	t.Parallel()
	opts := backend()
	opts.Client.Prefix = "own-" + fmt.Sprint(time.Now().UnixNano())
	var first *worqr.Client
	t.Run("first", func(t *testing.T) {
		first = worqrtest.NewClient(t, opts)
		_, err := first.Enqueue(ctxT(t), "q", []byte("mine"))
		require.NoError(t, err)
		second := worqrtest.NewClient(t, opts)
		assert.Empty(t, worqrtest.Enqueued(t, second, "q"))
		assert.Len(t, worqrtest.Enqueued(t, first, "q"), 1)
	})
	_, err := first.Enqueue(ctxT(t), "q", []byte("late"))
	assert.ErrorIs(t, err, worqr.ErrClientClosed)
	if opts.Addr != "" {
		rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: strings.Split(opts.Addr, ","), DisableCache: true})
		require.NoError(t, err)
		defer rdb.Close()
		for _, node := range rdb.Nodes() {
			keys, err := node.Do(ctxT(t), node.B().Keys().Pattern(opts.Client.Prefix+"-*").Build()).AsStrSlice()
			require.NoError(t, err)
			assert.Empty(t, keys, "the test's keys were not deleted")
		}
	}
}

func TestNewClientRefusesARedisInClientOptions(t *testing.T) {
	t.Parallel()
	ft := fatal(t, func(tb testing.TB) {
		worqrtest.NewClient(tb, worqrtest.Options{Client: worqr.Options{Addr: "127.0.0.1:6379"}})
	})
	assert.Contains(t, ft, "must not name a Redis")
}

// Enqueued lists waiting tasks in dequeue order, then delayed ones; the
// Require functions find tasks by payload or by decoded value, and say
// what the queue holds when they fail.
func TestEnqueuedAndRequire(t *testing.T) {
	t.Parallel()
	c, ctx := worqrtest.NewClient(t, backend()), ctxT(t)
	_, err := c.Enqueue(ctx, "q", []byte("b"))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "q", []byte("a"), worqr.AtFront())
	require.NoError(t, err)
	later, err := c.Enqueue(ctx, "q", []byte("later"), worqr.In(time.Hour))
	require.NoError(t, err)

	var payloads []string
	for _, task := range worqrtest.Enqueued(t, c, "q") {
		payloads = append(payloads, string(task.Payload))
	}
	assert.Equal(t, []string{"a", "b", "later"}, payloads)
	got := worqrtest.RequireEnqueued(t, c, "q", []byte("later"))
	assert.Equal(t, later, got.ID)
	assert.False(t, got.DueAt.IsZero())
	worqrtest.RequireNotEnqueued(t, c, "q", []byte("c"))

	msg := fatal(t, func(tb testing.TB) { worqrtest.RequireEnqueued(tb, c, "q", []byte("c")) })
	assert.Contains(t, msg, `queue "q" has no task "c"; it has 3: "a" "b" "later"`)
	msg = fatal(t, func(tb testing.TB) { worqrtest.RequireNotEnqueued(tb, c, "q", []byte("b")) })
	assert.Contains(t, msg, `has task`)
	msg = fatal(t, func(tb testing.TB) { worqrtest.RequireEnqueued(tb, c, "empty", []byte("c")) })
	assert.Contains(t, msg, "it has none")
}

type welcome struct {
	Email string `json:"email"`
	Tags  []string
}

func TestEnqueuedJSON(t *testing.T) {
	t.Parallel()
	c, ctx := worqrtest.NewClient(t, backend()), ctxT(t)
	ada := welcome{Email: "ada@example.com", Tags: []string{"x"}}
	_, err := worqr.EnqueueJSON(ctx, c, "welcome", ada)
	require.NoError(t, err)
	// The same value written by hand, fields in another order and spaced.
	_, err = c.Enqueue(ctx, "welcome", []byte(`{ "Tags": ["y"], "email": "grace@example.com" }`))
	require.NoError(t, err)

	worqrtest.RequireEnqueuedJSON(t, c, "welcome", ada)
	worqrtest.RequireEnqueuedJSON(t, c, "welcome", welcome{Email: "grace@example.com", Tags: []string{"y"}})
	worqrtest.RequireNotEnqueuedJSON(t, c, "welcome", welcome{Email: "ada@example.com"})
	assert.Equal(t, []welcome{ada, {Email: "grace@example.com", Tags: []string{"y"}}}, worqrtest.EnqueuedJSON[welcome](t, c, "welcome"))

	msg := fatal(t, func(tb testing.TB) { worqrtest.RequireEnqueuedJSON(tb, c, "welcome", welcome{Email: "x"}) })
	assert.Contains(t, msg, "worqrtest_test.welcome")
	msg = fatal(t, func(tb testing.TB) { worqrtest.RequireNotEnqueuedJSON(tb, c, "welcome", ada) })
	assert.Contains(t, msg, "ada@example.com")

	_, err = c.Enqueue(ctx, "welcome", []byte("not json"))
	require.NoError(t, err)
	worqrtest.RequireEnqueuedJSON(t, c, "welcome", ada) // a task of another shape does not match, nor fail
	msg = fatal(t, func(tb testing.TB) { worqrtest.EnqueuedJSON[welcome](tb, c, "welcome") })
	assert.Contains(t, msg, "does not decode into worqrtest_test.welcome")
}

// Run gives the handler the payload and the process the options
// describe, and returns its result and error, without Redis.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var seen *worqr.Process
	result, err := worqrtest.Run(ctx, func(_ context.Context, p *worqr.Process) error {
		seen = p
		p.SetResult(append([]byte("got "), p.Task()...))
		return nil
	}, []byte("x"), worqrtest.RunOptions{Queue: "q", TaskID: "t1", Attempt: 3, LastError: "boom", EnqueuedAt: at})
	require.NoError(t, err)
	assert.Equal(t, "got x", string(result))
	assert.Equal(t, "q", seen.Queue())
	assert.Equal(t, "t1", seen.TaskID())
	assert.Equal(t, 3, seen.Attempt())
	assert.Equal(t, "boom", seen.LastError())
	assert.Equal(t, at, seen.EnqueuedAt())
	assert.Equal(t, at, seen.DueAt(), "due at its enqueue unless told")
	due := at.Add(time.Hour)
	_, err = worqrtest.Run(ctx, func(_ context.Context, p *worqr.Process) error {
		seen = p
		return nil
	}, []byte("x"), worqrtest.RunOptions{EnqueuedAt: at, DueAt: due})
	require.NoError(t, err)
	assert.Equal(t, due, seen.DueAt())

	// Errors come back as returned; the process refuses Redis calls.
	result, err = worqrtest.Run(ctx, func(ctx context.Context, p *worqr.Process) error {
		if err := p.Finish(ctx); !errors.Is(err, worqr.ErrDetached) {
			return fmt.Errorf("finish gave %v", err)
		}
		return worqr.Permanent(errors.New("bad input"))
	}, nil, worqrtest.RunOptions{})
	assert.Nil(t, result)
	assert.True(t, worqr.IsPermanent(err))
	assert.EqualError(t, err, "bad input")

	// The context is the caller's: ending it is how a test cancels.
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(worqr.ErrTaskCancelled)
	_, err = worqrtest.Run(cctx, func(ctx context.Context, _ *worqr.Process) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}, nil, worqrtest.RunOptions{})
	assert.ErrorIs(t, err, worqr.ErrTaskCancelled)

	// Middleware wraps the handler, the first outermost.
	var order []string
	mw := func(name string) worqr.Middleware {
		return func(next worqr.Handler) worqr.Handler {
			return func(ctx context.Context, p *worqr.Process) error {
				order = append(order, name)
				return next(ctx, p)
			}
		}
	}
	_, err = worqrtest.Run(ctx, func(context.Context, *worqr.Process) error {
		order = append(order, "handler")
		return nil
	}, nil, worqrtest.RunOptions{Middleware: []worqr.Middleware{mw("outer"), nil, mw("inner")}})
	require.NoError(t, err)
	assert.Equal(t, []string{"outer", "inner", "handler"}, order)

	_, err = worqrtest.Run(ctx, nil, nil, worqrtest.RunOptions{})
	assert.ErrorIs(t, err, worqr.ErrInvalidOptions)
}

func TestRunJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var got welcome
	_, err := worqrtest.RunJSON(ctx, func(_ context.Context, _ *worqr.Process, w welcome) error {
		got = w
		return nil
	}, welcome{Email: "ada@example.com"}, worqrtest.RunOptions{})
	require.NoError(t, err)
	assert.Equal(t, welcome{Email: "ada@example.com"}, got)

	// A payload that does not decode fails as it would on a worker.
	_, err = worqrtest.Run(ctx, worqr.Typed[welcome](nil, func(context.Context, *worqr.Process, welcome) error {
		t.Error("called on a payload that does not decode")
		return nil
	}), []byte("{"), worqrtest.RunOptions{})
	assert.ErrorIs(t, err, worqr.ErrDecode)
	assert.True(t, worqr.IsPermanent(err))

	_, err = worqrtest.RunJSON(ctx, func(context.Context, *worqr.Process, chan int) error { return nil }, make(chan int), worqrtest.RunOptions{})
	assert.ErrorContains(t, err, "encode chan int")
	_, err = worqrtest.RunJSON[welcome](ctx, nil, welcome{}, worqrtest.RunOptions{})
	assert.ErrorIs(t, err, worqr.ErrInvalidOptions)
}

// recorder is a testing.TB whose Fatalf records the message and ends its
// goroutine, as testing's does; everything else goes to the real test.
type recorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Errorf(format string, args ...any) { r.Fatalf(format, args...) }

// fatal runs f with a recorder and returns the message it failed with;
// the test fails if f did not fail.
func fatal(t *testing.T, f func(testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.msg == "" {
		t.Fatal("expected a failure, got none")
	}
	return r.msg
}
