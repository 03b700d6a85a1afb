package worqr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/store"
)

// These tests break single calls through the store's fault seam, with no
// proxy and no second connection: the call is failed or held before it is
// sent, exactly where the test says.

var errInjected = errors.New("injected: connection reset")

// A renewal of one queue's lease that hangs fences that queue alone, and
// a rejoin's attempt that hangs there costs the worker nothing more; once
// the node answers again the worker takes a new lease there.
func TestFaultSeamHungRenewalFencesOneQueue(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	c.core.Store.RenewApart() // as on a Cluster, where each queue's node fails on its own
	var hang atomic.Bool
	gaveUp := make(chan struct{}, 1)
	c.core.Store.SetFault(func(ctx context.Context, op store.Op, queue string) error {
		if hang.Load() && queue == "a" {
			<-ctx.Done() // a node that never answers
			if op == store.OpRelease {
				select { // a rejoin's attempt gave up
				case gaveUp <- struct{}{}:
				default:
				}
			}
			return ctx.Err()
		}
		return nil
	})
	w, fences := fencingWorkerWith(t, c, lasting)
	require.NoError(t, w.StartWork(ctx, "a", Events{}))
	require.NoError(t, w.StartWork(ctx, "b", Events{}))
	require.NoError(t, second(c.Enqueue(ctx, "b", []byte("tb"))))
	require.NoError(t, second(c.Enqueue(ctx, "b", []byte("tb2"))))
	id := w.ID()

	hang.Store(true)
	ev := recv(t, fences, 10*time.Second, "queue a fenced")
	assert.Equal(t, "a", ev.Queue)
	assert.Equal(t, id, w.ID(), "the worker keeps its id")
	p, err := w.Dequeue(ctx, "b")
	require.NoError(t, err, "queue b is served as before")
	require.NoError(t, p.Finish(ctx))

	// A rejoin's attempt that hangs holds the registry's lock and the
	// queue's gate until its deadline (the TTL): the worker's renewals,
	// which wait on neither, keep the rest of the worker alive meanwhile.
	recv(t, gaveUp, 10*time.Second, "a rejoin's attempt hung to its deadline")
	assert.Equal(t, id, w.ID(), "the worker keeps its id")
	assert.Empty(t, fences, "no other fence")
	p, err = w.Dequeue(ctx, "b")
	require.NoError(t, err, "queue b is served as before")
	require.NoError(t, p.Finish(ctx))

	hang.Store(false)
	require.NoError(t, second(c.Enqueue(ctx, "a", []byte("ta"))))
	eventually(t, 15*time.Second, "queue a served again", func() bool {
		p, err := w.Dequeue(ctx, "a")
		if err != nil {
			return false
		}
		require.NoError(t, p.Finish(ctx))
		return true
	})
	assert.Equal(t, id, w.ID())
}

// An outcome write that fails on the connection, or that a server
// reloading its data after a restart refuses (LOADING), is sent again
// while the worker lives, and the task is finished once.
func TestFaultSeamFailedFinishIsRetried(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"connection", "loading"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			_, c, obs, ctx := observed(t)
			injected := errInjected
			if fault == "loading" {
				// The reply a restarting server gives, from the server.
				injected = c.core.Redis.Do(ctx, c.core.Redis.B().Eval().
					Script("return redis.error_reply('LOADING Redis is loading the dataset in memory')").
					Numkeys(0).Build()).Error()
				re, isReply := rueidis.IsRedisErr(injected)
				require.True(t, isReply, "%v", injected)
				require.True(t, strings.HasPrefix(re.Error(), "LOADING"), "%v", re)
				require.ErrorIs(t, c.core.Fail("finish", "q", injected), ErrUnavailable)
			}
			var failures atomic.Int32
			c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
				if op == store.OpFinish && failures.Add(1) <= 3 {
					return injected
				}
				return nil
			})
			w := newWorker(t, c, WorkerOptions{})
			ran := make(chan struct{}, 10)
			require.NoError(t, w.Handle(ctx, "q", func(context.Context, *Process) error {
				ran <- struct{}{}
				return nil
			}, HandleOptions{}))
			id, err := c.Enqueue(ctx, "q", []byte("x"))
			require.NoError(t, err)
			recv(t, ran, 5*time.Second, "handler ran")
			eventually(t, 10*time.Second, "finished", func() bool {
				procs, err := c.Processes(ctx, "q")
				return err == nil && len(procs) == 0
			})
			// The observer hears of the outcome after it is written.
			eventually(t, 5*time.Second, "outcome observed", func() bool { return len(obs.outcomes()[id]) > 0 })
			assert.EqualValues(t, 4, failures.Load(), "three failed writes, then one that went through")
			assert.Equal(t, []Outcome{OutcomeSucceeded}, obs.outcomes()[id])
			assert.Empty(t, waiting(t, c, "q"))
			select {
			case <-ran:
				t.Fatal("the task ran twice")
			default:
			}
		})
	}
}

// Error replies of a server that did not run the command and soon will
// are outages (ErrUnavailable); others, such as a script's own error,
// are not, wrapped (as the store names the script that failed) or not.
func TestTransientReplies(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	for msg, transient := range map[string]bool{
		"LOADING Redis is loading the dataset in memory":       true,
		"BUSY Redis is busy running a script":                  true,
		"MASTERDOWN Link with MASTER is down":                  true,
		"READONLY You can't write against a read only replica": true,
		"TRYAGAIN Multiple keys request during rehashing":      true,
		"CLUSTERDOWN The cluster is down":                      true,
		"ERR wrong number of arguments":                        false,
		"WRONGTYPE Operation against a key":                    false,
		"BUSYGROUP Consumer Group name already exists":         false,
	} {
		err := c.core.Redis.Do(ctx, c.core.Redis.B().Eval().Script("return redis.error_reply(ARGV[1])").
			Numkeys(0).Arg(msg).Build()).Error()
		_, isReply := rueidis.IsRedisErr(err)
		require.True(t, isReply, "%v", err)
		assert.Equal(t, transient, errors.Is(c.core.Fail("op", "q", err), ErrUnavailable), msg)
		wrapped := fmt.Errorf("wf_enqueued.lua: %w", err)
		assert.Equal(t, transient, errors.Is(c.core.Fail("op", "q", wrapped), ErrUnavailable), "wrapped: %s", msg)
	}
}

// A failed enqueue wraps ErrUnavailable and queues nothing; a failed
// dequeue leaves the task waiting.
func TestFaultSeamFailedCalls(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	var failing atomic.Value
	failing.Store(store.Op(""))
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == failing.Load().(store.Op) {
			return errInjected
		}
		return nil
	})
	failing.Store(store.OpEnqueue)
	_, err := c.Enqueue(ctx, "q", []byte("x"))
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, errInjected)
	assert.Empty(t, waiting(t, c, "q"))

	failing.Store(store.OpDequeue)
	require.NoError(t, second(c.Enqueue(ctx, "q", []byte("x"))))
	_, err = w.Dequeue(ctx, "q")
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.Equal(t, []string{"x"}, waiting(t, c, "q"), "nothing already queued is lost")
	failing.Store(store.Op(""))
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx))
}
