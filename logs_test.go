package worqr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// What worqr logs, counted line by line.

// logged is one record a logRecorder kept: its attributes flattened, a
// group's as "group.key".
type logged struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

func (l logged) String() string { return fmt.Sprintf("%v %q %v", l.level, l.msg, l.attrs) }

// logRecorder is a slog.Handler that keeps what is logged through it for
// the test to count, and shows it in the test's log as well.
type logRecorder struct {
	mu    *sync.Mutex
	recs  *[]logged
	attrs []slog.Attr
	next  slog.Handler
}

// recordLogs returns a logger whose records rec keeps.
func recordLogs(t *testing.T) (*slog.Logger, *logRecorder) {
	rec := &logRecorder{mu: new(sync.Mutex), recs: new([]logged), next: testLogger(t).Handler()}
	return slog.New(rec), rec
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(ctx context.Context, r slog.Record) error {
	l := logged{level: r.Level, msg: r.Message, attrs: make(map[string]slog.Value)}
	var add func(prefix string, a slog.Attr)
	add = func(prefix string, a slog.Attr) {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			for _, g := range v.Group() {
				add(prefix+a.Key+".", g)
			}
			return
		}
		l.attrs[prefix+a.Key] = v
	}
	for _, a := range h.attrs {
		add("", a)
	}
	r.Attrs(func(a slog.Attr) bool { add("", a); return true })
	h.mu.Lock()
	*h.recs = append(*h.recs, l)
	h.mu.Unlock()
	return h.next.Handle(ctx, r)
}

func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	c.next = h.next.WithAttrs(as)
	return &c
}

func (h *logRecorder) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}

// where returns the records kept that match.
func (h *logRecorder) where(match func(logged) bool) []logged {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logged
	for _, l := range *h.recs {
		if match(l) {
			out = append(out, l)
		}
	}
	return out
}

// from returns the records at level or above.
func (h *logRecorder) from(level slog.Level) []logged {
	return h.where(func(l logged) bool { return l.level >= level })
}

// saying returns the records whose message starts with prefix.
func (h *logRecorder) saying(prefix string) []logged {
	return h.where(func(l logged) bool { return strings.HasPrefix(l.msg, prefix) })
}

