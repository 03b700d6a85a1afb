package worqr

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// welcome is a Kinded task type, shared by the producer and the worker.
type welcome struct {
	Email string `json:"email"`
}

func (welcome) Kind() string { return "email.welcome" }

// receipt is Kinded through its pointer.
type receipt struct {
	Order int `json:"order"`
}

func (*receipt) Kind() string { return "email.receipt" }

// rawEntries are queue q's waiting entries as stored, header and payload.
func rawEntries(t *testing.T, c *Client, queue string) []string {
	t.Helper()
	vals, err := c.core.Redis.Do(context.Background(), c.core.Redis.B().Lrange().Key(c.core.Store.Keys().Queue(queue).Waiting).Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(t, err)
	return vals
}

// A kind is stored in the task's header, shown by the listings and handed
// to the handler; a task without one stores no byte for it.
func TestKindIsStoredListedAndHandedOver(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	kinded, err := c.Enqueue(ctx, "q", []byte("a"), Kind("email.welcome"))
	require.NoError(t, err)
	plain, err := c.Enqueue(ctx, "q", []byte("b"))
	require.NoError(t, err)
	none, err := c.Enqueue(ctx, "q", []byte("c"), Kind(""))
	require.NoError(t, err)
	assert.Equal(t, []string{none + ":c", plain + ":b", kinded + ",kemail.welcome:a"}, rawEntries(t, c, "q"))

	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 3)
	assert.Equal(t, []string{"email.welcome", "", ""}, []string{tasks[0].Kind, tasks[1].Kind, tasks[2].Kind})

	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, "email.welcome", p.Kind())
	procs, err := c.Processes(ctx, "q")
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, "email.welcome", procs[0].TaskKind)
	p2, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	assert.Empty(t, p2.Kind())
}

// Kinds that could break the header, or are too long, are refused with
// ErrInvalidOptions, and nothing is enqueued.
func TestInvalidKindIsRefused(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	for _, kind := range []string{"a,b", "a:b", "a b", "é", "a\x00b", "a\nb", strings.Repeat("k", MaxKindLen+1)} {
		_, err := c.Enqueue(ctx, "q", []byte("x"), Kind(kind))
		assert.ErrorIs(t, err, ErrInvalidOptions, "kind %q", kind)
		_, err = c.EnqueueBatch(ctx, "q", [][]byte{[]byte("x")}, Kind(kind))
		assert.ErrorIs(t, err, ErrInvalidOptions, "kind %q", kind)
	}
	assert.Empty(t, rawEntries(t, c, "q"))
	_, err := c.Enqueue(ctx, "q", []byte("x"), Kind(strings.Repeat("k", MaxKindLen)+""), Kind("Aa0-_./"))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "q", []byte("x"), Kind(strings.Repeat("k", MaxKindLen)))
	require.NoError(t, err)
}

// A task retried keeps its kind; a dead letter keeps its task's kind
// beside its reason, and a dead letter requeued keeps its kind.
func TestKindSurvivesRetriesAndTheDeadLetters(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	id, err := c.Enqueue(ctx, "q", []byte("x"), Kind("report.daily"))
	require.NoError(t, err)
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, p.Retry(ctx, 0, errors.New("again")))
	p, err = w.Dequeue(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, "report.daily", p.Kind())
	assert.Equal(t, 2, p.Attempt())
	require.NoError(t, p.DeadLetter(ctx, WithReason("bad-input", errors.New("no"))))
	dead, err := c.DeadLetters(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, "report.daily", dead[0].Kind)
	assert.Equal(t, "bad-input", dead[0].Reason)

	ok, err := c.RequeueDeadLetter(ctx, "q", id)
	require.NoError(t, err)
	require.True(t, ok)
	p, err = w.Dequeue(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, "report.daily", p.Kind())
}

