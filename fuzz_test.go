package worqr

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// Fuzz tests: `go test` runs their seeds (f.Add and testdata/fuzz); run
// one for real with, for example,
//
//	go test -run '^$' -fuzz '^FuzzRoundTrip$' -fuzztime 2m .
//
// With WORQR_TEST_REDIS set they run against that Redis instead of an
// embedded miniredis.

// fuzzMaxTask is the task size limit of the fuzzed client: small, so the
// fuzzer reaches it.
const fuzzMaxTask = 512

// fuzzSetup gives a fuzz target one client and one worker for all its
// inputs (each fuzzing process has its own).
func fuzzSetup(f *testing.F) (*Client, *Worker, *fenceLog) {
	addr := os.Getenv(envRedis)
	real := addr != ""
	if !real {
		m := miniredis.NewMiniRedis()
		require.NoError(f, m.Start())
		f.Cleanup(m.Close)
		addr = m.Addr()
	}
	opt := rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true}
	if !real {
		opt.AlwaysRESP2, opt.ForceSingleClient = true, true
	}
	rdb, err := rueidis.NewClient(opt)
	require.NoError(f, err)
	f.Cleanup(rdb.Close)
	prefix := "worqrfuzz-" + uuid.NewString()[:8]
	c, err := New(Options{Redis: rdb, Prefix: prefix, MaxTaskSize: fuzzMaxTask, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(f, err)
	fences := &fenceLog{}
	w, err := c.NewWorker(context.Background(), WorkerOptions{OnFenced: fences.add})
	require.NoError(f, err)
	f.Cleanup(func() {
		_ = c.Close(context.Background())
		if real {
			(&backend{addr: addr, prefix: prefix}).deleteKeys()
		}
	})
	return c, w, fences
}

// fenceLog records a worker's fencings, which no input may cause.
type fenceLog struct {
	mu     sync.Mutex
	causes []string
}

func (l *fenceLog) add(ev FenceEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.causes = append(l.causes, ev.Cause.Error())
}

func (l *fenceLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d fencings: %q", len(l.causes), l.causes)
}

func (l *fenceLog) any() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.causes) > 0
}

