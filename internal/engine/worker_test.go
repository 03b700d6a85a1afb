package engine

// A worker for the runtime's tests: the root's side of engine.Worker,
// with a fake clock, the sessions a test serves, and processes whose host
// tells the test how they ended.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
	"github.com/worqr/worqr/internal/testsignal"
)

// errRefused is what testWorker.Validate says while refusing calls.
var errRefused = errors.New("refused (test)")

type testWorker struct {
	clk   *clock.Fake
	redis delayed.RedisClock
	env   Env
	out   *outage.Outage
	life  context.Context
	logs  *syncBuffer

	mu       sync.Mutex
	state    lifecycle.Worker
	sessions map[string]*Session
	runtimes map[string]*Runtime
	// refuse makes Validate fail every call, so that no outcome write
	// reaches Redis.
	refuse error

	// started tells the test of each process the observer was told of;
	// ended of how each ended.
	started testsignal.Signal[string]
	ended   testsignal.Signal[Outcome]
}

// newTestWorker is a worker registered as testID, serving nothing, its
// store on a miniredis of its own.
func newTestWorker(t *testing.T) *testWorker {
	t.Helper()
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	w := &testWorker{
		clk: clock.NewFake(time.Now()), life: t.Context(), logs: &syncBuffer{},
		sessions: make(map[string]*Session), runtimes: make(map[string]*Runtime),
	}
	log := slog.New(slog.NewTextHandler(w.logs, nil))
	w.out = outage.New(log, w.clk, func(error) bool { return false })
	w.state.ToRegistered(testID)
	w.env = Env{
		Clock: w.clk, Store: store.New(rdb, "enginetest", false, false), Log: log, Writer: w,
		WorkerID: func() string { return testID },
		Validate: func(ctx context.Context, op string) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.refuse
		},
		Fail:         func(op, _ string, err error) error { return errors.Join(errors.New(op), err) },
		TTL:          time.Minute,
		MaxAttempts:  25,
		UnsurePasses: 3,
	}
	w.started.Init(t)
	w.ended.Init(t)
	return w
}

// serve makes a session of queue, served by r (nil: by the application).
func (w *testWorker) serve(queue string, r *Runtime) *Session {
	s := &Session{}
	s.Init(nil, queue, Events{}, time.Time{}, nil)
	s.state = lifecycle.SessionServing
	s.Sub = new(subscription.Subscription) // never ready: a dequeue does not park
	w.mu.Lock()
	w.sessions[queue], w.runtimes[queue] = s, r
	w.mu.Unlock()
	return s
}

func (w *testWorker) Clock() clock.Clock                             { return w.clk }
func (w *testWorker) RedisClock() *delayed.RedisClock                { return &w.redis }
func (w *testWorker) Env() *Env                                      { return &w.env }
func (w *testWorker) Lock()                                          { w.mu.Lock() }
func (w *testWorker) Unlock()                                        { w.mu.Unlock() }
func (w *testWorker) StateLocked() *lifecycle.Worker                 { return &w.state }
func (w *testWorker) Started(_ context.Context, p *Proc)             { w.started.Signal(p.ID) }
func (w *testWorker) LeaseLost(string, *Session, error)              {}
func (w *testWorker) Outage() *outage.Outage                         { return w.out }
func (w *testWorker) Life() context.Context                          { return w.life }
func (w *testWorker) WriteCtx() context.Context                      { return w.life }
func (w *testWorker) Validate(context.Context, string, string) error { return nil }

func (w *testWorker) SessionLocked(queue string) (*Session, *Runtime) {
	return w.sessions[queue], w.runtimes[queue]
}

func (w *testWorker) NewProc(queue string, sp store.Proc, started time.Time) *Proc {
	p := &testProc{w: w}
	p.Proc = Proc{ID: sp.PID, Seq: sp.Seq(), Queue: queue, Owner: sp.Owner, TaskID: sp.Task.ID, Attempt: sp.Task.Attempts, Started: started}
	p.Host = p
	return &p.Proc
}

// testProc is a process with its host.
type testProc struct {
	Proc
	w *testWorker
}

func (p *testProc) Env() *Env { return &p.w.env }

func (p *testProc) Drop() {
	p.w.mu.Lock()
	s := p.w.sessions[p.Queue]
	p.w.mu.Unlock()
	if s != nil {
		s.Drop(&p.Proc)
	}
}

func (p *testProc) LeaseLost(error) {}

func (p *testProc) Observe(outcome Outcome, _ string, _ error) { p.w.ended.Signal(outcome) }

// syncBuffer is a log's output, written by handler goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// recv waits for ch, failing the test after a deadline.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testsignal.Wait):
		t.Fatalf("%s: nothing came in %v", what, testsignal.Wait)
	}
	var zero T
	return zero
}
