package engine

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

// fakeWorker is the worker as a test drives it, the host of every
// component (RuntimeHost, SessionHost, KeeperHost): its store is a
// miniredis's, its clock a fake, and what a component tells the worker is
// recorded or signalled.
type fakeWorker struct {
	clk   *clock.Fake
	redis delayed.RedisClock
	env   Env
	out   *outage.Outage
	logs  *syncBuffer
	life  context.Context
	tasks sync.WaitGroup

	mu       sync.Mutex
	state    lifecycle.Worker
	sessions Sessions // guarded by mu
	// refuse makes Validate fail every call, so that no outcome write
	// reaches Redis. Guarded by mu.
	refuse error

	// dl is the worker's fencing deadline, as its sessions take it; on a
	// clock of its own (dlClk), so that its timer is not among the
	// test's.
	dl    Deadline
	dlClk *clock.Fake
	reg   fakeRegistry

	// started tells the test of each process the observer was told of;
	// ended of how each ended.
	started      testsignal.Signal[string]
	ended        testsignal.Signal[Outcome]
	workerFenced testsignal.Signal[string]
	registered   testsignal.Signal[string]
	heard        testsignal.Signal[int64]
	fenced       testsignal.Signal[fenceTold]
	rejoined     testsignal.Signal[string]
	queueRenewed testsignal.Signal[string]
}

// fakeRegistry is the worker's registry entry as a rejoin takes it: Join
// takes the lease on the queue unless the test says it fails.
type fakeRegistry struct {
	sync.Mutex
	w       *fakeWorker
	joinErr error // what Join answers; guarded by w.mu
	joined  testsignal.Signal[string]
}

func (g *fakeRegistry) Join(ctx context.Context, id, queue string) error {
	g.w.mu.Lock()
	err := g.joinErr
	g.w.mu.Unlock()
	g.joined.Signal(queue)
	if err != nil {
		return err
	}
	_, err = g.w.env.Store.JoinQueue(ctx, queue, id)
	return err
}

// fenceTold is what a session's fence told the application.
type fenceTold struct {
	id, queue string
	cause     error
	lost      []*Proc
}

const testTTL = 3 * time.Second

// errRefused is what fakeWorker.Validate says while refusing calls.
var errRefused = errors.New("refused (test)")

// newFakeWorker is a worker registered as id, its store on a fresh
// miniredis, its clock a fake, serving nothing.
func newFakeWorker(t *testing.T, id string) *fakeWorker {
	return newWorkerAt(t, id, time.Unix(1_000_000, 0), testTTL)
}

// newTestWorker is the worker of the runtime's tests: registered as
// testID, its clock a fake set to the real time, its TTL a minute.
func newTestWorker(t *testing.T) *fakeWorker {
	return newWorkerAt(t, testID, time.Now(), time.Minute)
}

func newWorkerAt(t *testing.T, id string, now time.Time, ttl time.Duration) *fakeWorker {
	t.Helper()
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	w := &fakeWorker{clk: clock.NewFake(now), dlClk: clock.NewFake(now), logs: &syncBuffer{}, sessions: make(map[string]*Session)}
	w.reg.w = w
	log := slog.New(slog.NewTextHandler(w.logs, nil))
	w.out = outage.New(log, w.clk, func(error) bool { return false })
	w.env = Env{
		Clock: w.clk, Store: store.New(rdb, "enginetest", false, false), Log: log, Writer: w,
		WorkerID: func() string {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.state.ID()
		},
		Validate: func(ctx context.Context, op string) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.refuse
		},
		Fail:          func(op, _ string, err error) error { return errors.Join(errors.New(op), err) },
		TTL:           ttl,
		MaxAttempts:   25,
		UnsurePasses:  3,
		Redis:         &w.redis,
		RenewInterval: testTTL / 2,
		HealthyAfter:  func() store.Poison { return store.Poison{} },
		Signals:       Signals{Rejoined: &w.rejoined, Registered: &w.registered, QueueRenewed: &w.queueRenewed},
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); w.tasks.Wait() })
	w.life = ctx
	w.state.ToRegistered(id)
	w.dl.Init(w, w.dlClk, ttl, func(id string, _ error) { w.workerFenced.Signal(id) })
	for _, s := range []*testsignal.Signal[string]{&w.started, &w.reg.joined, &w.rejoined, &w.workerFenced, &w.registered, &w.queueRenewed} {
		s.Init(t)
	}
	w.ended.Init(t)
	w.fenced.Init(t)
	w.heard.Init(t)
	require.NoError(t, w.env.Store.RegisterWorker(ctx, id, time.Minute))
	return w
}

// serve makes the worker's session of queue, serving under a lease until
// deadline, subscribed to the queue's events; its dispatcher signals
// each event it hands on to events.
func (w *fakeWorker) serve(t *testing.T, queue string, deadline time.Time, events *testsignal.Signal[subscription.Event]) *Session {
	t.Helper()
	s := &Session{}
	s.Init(w, &w.env, queue, Events{}, nil, deadline, nil)
	events.Init(t)
	s.Sub = subscription.New(w.life, w.env.Store, queue, func(_ context.Context, e subscription.Event) { events.Signal(e) }, s.InCallback)
	<-s.Sub.Ready()
	events.WaitOrTimeout() // the subscription's own
	w.mu.Lock()
	w.sessions[queue] = s
	w.mu.Unlock()
	_, err := w.env.Store.JoinQueue(w.life, queue, w.state.ID())
	require.NoError(t, err)
	return s
}

