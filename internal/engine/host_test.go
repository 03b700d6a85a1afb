package engine

import (
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
	"github.com/worqr/worqr/internal/lifecycle"
	"github.com/worqr/worqr/internal/outage"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/subscription"
	"github.com/worqr/worqr/internal/testsignal"
)

// fakeWorker is the worker serving a session, as a test drives it: the
// store is a miniredis's, the clock a fake, and what the session tells
// the worker is recorded or signalled.
type fakeWorker struct {
	mu      sync.Mutex
	state   lifecycle.Worker
	serving *Session // the session of its queue; guarded by mu
	leaseAt time.Time
	armed   int // guarded by mu

	env   Env
	clk   *clock.Fake
	out   *outage.Outage
	log   *slog.Logger
	reg   sync.Mutex
	life  context.Context
	tasks sync.WaitGroup

	joinErr      error // what Join answers; guarded by mu
	joined       testsignal.Signal[string]
	workerFenced testsignal.Signal[string]
	registered   testsignal.Signal[string]
	heard        testsignal.Signal[int64]
	fenced       testsignal.Signal[fenceTold]
	rejoined     testsignal.Signal[string]
	queueRenewed testsignal.Signal[string]
}

// fenceTold is what a session's fence told the application.
type fenceTold struct {
	id, queue string
	cause     error
	lost      []*Proc
}

const testTTL = 3 * time.Second

// newFakeWorker is a worker registered as id, its store on a fresh
// miniredis, its clock a fake.
func newFakeWorker(t *testing.T, id string) *fakeWorker {
	t.Helper()
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	w := &fakeWorker{clk: clk, log: slog.New(slog.DiscardHandler)}
	w.out = outage.New(w.log, clk, func(error) bool { return false })
	w.env = Env{
		Clock: clk,
		Store: store.New(rdb, "enginetest", false, false),
		Log:   w.log,
		Fail:  func(op, queue string, err error) error { return err },
		TTL:   testTTL,
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); w.tasks.Wait() })
	w.life = ctx
	w.state.ToRegistered(id)
	w.joined.Init(t)
	w.fenced.Init(t)
	w.rejoined.Init(t)
	w.workerFenced.Init(t)
	w.registered.Init(t)
	w.heard.Init(t)
	w.queueRenewed.Init(t)
	require.NoError(t, w.env.Store.RegisterWorker(ctx, id, time.Minute))
	return w
}

// serve makes the worker's session of queue, serving under a lease until
// deadline, subscribed to the queue's events; its dispatcher signals
// each event it hands on to events.
func (w *fakeWorker) serve(t *testing.T, queue string, deadline time.Time, events *testsignal.Signal[subscription.Event]) *Session {
	t.Helper()
	s := &Session{}
	s.Init(w, queue, Events{}, deadline, nil)
	events.Init(t)
	s.Sub = subscription.New(w.life, w.env.Store, queue, func(_ context.Context, e subscription.Event) { events.Signal(e) }, s.InCallback)
	<-s.Sub.Ready()
	events.WaitOrTimeout() // the subscription's own
	w.mu.Lock()
	w.serving = s
	w.mu.Unlock()
	_, err := w.env.Store.JoinQueue(w.life, queue, w.state.ID())
	require.NoError(t, err)
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
func (w *fakeWorker) Serves(s *Session) bool    { return w.serving == s }
func (w *fakeWorker) Env() *Env                 { return &w.env }
func (w *fakeWorker) Outage() *outage.Outage    { return w.out }
func (w *fakeWorker) RenewInterval() time.Duration {
	return testTTL / 2
}
func (w *fakeWorker) Logger() *slog.Logger       { return w.log }
func (w *fakeWorker) HealthyAfter() store.Poison { return store.Poison{} }
func (w *fakeWorker) Margin() time.Duration      { return testTTL / 10 }
func (w *fakeWorker) LeaseAt() time.Time         { return w.leaseAt }
func (w *fakeWorker) Arm()                       { w.armed++ }
func (w *fakeWorker) Registry() sync.Locker      { return &w.reg }
func (w *fakeWorker) Rejoined(queue string)      { w.rejoined.Signal(queue) }

func (w *fakeWorker) FenceWorker(id string, _ error) { w.workerFenced.Signal(id) }

func (w *fakeWorker) StayFenced() bool      { return false }
func (w *fakeWorker) Registered(id string)  { w.registered.Signal(id) }
func (w *fakeWorker) Alive() bool           { return w.life.Err() == nil }
func (w *fakeWorker) QueueRenewed(q string) { w.queueRenewed.Signal(q) }

func (w *fakeWorker) Heard(_ time.Duration, _ bool, workers int64) { w.heard.Signal(workers) }

func (w *fakeWorker) Session(queue string) *Session {
	if w.serving == nil || w.serving.Name != queue {
		return nil
	}
	return w.serving
}

func (w *fakeWorker) Sessions() []*Session {
	if w.serving == nil {
		return nil
	}
	return []*Session{w.serving}
}

func (w *fakeWorker) Join(ctx context.Context, id, queue string) error {
	w.mu.Lock()
	err := w.joinErr
	w.mu.Unlock()
	w.joined.Signal(queue)
	if err != nil {
		return err
	}
	_, err = w.env.Store.JoinQueue(ctx, queue, id)
	return err
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