// loggedClient opens a client on rdb that logs to log.
func (b *backend) loggedClient(rdb rueidis.Client, log *slog.Logger) *Client {
	b.t.Helper()
	c, err := New(Options{Redis: rdb, Prefix: b.prefix, Logger: log})
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// An outage of Redis logs two lines, whatever the number of calls it
// failed: one WARN when the first fails, one INFO when Redis answers
// again, which counts the failed calls by kind. Handlers finishing,
// runtimes dequeuing and renewals all fail meanwhile, many times.
func TestAnOutageLogsOneLineWhenItStartsAndOneWhenItEnds(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	px := newProxy(t)
	log, rec := recordLogs(t)
	c := b.loggedClient(b.redisWith("", px), log)
	direct, ctx := b.client(), ctxT(t)
	// A TTL that outlasts the outage: an outage, not a fence.
	w := newWorker(t, c, WorkerOptions{TTL: time.Minute, RenewInterval: 100 * time.Millisecond})
	release := make(chan struct{})
	var started, done atomic.Int64
	require.NoError(t, w.Handle(ctx, "q", func(ctx context.Context, p *Process) error {
		started.Add(1)
		<-release
		done.Add(1)
		return nil
	}, HandleOptions{Concurrency: 2}))
	const n = 6
	enqueueNumbered(t, direct, "q", n)
	// Two handlers running, not two processes in Redis: a dequeue whose
	// reply is still on its way when Redis is cut off starts no handler,
	// and then no finish could fail.
	eventually(t, 10*time.Second, "two handlers hold tasks", func() bool {
		return started.Load() == 2
	})

	px.cut()
	close(release) // their finishes fail, and their slots free: dequeues fail too
	// A timeout says where the finishes stand: the handlers returned, the
	// outcomes being written, the finishes queued behind one in flight,
	// and the stacks of the goroutines writing them (a finish that neither
	// fails nor returns while Redis is cut off shows there).
	deadline := time.Now().Add(20 * time.Second)
	for f := c.core.Outage.Counts(); f["finish"] < 2 || f["dequeue"] < 2 || f["renewal"] < 2; f = c.core.Outage.Counts() {
		if time.Now().After(deadline) {
			busy, settling := runnerOf(w, "q").Counts()
			queued, _ := c.core.Finishes.Queued("q")
			stacks := goroutinesRunning(func(frame string) bool {
				return strings.Contains(frame, "engine.(*Settler") || strings.Contains(frame, "coalesce.") ||
					strings.Contains(frame, "proc.Persist") || strings.Contains(frame, "rueidis.")
			})
			t.Fatalf("not within 20s: finishes, dequeues and renewals failed, several times each: failed %v; "+
				"%d handlers returned, %d running, %d outcomes being written, %d finishes queued; writing:\n%s",
				f, done.Load(), busy, settling, queued, strings.Join(stacks, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	px.restore()
	eventually(t, 20*time.Second, "every task done", func() bool {
		procs, err := direct.Processes(ctx, "q")
		require.NoError(t, err)
		return done.Load() == n && len(procs) == 0 && len(waiting(t, direct, "q")) == 0
	})
	eventually(t, 10*time.Second, "the end of the outage logged", func() bool {
		return len(rec.saying("worqr: Redis back after ")) > 0
	})

	warns := rec.from(slog.LevelWarn)
	require.Len(t, warns, 1, "one WARN, when the outage began: %v", warns)
	assert.Equal(t, "worqr: Redis unreachable; retrying until it answers", warns[0].msg)
	assert.Contains(t, warns[0].attrs["err"].String(), "redis unavailable")
	back := rec.saying("worqr: Redis back after ")
	require.Len(t, back, 1, "one line when it ended: %v", back)
	assert.Equal(t, slog.LevelInfo, back[0].level)
	assert.GreaterOrEqual(t, back[0].attrs["failed.finish"].Int64(), int64(2), "%v", back[0])
	assert.GreaterOrEqual(t, back[0].attrs["failed.dequeue"].Int64(), int64(2), "%v", back[0])
	assert.GreaterOrEqual(t, back[0].attrs["failed.renewal"].Int64(), int64(2), "%v", back[0])
	assert.Positive(t, back[0].attrs["down"].Duration())
}

// A task a handler fails with Permanent is the handler's verdict, not a
// fault of the system: it is logged at WARN, never ERROR.
func TestPermanentFailureIsNotLoggedAsAnError(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	log, rec := recordLogs(t)
	c := b.loggedClient(b.redis(), log)
	ctx := ctxT(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		return Permanent(errors.New("bad input"))
	}, HandleOptions{}))
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	eventually(t, 10*time.Second, "dead-lettered", func() bool { return deadCount(t, c, "q") == 1 })

	assert.Empty(t, rec.from(slog.LevelError))
	lines := rec.saying("worqr: task failed permanently")
	require.Len(t, lines, 1)
	assert.Equal(t, slog.LevelWarn, lines[0].level)
	assert.Equal(t, "bad input", lines[0].attrs["err"].String())
	assert.Equal(t, ReasonPermanent, lines[0].attrs["reason"].String())
}

// A handler that panics on every attempt has its stack logged once, with
// its first panic, not again on each retry; every panic is still logged.
func TestPanicStackIsLoggedOncePerTask(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	log, rec := recordLogs(t)
	c := b.loggedClient(b.redis(), log)
	ctx := ctxT(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		panic("boom")
	}, HandleOptions{Retry: RetryPolicy{MaxAttempts: 3, Backoff: func(int, error) time.Duration { return 0 }}}))
	require.NoError(t, second(c.EnqueueBatch(ctx, "q", [][]byte{[]byte("a"), []byte("b")})))
	eventually(t, 10*time.Second, "both dead-lettered", func() bool { return deadCount(t, c, "q") == 2 })

	panics := rec.saying("worqr: handler panicked")
	require.Len(t, panics, 6, "every panic is logged")
	stacks := map[string]int{}
	for _, l := range panics {
		if strings.Contains(l.attrs["stack"].String(), "runtime/debug.Stack") {
			stacks[l.attrs["task"].String()]++
			assert.EqualValues(t, 1, l.attrs["attempt"].Int64(), "the stack comes with the first panic")
		}
	}
	assert.Len(t, stacks, 2, "a stack for each task")
	for task, n := range stacks {
		assert.Equal(t, 1, n, "task %s: one stack", task)
	}
}

// A fence in an outage does not read as data loss: the tasks go back to
// their queues. Outcomes the worker was still trying to write when it
// fenced itself are dropped, and one line says how many.
func TestAFenceLogsWhereTheTasksGo(t *testing.T) {
	t.Parallel()
	log, rec := recordLogs(t)
	k := setupTimed(t, func(o *Options) { o.Logger = log })
	c, ctx := k.c, k.ctx
	var renewalsFail atomic.Bool
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		switch {
		case op == store.OpFinish,
			renewalsFail.Load() && (op == store.OpRenew || op == store.OpRenewQueue):
			return errInjected
		}
		return nil
	})
	w, fences := fencingWorker(t, c)
	const n = 3
	ran := make(chan struct{}, n)
	require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
		select {
		case ran <- struct{}{}:
		default: // run again, after the fence
		}
		return nil
	}, HandleOptions{}))
	enqueueNumbered(t, c, "q", n)
	for range n {
		recv(t, ran, 10*time.Second, "handler ran")
	}
	// Every finish failed and is being tried again.
	eventually(t, 10*time.Second, "finishes failing", func() bool { return c.core.Outage.Counts()["finish"] >= n })
	renewalsFail.Store(true)
	k.idle(fast.TTL) // past the deadline its failed renewals leave where it was
	recv(t, fences, testsignal.Wait, "fenced")
	c.core.Store.SetFault(nil)

	fenced := rec.saying("worqr: worker fenced itself")
	require.Len(t, fenced, 1)
	assert.NotContains(t, fenced[0].msg, "lost")
	assert.Contains(t, fenced[0].msg, "go back to their queues")
	assert.EqualValues(t, n, fenced[0].attrs["processes"].Int64())
	dropped := rec.saying("worqr: outcomes not yet written")
	require.Len(t, dropped, 1, "one line for the dropped writes")
	assert.EqualValues(t, n, dropped[0].attrs["outcomes"].Int64())
}