// handle makes a session of queue, served by r (nil: by the
// application), with no subscription.
func (w *fakeWorker) handle(queue string, r *Runtime) *Session {
	s := &Session{}
	s.Init(w, &w.env, queue, Events{}, r, time.Time{}, nil)
	s.Lease.state = lifecycle.SessionServing
	s.Sub = new(subscription.Subscription) // never ready: a dequeue does not park
	w.mu.Lock()
	w.sessions[queue] = s
	w.mu.Unlock()
	return s
}

// hold has worker id dequeue n fresh tasks of queue in Redis, as a
// dequeue whose reply the session never saw would.
func (w *fakeWorker) hold(t *testing.T, queue, id string, n int) []store.Proc {
	t.Helper()
	payloads := make([][]byte, n)
	for i := range payloads {
		payloads[i] = []byte("task")
	}
	_, err := w.env.Store.Enqueue(w.life, queue, payloads, store.EnqueueArgs{})
	require.NoError(t, err)
	ps, _, _, err := w.env.Store.Dequeue(w.life, queue, id, n, false)
	require.NoError(t, err)
	require.Len(t, ps, n)
	return ps
}

// held lists which of ps Redis says worker id still holds.
func (w *fakeWorker) held(t *testing.T, queue, id string, ps []store.Proc) []string {
	t.Helper()
	pids := make([]string, len(ps))
	for i, p := range ps {
		pids[i] = p.PID
	}
	states, err := w.env.Store.States(w.life, queue, id, pids)
	require.NoError(t, err)
	var ids []string
	for i, st := range states {
		if st == store.Active {
			ids = append(ids, pids[i])
		}
	}
	return ids
}

// adopt puts the process of p into s's books.
func adopt(t *testing.T, s *Session, p store.Proc) *Proc {
	t.Helper()
	rec := &Proc{ID: p.PID, Seq: p.Seq(), Queue: s.Name, Owner: p.Owner, Host: &fakeHost{}}
	require.True(t, s.Adopt(rec))
	return rec
}

func (w *fakeWorker) Lock()                     { w.mu.Lock() }
func (w *fakeWorker) Unlock()                   { w.mu.Unlock() }
func (w *fakeWorker) Worker() *lifecycle.Worker { return &w.state }
func (w *fakeWorker) Session(queue string) *Session {
	return w.sessions[queue]
}
func (w *fakeWorker) Served() Sessions                               { return w.sessions }
func (w *fakeWorker) Env() *Env                                      { return &w.env }
func (w *fakeWorker) Deadline() *Deadline                            { return &w.dl }
func (w *fakeWorker) Registry() Joiner                               { return &w.reg }
func (w *fakeWorker) Started(_ context.Context, p *Proc)             { w.started.Signal(p.ID) }
func (w *fakeWorker) LeaseLost(string, *Session, error)              {}
func (w *fakeWorker) Validate(context.Context, string, string) error { return nil }
func (w *fakeWorker) Outage() *outage.Outage                         { return w.out }
func (w *fakeWorker) Life() context.Context                          { return w.life }
func (w *fakeWorker) WriteCtx() context.Context                      { return w.life }

func (w *fakeWorker) Heard(_ time.Duration, _ bool, workers int64) { w.heard.Signal(workers) }

func (w *fakeWorker) Sessions(dst []*Session) []*Session {
	for _, s := range w.sessions {
		dst = append(dst, s)
	}
	return dst
}

func (w *fakeWorker) Go(f func(life context.Context)) {
	w.tasks.Add(1)
	go func() {
		defer w.tasks.Done()
		f(w.life)
	}()
}

func (w *fakeWorker) Fenced(id, queue string, cause error, lost []*Proc) {
	w.fenced.Signal(fenceTold{id: id, queue: queue, cause: cause, lost: lost})
}

func (w *fakeWorker) NewProc(queue string, sp store.Proc, started time.Time) *Proc {
	p := &testProc{w: w}
	p.Proc = Proc{ID: sp.PID, Seq: sp.Seq(), Queue: queue, Owner: sp.Owner, TaskID: sp.Task.ID, Attempt: sp.Task.Attempts, Started: started}
	p.Host = p
	return &p.Proc
}

// testProc is a process with its host.
type testProc struct {
	Proc
	w *fakeWorker
}

func (p *testProc) Env() *Env { return &p.w.env }

func (p *testProc) LeaseLost(error) {}

func (p *testProc) Observe(outcome Outcome, _ string, _ error) { p.w.ended.Signal(outcome) }

var errTestCause = errors.New("lease lost (test)")

// Worker ids are UUIDs: the scripts read a process's owner by its length.
const (
	testID  = "0190a000-0000-7000-8000-000000000001"
	staleID = "0190a000-0000-7000-8000-000000000002"
)

// lookedForWork reports whether the session's dispatcher was asked to
// look for work (an event marked subscribed), skipping the queue's
// events before it; it fails the test if none comes.
func lookedForWork(events *testsignal.Signal[subscription.Event]) bool {
	for {
		if e := events.WaitOrTimeout(); e.Subscribed {
			return true
		}
	}
}

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