// FuzzRoundTrip sends a queue name and a payload through enqueue, dequeue
// and then finish, stop or cancel (op). Nothing may panic; invalid input
// must fail with its sentinel error; valid input must come back
// byte-identical at every step and leave nothing behind.
func FuzzRoundTrip(f *testing.F) {
	f.Add("q", []byte("task"), uint8(0))
	f.Add("q", []byte{}, uint8(1))
	f.Add("{q}", []byte("a:b:c"), uint8(2))
	f.Add("}{%7B%25%", []byte("\x00\xff\x00"), uint8(0))
	f.Add("ünï cödé 任务", []byte("w12"), uint8(1))
	f.Add("a:{r}:queues", []byte("c1:x"), uint8(2))
	f.Add("*?[]\\", []byte("d0"), uint8(2))
	f.Add("", []byte("x"), uint8(0))
	f.Add(string(make([]byte, MaxQueueNameLen)), []byte("max name"), uint8(1))
	f.Add(string(make([]byte, MaxQueueNameLen+1)), []byte("x"), uint8(0))
	f.Add("big", make([]byte, fuzzMaxTask), uint8(2))
	f.Add("too big", make([]byte, fuzzMaxTask+1), uint8(0))
	c, w, fences := fuzzSetup(f)

	f.Fuzz(func(t *testing.T, name string, payload []byte, op uint8) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Invalid input must be refused with its sentinel; then the input
		// is cut to size, so every input also makes a full round trip.
		if len(name) == 0 || len(name) > MaxQueueNameLen {
			require.ErrorIs(t, second(c.Enqueue(ctx, name, payload)), ErrInvalidQueueName)
			require.ErrorIs(t, w.StartWork(ctx, name, Events{}), ErrInvalidQueueName)
			_, err := c.Cancel(ctx, name, payload)
			require.ErrorIs(t, err, ErrInvalidQueueName)
			_, err = c.DeleteQueue(ctx, name)
			require.ErrorIs(t, err, ErrInvalidQueueName)
			_, err = w.Dequeue(ctx, name)
			require.ErrorIs(t, err, ErrInvalidQueueName)
			if name = name[:min(len(name), MaxQueueNameLen)]; name == "" {
				return
			}
		}
		if len(payload) > fuzzMaxTask {
			require.ErrorIs(t, second(c.Enqueue(ctx, name, payload)), ErrTaskTooLarge)
			_, err := c.Cancel(ctx, name, payload)
			require.ErrorIs(t, err, ErrTaskTooLarge)
			n, err := c.QueueLen(ctx, name)
			require.NoError(t, err)
			require.Zero(t, n, "a refused task is not queued")
			payload = payload[:fuzzMaxTask]
		}
		_, err := c.Enqueue(ctx, name, payload)
		require.NoError(t, err)
		// A failed input must not leave its queue to the next one (the
		// fuzzer minimises a failure by running more inputs here).
		t.Cleanup(func() {
			if t.Failed() {
				ctx := context.Background()
				_ = w.StopWork(ctx, name)
				_, _ = c.DeleteQueue(ctx, name)
			}
		})
		head, err := c.Peek(ctx, name)
		require.NoError(t, err)
		require.True(t, bytes.Equal(payload, head), "peek")

		cancelled := make(chan string, 1)
		require.NoError(t, w.StartWork(ctx, name, Events{Cancel: func(_ string, taskID string) { cancelled <- taskID }}))
		p, err := w.Dequeue(ctx, name)
		require.NoError(t, err)
		require.True(t, bytes.Equal(payload, p.Task()), "dequeued %q, enqueued %q", p.Task(), payload)
		require.Equal(t, name, p.Queue())

		switch op % 3 {
		case 0:
			require.NoError(t, p.Finish(ctx))
		case 1:
			require.NoError(t, p.Requeue(ctx))
			back, err := c.Range(ctx, name, 0, -1)
			require.NoError(t, err)
			require.Len(t, back, 1)
			require.True(t, bytes.Equal(payload, back[0]), "stopped")
			again, err := w.Dequeue(ctx, name)
			require.NoError(t, err)
			require.True(t, bytes.Equal(payload, again.Task()), "dequeued again")
			require.NoError(t, again.Finish(ctx))
		case 2:
			res, err := c.Cancel(ctx, name, payload)
			require.NoError(t, err)
			require.Equal(t, CancelResult{Marked: 1}, res)
			select {
			case got := <-cancelled:
				require.Equal(t, p.TaskID(), got, "cancel event carried %q", got)
			case <-ctx.Done():
				t.Fatal("no cancel event")
			}
			<-p.Done()
			require.ErrorIs(t, p.Err(), ErrTaskCancelled)
			require.ErrorIs(t, p.Requeue(ctx), ErrTaskCancelled)
		}
		n, err := c.QueueLen(ctx, name)
		require.NoError(t, err)
		require.Zero(t, n)
		procs, err := c.Processes(ctx, name)
		require.NoError(t, err)
		require.Empty(t, procs)
		// The check reads the name back out of the queue's keys.
		rep, err := c.Check(ctx, CheckOptions{})
		require.NoError(t, err)
		require.Zero(t, rep.Problems(), "%v; %v", rep, fences)
		// Starting and stopping work all the time must not make the
		// worker think itself dead (it did: see renew_race_test.go).
		require.False(t, fences.any(), "%v", fences)
		require.Equal(t, 1, rep.QueuesChecked)

		require.NoError(t, w.StopWork(ctx, name))
		dropped, err := c.DeleteQueue(ctx, name)
		require.NoError(t, err)
		require.Zero(t, dropped)
		qs, err := c.Queues(ctx)
		require.NoError(t, err)
		require.Empty(t, qs, "nothing left behind")
	})
}