// A failed attempt that is retried is logged once, at WARN, with the
// worker, queue, process and task, its error, its attempt and the delay
// before the next, each of its own kind.
func TestRetryIsLoggedWithItsAttributes(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	log, rec := recordLogs(t)
	c := b.loggedClient(b.redis(), log)
	ctx := ctxT(t)
	w := newWorker(t, c, WorkerOptions{})
	type start struct{ pid, task string }
	starts := make(chan start, 2)
	require.NoError(t, w.Handle(ctx, "q", func(_ context.Context, p *Process) error {
		starts <- start{p.ID(), p.TaskID()}
		if p.Attempt() == 1 {
			return errors.New("not yet")
		}
		return nil
	}, HandleOptions{Retry: RetryPolicy{Backoff: func(int, error) time.Duration { return 7 * time.Millisecond }}}))
	id, err := c.Enqueue(ctx, "q", []byte("x"))
	require.NoError(t, err)
	first := recv(t, starts, 10*time.Second, "the first attempt")
	recv(t, starts, 10*time.Second, "the retry")

	lines := rec.saying("worqr: task failed; retrying")
	require.Len(t, lines, 1)
	l := lines[0]
	assert.Equal(t, slog.LevelWarn, l.level)
	assert.Equal(t, w.ID(), l.attrs["worker"].String())
	assert.Equal(t, "q", l.attrs["queue"].String())
	assert.Equal(t, first.pid, l.attrs["process"].String())
	assert.Equal(t, id, l.attrs["task"].String())
	assert.Equal(t, first.task, id)
	assert.Equal(t, "not yet", l.attrs["err"].String())
	require.Equal(t, slog.KindInt64, l.attrs["attempt"].Kind(), "%v", l)
	assert.EqualValues(t, 1, l.attrs["attempt"].Int64())
	require.Equal(t, slog.KindDuration, l.attrs["after"].Kind(), "%v", l)
	assert.Equal(t, 7*time.Millisecond, l.attrs["after"].Duration())
}
