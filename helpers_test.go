package worqr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// The suite runs against miniredis by default, so `go test ./...` needs no
// Redis. Set WORQR_TEST_REDIS to a real Redis address ("127.0.0.1:6379")
// to run the same tests against it; each test then uses its own key prefix
// and deletes its keys afterwards.
const envRedis = "WORQR_TEST_REDIS"

// backend is one test's Redis: its address, whether it is real, and ways
// to open clients to it directly or through a fault proxy.
type backend struct {
	t      *testing.T
	addr   string
	real   bool
	prefix string
	mini   *miniredis.Miniredis
}

func newBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{t: t, prefix: "worqrtest-" + uuid.NewString()[:8]}
	if addr := os.Getenv(envRedis); addr != "" {
		b.addr, b.real = addr, true
		t.Cleanup(b.deleteKeys)
		return b
	}
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	require.NoError(t, m.Start())
	t.Cleanup(m.Close)
	b.mini, b.addr = m, m.Addr()
	return b
}

// setup is the start of most tests: a backend, a client on it, and a
// context that ends with the test.
func setup(t *testing.T) (*backend, *Client, context.Context) {
	t.Helper()
	b := newBackend(t)
	return b, b.client(), ctxT(t)
}

// setupBehindProxy is setup for fault tests: c reaches Redis through a
// proxy the test can cut, direct reaches it straight.
func setupBehindProxy(t *testing.T) (px *proxy, c, direct *Client, ctx context.Context) {
	t.Helper()
	b := newBackend(t)
	px = newProxy(t, b.addr)
	return px, b.clientAt(px.addr(), b.prefix), b.client(), ctxT(t)
}

// redis opens a rueidis client to addr (the backend's, or a proxy's).
func (b *backend) redis(addr string) rueidis.Client { return b.redisNamed(addr, "") }

// redisNamed opens a rueidis client whose connections carry a CLIENT
// SETNAME, so a test can find and kill just its own connections.
func (b *backend) redisNamed(addr, name string) rueidis.Client {
	b.t.Helper()
	opt := rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ClientName: name}
	if !b.real {
		// miniredis speaks RESP2 only and has no CLIENT TRACKING or
		// CLUSTER commands.
		opt.AlwaysRESP2, opt.ForceSingleClient = true, true
	}
	rdb, err := rueidis.NewClient(opt)
	require.NoError(b.t, err)
	b.t.Cleanup(rdb.Close)
	return rdb
}

// client opens a worqr Client with the test's prefix on its own connection.
func (b *backend) client() *Client { return b.clientAt(b.addr, b.prefix) }

func (b *backend) clientAt(addr, prefix string) *Client {
	b.t.Helper()
	c, err := New(Options{Redis: b.redis(addr), Prefix: prefix, Logger: testLogger(b.t)})
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func (b *backend) deleteKeys() {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{b.addr}, DisableCache: true})
	if err != nil {
		return
	}
	defer rdb.Close()
	ctx := context.Background()
	var cursor uint64
	for {
		e, err := rdb.Do(ctx, rdb.B().Scan().Cursor(cursor).Match(b.prefix+":*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			return
		}
		for _, k := range e.Elements {
			rdb.Do(ctx, rdb.B().Del().Key(k).Build())
		}
		if cursor = e.Cursor; cursor == 0 {
			return
		}
	}
}

// testLogger sends worqr's logs to the test log, so they show on failure.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fast are worker options short enough for tests that wait for expiry.
var fast = WorkerOptions{TTL: time.Second, RenewInterval: 250 * time.Millisecond}