// Overlapping Enqueue calls with the same kind and no other option are
// joined into one script call, as plain ones are.
func TestOverlappingKindedEnqueuesAreJoined(t *testing.T) {
	_, c, ctx := setup(t)
	var calls atomic.Int64
	first, release := make(chan struct{}), make(chan struct{})
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpEnqueue && calls.Add(1) == 1 {
			close(first)
			<-release
		}
		return nil
	})
	const n = 10
	errs := make(chan error, n)
	go func() { errs <- second(c.Enqueue(ctx, "q", []byte("0"), Kind("k"))) }()
	<-first
	for range n - 1 {
		go func() { errs <- second(c.Enqueue(ctx, "q", []byte("x"), Kind("k"))) }()
	}
	eventually(t, 5*time.Second, "the other enqueues wait behind the first", func() bool {
		items, _ := c.core.KindEnqueues.Queued("k\x00q")
		return items == n-1
	})
	close(release)
	for range n {
		require.NoError(t, recv(t, errs, 5*time.Second, "enqueue returned"))
	}
	assert.EqualValues(t, 2, calls.Load(), "one call, then one for the rest")
	tasks, err := c.Tasks(ctx, "q", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, n)
	for _, task := range tasks {
		assert.Equal(t, "k", task.Kind)
	}
}

// A Router runs each task with its kind's handler, inside that kind's
// middleware (first outermost), and the tasks without a kind with the
// handler registered under "".
func TestRouterRoutesByKind(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	var mu sync.Mutex
	var trace []string
	log := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		trace = append(trace, s)
	}
	mw := func(name string) Middleware {
		return func(next Handler) Handler {
			return func(ctx context.Context, p *Process) error {
				log(name + ">")
				err := next(ctx, p)
				log("<" + name)
				return err
			}
		}
	}
	done := make(chan string, 3)
	r := &Router{}
	require.NoError(t, r.Handle("a", func(_ context.Context, p *Process) error {
		log("a:" + string(p.Task()))
		done <- "a"
		return nil
	}, mw("m1"), mw("m2")))
	require.NoError(t, r.Handle("b", func(_ context.Context, p *Process) error {
		log("b:" + string(p.Task()))
		done <- "b"
		return nil
	}))
	require.NoError(t, r.Handle("", func(_ context.Context, p *Process) error {
		log("none:" + string(p.Task()))
		done <- ""
		return nil
	}))
	assert.ElementsMatch(t, []string{"a", "b", ""}, r.Kinds())

	// One task at a time, so that the trace has their order.
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", r.Serve, HandleOptions{Concurrency: 1}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("1"), Kind("a"))))
	recv(t, done, 10*time.Second, "a ran")
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("2"), Kind("b"))))
	recv(t, done, 10*time.Second, "b ran")
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("3"))))
	recv(t, done, 10*time.Second, "the task without a kind ran")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"m1>", "m2>", "a:1", "<m2", "<m1", "b:2", "none:3"}, trace)
}

// A task whose kind the Router has no handler for goes to the dead letters
// on its first attempt, reason unroutable, its error naming the kind; so
// does a task without a kind when nothing handles those.
func TestUnroutableTaskIsDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	r := &Router{}
	ran := make(chan struct{}, 1)
	require.NoError(t, r.Handle("known", func(context.Context, *Process) error {
		ran <- struct{}{}
		return nil
	}))
	seen := make(chan error, 2)
	spy := func(next Handler) Handler {
		return func(ctx context.Context, p *Process) error {
			err := next(ctx, p)
			seen <- err
			return err
		}
	}
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", r.Serve, HandleOptions{Middleware: []Middleware{spy}, Retry: RetryPolicy{MaxAttempts: 5}}))

	id, err := c.Enqueue(ctx, "q", []byte("x"), Kind("email.welcom"), Retain(time.Minute))
	require.NoError(t, err)
	out, err := c.Wait(ctx, "q", id)
	require.NoError(t, err)
	assert.Equal(t, OutcomeDead, out.Status)
	assert.Equal(t, ReasonUnroutable, out.Reason)
	assert.Equal(t, 1, out.Attempts, "retried")
	assert.Contains(t, out.Error, `"email.welcom"`)
	herr := recv(t, seen, 10*time.Second, "the router's error")
	assert.ErrorIs(t, herr, ErrUnroutable)
	assert.True(t, IsPermanent(herr))

	id, err = c.Enqueue(ctx, "q", []byte("y"), Retain(time.Minute))
	require.NoError(t, err)
	out, err = c.Wait(ctx, "q", id)
	require.NoError(t, err)
	assert.Equal(t, OutcomeDead, out.Status)
	assert.Equal(t, ReasonUnroutable, out.Reason)
	assert.Equal(t, 1, out.Attempts, "retried")
	assert.Contains(t, out.Error, "none")

	dead, err := c.DeadLetters(ctx, "q", 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 2)
	assert.Equal(t, ReasonUnroutable, dead[1].Reason)
	assert.Equal(t, "email.welcom", dead[1].Kind)
	assert.Equal(t, `no handler for the task's kind: "email.welcom"`, dead[1].Error)
	assert.Empty(t, ran, "the known kind's handler ran")
}

