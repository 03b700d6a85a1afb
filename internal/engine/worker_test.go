package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/beat"
	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/internal/testsignal"
)

// fakeRoot is the root as a core takes it (CoreHost): it records what
// the core asks of it, over a fakeWorker's store and clock.
type fakeRoot struct {
	w *fakeWorker

	mu sync.Mutex
	// lives are the contexts the timers of delayed tasks were made on,
	// by queue; stopped, left and flushed count the root's services
	// stopped, its leaving the client, its stats flushes. Guarded by mu.
	lives   map[string]context.Context
	stopped int
	left    int
	flushed int

	fenced testsignal.Signal[fenceTold]
}

func (r *fakeRoot) NewProc(queue string, sp store.Proc, started time.Time) *Proc {
	return r.w.NewProc(queue, sp, started)
}
func (r *fakeRoot) Started(context.Context, *Proc)                 {}
func (r *fakeRoot) Validate(context.Context, string, string) error { return nil }
func (r *fakeRoot) Heard(time.Duration, bool, int64)               {}
func (r *fakeRoot) StopTicks()                                     {}
func (r *fakeRoot) Fenced(id, queue string, cause error, lost []*Proc) {
	r.fenced.Signal(fenceTold{id, queue, cause, lost})
}

func (r *fakeRoot) Services() []func() {
	return []func(){func() { r.count(&r.stopped) }}
}

func (r *fakeRoot) Flush(context.Context) { r.count(&r.flushed) }
func (r *fakeRoot) Left()                 { r.count(&r.left) }

func (r *fakeRoot) count(n *int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*n++
}

func (r *fakeRoot) Delayed(life context.Context, queue string) *delayed.Scheduler {
	r.mu.Lock()
	r.lives[queue] = life
	r.mu.Unlock()
	env := &delayed.Env{Clock: r.w.clk, Redis: &r.w.redis, Store: r.w.env.Store, Outage: r.w.out,
		Fail: r.w.env.Fail, Log: r.w.env.logger, TTL: r.w.env.TTL}
	return delayed.New(env, life, queue)
}

// newCore is a core over a fakeRoot, registered in the fakeWorker's
// store under an id of its own, with the fakeWorker's environment but
// for its id: the core's own. Its lease keeper is started on a fake
// clock that does not move: no renewal is sent.
func newCore(t *testing.T) (*Core, *fakeRoot) {
	t.Helper()
	w := newFakeWorker(t, "other")
	root := &fakeRoot{w: w, lives: map[string]context.Context{}}
	root.fenced.Init(t)
	c := new(Core)
	c.Init(root, &RegistryEnv{Clock: w.clk, Store: w.env.Store, Fail: w.env.Fail, TTL: testTTL,
		Served: func(context.Context, string) {}, Log: w.env.logger})
	id, _, err := c.Registry.Register(context.Background())
	require.NoError(t, err)
	env := w.env
	env.WorkerID = c.ID
	env.StayFenced = true
	life, end := context.WithCancel(context.Background())
	t.Cleanup(end)
	c.Start(id, life, end, env)
	beats := beat.New[Renewal, BeatMember](&beat.Env{Clock: w.clk, Store: w.env.Store, Outage: w.out, Log: w.env.Log, Fail: w.env.Fail, Born: w.clk.Now()})
	c.Lease.Start(life, beats, testTTL, testTTL/2)
	return c, root
}

// A core serves a queue over its own host, its session's timer of
// delayed tasks made by the root on the worker's life; a pool served is
// the core's until it closes, its queue left or not; its close stops the
// root's services, counts it out of the client, flushes the stats, ends
// its life and lets go of its sessions and pools.
func TestCoreServesAndClosesOverItsRoot(t *testing.T) {
	c, root := newCore(t)
	ctx := context.Background()
	require.NoError(t, Serve(ctx, c.Host(), &c.Env, "q", Events{}, nil))
	assert.Equal(t, []string{"q"}, c.Queues())
	root.mu.Lock()
	life := root.lives["q"]
	root.mu.Unlock()
	assert.True(t, life == c.Life(), "the queue's timer of delayed tasks runs on the worker's life")

	pool := NewScheduler(c.Host(), 1, true, false)
	pool.Add("h", nil, MemberOptions{}, 0, 1)
	require.NoError(t, ServePool(ctx, c.Host(), &c.Env, pool, []Events{{}}))
	id, pools := c.Pools()
	assert.Equal(t, c.ID(), id)
	assert.Equal(t, []*Scheduler{pool}, pools, "the pool served")
	require.NoError(t, Unserve(ctx, c.Host(), "h"))
	_, pools = c.Pools()
	assert.Equal(t, []*Scheduler{pool}, pools, "a pool is the core's until it closes, its queues left or not")

	require.NoError(t, c.Closer.Close(ctx, "close"))
	assert.True(t, c.Closed())
	assert.Empty(t, c.Queues(), "its sessions detached")
	_, pools = c.Pools()
	assert.Empty(t, pools, "its pools taken by the close")
	require.Error(t, c.Life().Err(), "its life ended")
	root.mu.Lock()
	assert.Equal(t, 1, root.stopped, "the root's services stopped")
	assert.Equal(t, 1, root.left, "counted out of the client")
	assert.Equal(t, 1, root.flushed, "the stats flushed")
	root.mu.Unlock()

	require.ErrorIs(t, c.Closer.Close(ctx, "close"), errs.ErrWorkerClosed, "a second close")
}

// The registry entry the core sets up fences the worker through its
// lease keeper: its lifecycle is fenced and the root tells the
// application, with the whole worker (no queue) as what was lost.
func TestCoreRegistryFencesTheWorker(t *testing.T) {
	c, root := newCore(t)
	id := c.ID()
	cause := errors.New("lease gone (test)")
	c.Registry.env.Fence(id, cause)
	told := root.fenced.WaitOrTimeout()
	assert.Equal(t, fenceTold{id: id, cause: cause}, told)
	c.Lock()
	defer c.Unlock()
	assert.True(t, c.Worker().IsFenced())
}