func newWorker(t *testing.T, c *Client, opts WorkerOptions) *Worker {
	t.Helper()
	w, err := c.NewWorker(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

// crash stops a worker the way a killed process stops: no renewals, no
// reclaim, no events, no handlers, and nothing written to Redis.
func (w *Worker) crash() {
	w.mu.Lock()
	w.closed = true
	runners := w.runnersLocked()
	w.deadline.Stop()
	ss := w.served()
	w.serving = make(map[string]*serving)
	w.mu.Unlock()
	w.stop()
	w.wg.Wait()
	for _, s := range ss {
		s.sub.cancel()
		<-s.sub.received
		<-s.sub.dispatched
	}
	for _, r := range runners {
		r.stopTaking()
	}
	for _, s := range ss {
		w.endAll(s, errCrashed) // handlers end and write nothing
	}
	for _, r := range runners {
		r.handlers.Wait()
	}
	w.c.mu.Lock()
	delete(w.c.workers, w)
	w.c.mu.Unlock()
}

// errCrashed ends the processes of a crashed worker: it wraps
// ErrProcessLost, so its handlers write nothing.
var errCrashed = fmt.Errorf("%w: crashed (test)", ErrProcessLost)

// freeze stops a worker's keepalive, reclaim and self-fencing while it
// still believes itself alive: a zombie whose lease runs out in Redis.
func (w *Worker) freeze() {
	w.mu.Lock()
	w.deadline.Stop()
	w.mu.Unlock()
	w.stop()
	w.wg.Wait()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recv waits for a value on ch up to a deadline.
func recv[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("not within %v: %s", within, what)
		var zero T
		return zero
	}
}

// leaseLive reports whether Redis holds a live registry lease for id.
func leaseLive(t *testing.T, c *Client, id string) bool {
	t.Helper()
	ws, err := c.Workers(context.Background())
	require.NoError(t, err)
	for _, w := range ws {
		if w.ID == id {
			return true
		}
	}
	return false
}

// leasesExpired reports whether worker id's leases, in the registry and in
// each queue, have all expired. Renewals of the queue leases land a few
// milliseconds after the registry's, so a test that needs the worker dead
// everywhere waits for all of them. (Redis and the tests share a clock.)
func leasesExpired(t *testing.T, c *Client, id string, queues ...string) bool {
	t.Helper()
	ctx := context.Background()
	zsets := []string{c.keys.workers()}
	for _, q := range queues {
		zsets = append(zsets, c.keys.queue(q).leases)
	}
	for _, z := range zsets {
		score, err := c.rdb.Do(ctx, c.rdb.B().Zscore().Key(z).Member(id).Build()).AsFloat64()
		if rueidis.IsRedisNil(err) {
			continue
		}
		require.NoError(t, err)
		if int64(score) > time.Now().UnixMilli() {
			return false
		}
	}
	return true
}

// proxy forwards TCP to a Redis server and can cut every connection and
// refuse new ones: the fault a network partition or a CLIENT KILL makes,
// on miniredis and real Redis alike.
type proxy struct {
	target string
	ln     net.Listener
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{target: target, ln: ln, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			_ = in.Close()
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.down { // cut (or closed) while dialling: cut() did not see these
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			continue
		}
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, err := io.Copy(dst, src)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		_ = err // a reset is what cut() is for
	}
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut closes every connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	p.down = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// listen subscribes a plain client to a channel and returns its messages,
// once the subscription is confirmed.
func (b *backend) listen(channel string) <-chan string {
	b.t.Helper()
	rdb := b.redis(b.addr)
	msgs := make(chan string, 1000)
	ready := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	hooked := rueidis.WithOnSubscriptionHook(ctx, func(rueidis.PubSubSubscription) { once.Do(func() { close(ready) }) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rdb.Receive(hooked, rdb.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) { msgs <- m.Message })
	}()
	b.t.Cleanup(func() { cancel(); <-done })
	recv(b.t, ready, 5*time.Second, "subscription to "+channel)
	return msgs
}

// expectMessage waits for a message equal to want, skipping others.
func expectMessage(t *testing.T, msgs <-chan string, want string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-msgs:
			if m == want {
				return
			}
		case <-deadline:
			t.Fatalf("no message %q", want)
		}
	}
}

// afterOutage runs op until it stops failing with ErrUnavailable: right
// after an outage, a pooled connection not yet replaced fails once, as it
// would for a user.
func afterOutage(t *testing.T, op func() error) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := op()
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