// A Kinded type ties producer and consumer to one kind: EnqueueJSON gives
// the task the type's kind, and RouteJSON registers its handler under it,
// for value and pointer types alike.
func TestKindedTypesRoundTrip(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	r := &Router{}
	welcomes := make(chan welcome, 1)
	receipts := make(chan int, 1)
	require.NoError(t, RouteJSON(r, func(_ context.Context, p *Process, v welcome) error {
		assert.Equal(t, "email.welcome", p.Kind())
		welcomes <- v
		return nil
	}))
	require.NoError(t, RouteJSON(r, func(_ context.Context, _ *Process, v *receipt) error {
		receipts <- v.Order
		return nil
	}))
	assert.ElementsMatch(t, []string{"email.welcome", "email.receipt"}, r.Kinds())
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "mail", r.Serve, HandleOptions{}))

	require.NoError(t, second(EnqueueJSON(ctx, c, "mail", welcome{Email: "ada@example.com"})))
	assert.Equal(t, welcome{Email: "ada@example.com"}, recv(t, welcomes, 10*time.Second, "the welcome"))
	require.NoError(t, second(EnqueueJSON(ctx, c, "mail", &receipt{Order: 7})))
	assert.Equal(t, 7, recv(t, receipts, 10*time.Second, "the receipt"))

	// A type that is not Kinded enqueues without a kind, as before.
	id, err := EnqueueJSON(ctx, c, "other", signup{Email: "x"})
	require.NoError(t, err)
	tasks, err := c.Tasks(ctx, "other", 0, -1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, id, tasks[0].ID)
	assert.Empty(t, tasks[0].Kind)
}

// Registrations that cannot work are refused with ErrInvalidOptions.
func TestRouterRefusesBadRoutes(t *testing.T) {
	t.Parallel()
	r := &Router{}
	ok := func(context.Context, *Process) error { return nil }
	require.NoError(t, r.Handle("a", ok))
	assert.ErrorIs(t, r.Handle("a", ok), ErrInvalidOptions, "a kind twice")
	assert.ErrorIs(t, r.Handle("a:b", ok), ErrInvalidOptions, "an invalid kind")
	assert.ErrorIs(t, r.Handle("b", nil), ErrInvalidOptions, "a nil handler")
	assert.ErrorIs(t, RouteJSON[welcome](r, nil), ErrInvalidOptions, "a nil typed handler")
	assert.ErrorIs(t, RouteJSON(r, func(context.Context, *Process, emptyKind) error { return nil }), ErrInvalidOptions, "an empty kind")
	assert.ElementsMatch(t, []string{"a"}, r.Kinds())
}

type emptyKind struct{}

func (emptyKind) Kind() string { return "" }

// A Router dispatches a detached process by its kind, so handlers can be
// unit-tested behind it.
func TestRouterServesDetachedProcesses(t *testing.T) {
	t.Parallel()
	r := &Router{}
	require.NoError(t, RouteJSON(r, func(_ context.Context, _ *Process, v welcome) error {
		if v.Email == "" {
			return Permanent(errors.New("no email"))
		}
		return nil
	}))
	ctx := context.Background()
	assert.NoError(t, r.Serve(ctx, NewDetachedProcess([]byte(`{"email":"a@b"}`), DetachedOptions{Kind: "email.welcome"})))
	err := r.Serve(ctx, NewDetachedProcess([]byte(`{}`), DetachedOptions{Kind: "email.other"}))
	assert.ErrorIs(t, err, ErrUnroutable)
	assert.Equal(t, ReasonUnroutable, ReasonOf(err))
}
