package worqr

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/engine"
	"github.com/worqr/worqr/internal/store"
)

// The suite runs against miniredis by default, so `go test ./...` needs no
// Redis. Set WORQR_TEST_REDIS to a real Redis address ("127.0.0.1:6379"),
// or WORQR_TEST_CLUSTER to the seed nodes of a Redis Cluster (see
// .ci/cluster), to run the same tests against it; each test then uses its
// own key prefix and deletes its keys afterwards.
const (
	envRedis   = "WORQR_TEST_REDIS"
	envCluster = "WORQR_TEST_CLUSTER"
)

// backend is one test's Redis: its address, whether it is real (or a
// cluster), and ways to open clients to it directly or through a fault
// proxy.
type backend struct {
	t       *testing.T
	addr    string   // one node's address
	seeds   []string // every address given (a cluster's seed nodes)
	real    bool
	cluster bool
	prefix  string
	mini    *miniredis.Miniredis
}

func newBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{t: t, prefix: "worqrtest-" + uuid.NewString()[:8]}
	if seeds := os.Getenv(envCluster); seeds != "" {
		b.seeds, b.real, b.cluster = strings.Split(seeds, ","), true, true
	} else if addr := os.Getenv(envRedis); addr != "" {
		b.seeds, b.real = []string{addr}, true
	}
	if b.real {
		b.addr = b.seeds[0]
		t.Cleanup(b.deleteKeys)
		return b
	}
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	require.NoError(t, m.Start())
	t.Cleanup(m.Close)
	b.mini, b.addr, b.seeds = m, m.Addr(), []string{m.Addr()}
	return b
}

// withPrefix is the same Redis under another prefix, whose keys are
// deleted after the test too.
func (b *backend) withPrefix(prefix string) *backend {
	other := *b
	other.prefix = prefix
	if b.real {
		b.t.Cleanup(other.deleteKeys)
	}
	return &other
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
	px = newProxy(t)
	return px, b.clientVia(px), b.client(), ctxT(t)
}

// redis opens a rueidis client to the backend.
func (b *backend) redis() rueidis.Client { return b.redisWith("", nil) }

// redisWith opens a rueidis client whose connections carry a CLIENT
// SETNAME (when name is set), so a test can find and kill just its own
// connections, and are dialled through px (when set).
func (b *backend) redisWith(name string, px *proxy) rueidis.Client {
	b.t.Helper()
	opt := rueidis.ClientOption{InitAddress: b.seeds, DisableCache: true, ClientName: name}
	if !b.real {
		// miniredis speaks RESP2 only and has no CLIENT TRACKING or
		// CLUSTER commands.
		opt.AlwaysRESP2, opt.ForceSingleClient = true, true
	}
	if px != nil {
		opt.DialCtxFn = px.dial
	}
	rdb, err := rueidis.NewClient(opt)
	require.NoError(b.t, err)
	b.t.Cleanup(rdb.Close)
	return rdb
}

// client opens a worqr Client with the test's prefix on its own connection.
func (b *backend) client() *Client { return b.clientOn(b.redis()) }

// clientVia opens a worqr Client whose connections go through px.
func (b *backend) clientVia(px *proxy) *Client { return b.clientOn(b.redisWith("", px)) }

func (b *backend) clientOn(rdb rueidis.Client) *Client {
	b.t.Helper()
	c, err := New(Options{Redis: rdb, Prefix: b.prefix, Logger: testLogger(b.t)})
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// nodes are clients to every node of the backend: the one server, or
// each node of a cluster (replicas included).
func nodes(rdb rueidis.Client) []rueidis.Client {
	all := rdb.Nodes()
	out := make([]rueidis.Client, 0, len(all))
	for _, n := range all {
		out = append(out, n)
	}
	return out
}

func (b *backend) deleteKeys() {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: b.seeds, DisableCache: true})
	if err != nil {
		return
	}
	defer rdb.Close()
	ctx := context.Background()
	for _, node := range nodes(rdb) {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(b.prefix+":*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				break
			}
			for _, k := range e.Elements {
				rdb.Do(ctx, rdb.B().Del().Key(k).Build())
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
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

// fencingWorker is newWorker with fast options and its fences reported
// on the returned channel.
func fencingWorker(t *testing.T, c *Client) (*Worker, <-chan FenceEvent) {
	t.Helper()
	return fencingWorkerWith(t, c, fast)
}

// fencingWorkerWith is fencingWorker with opts.
func fencingWorkerWith(t *testing.T, c *Client, opts WorkerOptions) (*Worker, <-chan FenceEvent) {
	t.Helper()
	fences := make(chan FenceEvent, 10)
	opts.OnFenced = func(ev FenceEvent) { fences <- ev }
	return newWorker(t, c, opts), fences
}

// lasting are the options of a test on the real clock that asserts a
// worker lives on (it is not fenced, keeps its id, loses no process) and
// waits for no expiry of that worker's lease: a lease renewed twelve
// times per TTL, so that only a stall of the whole test process of some
// 2.4 s fences the worker as a whole. Under -race on a loaded machine the
// process stalls for over a second (a 10 ms sleep can wake 1.45 s
// late), and at fast's TTL a stall of 0.65 s fences the worker, failing
// such a test for no fault of the code. A test that waits for the lease
// to run out keeps fast's TTL, which bounds its wait.
var lasting = WorkerOptions{TTL: 3 * time.Second, RenewInterval: fast.RenewInterval}

// crash stops a worker the way a killed process stops: no renewals, no
// reclaim, no events, no handlers, and nothing written to Redis.
func crash(w *Worker) {
	w.core.Lock()
	closing := w.core.Worker().ToClosed()
	runtimes := w.core.Served().Runtimes()
	w.core.Unlock()
	if !closing {
		return
	}
	w.core.Closer.StopComponents()
	for _, r := range runtimes {
		r.StopTaking()
	}
	w.core.Closer.DetachAll(context.Background(), errCrashed, false) // handlers end and write nothing
	for _, r := range runtimes {
		<-r.Drained()
	}
}

// errCrashed ends the processes of a crashed worker: it wraps
// ErrProcessLost, so its handlers write nothing.
var errCrashed = fmt.Errorf("%w: crashed (test)", ErrProcessLost)

// freeze stops a worker's keepalive, reclaim and self-fencing while it
// still believes itself alive: a zombie whose lease runs out in Redis.
func freeze(w *Worker) {
	w.core.Closer.StopComponents()
}

// countCalls counts c's store calls of kind op from now on (it replaces
// any fault set before).
func countCalls(c *Client, op store.Op) *atomic.Int64 {
	n := new(atomic.Int64)
	c.core.Store.SetFault(func(_ context.Context, got store.Op, _ string) error {
		if got == op {
			n.Add(1)
		}
		return nil
	})
	return n
}

// zscore is member's score in the sorted set key, 0 when it has none.
func zscore(t *testing.T, c *Client, key, member string) float64 {
	t.Helper()
	f, err := c.core.Redis.Do(ctxT(t), c.core.Redis.B().Zscore().Key(key).Member(member).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	require.NoError(t, err)
	return f
}

// commandsOf counts the Redis commands f makes, scripts' own included.
// Only a private miniredis can tell (a real server's counts hold other
// tests'): elsewhere it runs f and reports ok false, and the caller checks
// f's results alone.
func (b *backend) commandsOf(f func()) (n int, ok bool) {
	if b.mini == nil {
		f()
		return 0, false
	}
	from := b.mini.CommandCount()
	f()
	return b.mini.CommandCount() - from, true
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
// everywhere waits for all of them. The time is c's clock's: a Fake
// clock's moves with miniredis's (clocked.advance), and the system clock
// is Redis's on a real one.
func leasesExpired(t *testing.T, c *Client, id string, queues ...string) bool {
	t.Helper()
	ctx := context.Background()
	zsets := []string{c.core.Store.Keys().Workers()}
	for _, q := range queues {
		zsets = append(zsets, c.core.Store.Keys().Queue(q).Leases)
	}
	for _, z := range zsets {
		score, err := c.core.Redis.Do(ctx, c.core.Redis.B().Zscore().Key(z).Member(id).Build()).AsFloat64()
		if rueidis.IsRedisNil(err) {
			continue
		}
		require.NoError(t, err)
		if int64(score) > c.core.Clock.Now().UnixMilli() {
			return false
		}
	}
	return true
}

// proxy sits between rueidis and the network: it can cut every connection
// dialled through it and refuse new ones, the fault a network partition or
// a CLIENT KILL makes, on miniredis, real Redis and a cluster alike (every
// node's connections go through it).
type proxy struct {
	mu   sync.Mutex
	down bool
	// hung, while down, makes a dial wait for its context (or for
	// restore, or the test's end: rueidis dials some with none) instead
	// of being refused.
	hung  chan struct{}
	conns map[*proxyConn]struct{}
}

var errProxyDown = errors.New("proxy: connection refused (test)")

func newProxy(t *testing.T) *proxy {
	t.Helper()
	p := &proxy{conns: make(map[*proxyConn]struct{})}
	t.Cleanup(func() {
		p.unhang()
		p.cut()
	})
	return p
}

// dial is a rueidis DialCtxFn.
func (p *proxy) dial(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	p.mu.Lock()
	down, hung := p.down, p.hung
	p.mu.Unlock()
	if down && hung != nil {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-hung:
			return nil, errProxyDown
		}
	}
	if down {
		return nil, errProxyDown
	}
	conn, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		return nil, err
	}
	pc := &proxyConn{Conn: conn, p: p}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down { // cut while dialling: cut() did not see this one
		_ = conn.Close()
		return nil, errProxyDown
	}
	p.conns[pc] = struct{}{}
	return pc, nil
}

type proxyConn struct {
	net.Conn
	p *proxy
}

func (c *proxyConn) Close() error {
	c.p.mu.Lock()
	delete(c.p.conns, c)
	c.p.mu.Unlock()
	return c.Conn.Close()
}

// cut closes every connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	p.down = true
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// hang cuts every connection, as cut does, and makes new ones wait for
// their context, as dialling a host that drops packets does, until
// restore.
func (p *proxy) hang() {
	p.mu.Lock()
	if p.hung == nil {
		p.hung = make(chan struct{})
	}
	p.mu.Unlock()
	p.cut()
}

// unhang lets the dials waiting since hang go, refused.
func (p *proxy) unhang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hung != nil {
		close(p.hung)
		p.hung = nil
	}
}

func (p *proxy) restore() {
	p.unhang()
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
	rdb := b.redis()
	msgs := make(chan string, 1000)
	ready := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	hooked := rueidis.WithOnSubscriptionHook(ctx, func(rueidis.PubSubSubscription) { once.Do(func() { close(ready) }) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		sub := rdb.B().Subscribe().Channel(channel).Build()
		if b.cluster {
			sub = rdb.B().Ssubscribe().Channel(channel).Build()
		}
		_ = rdb.Receive(hooked, sub, func(m rueidis.PubSubMessage) { msgs <- m.Message })
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

// killPubSub kills, on every node, the pub/sub connections whose CLIENT
// SETNAME is name (what CLIENT KILL TYPE pubsub would kill, limited to one
// client's so parallel tests are spared), and returns how many.
func killPubSub(t *testing.T, admin rueidis.Client, name string) int {
	t.Helper()
	ctx := context.Background()
	killed := 0
	for _, node := range nodes(admin) { // on a cluster, the queue's node
		list, err := node.Do(ctx, node.B().ClientList().TypePubsub().Build()).ToString()
		require.NoError(t, err)
		list = strings.TrimPrefix(list, "txt:") // a RESP3 verbatim string
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			fields := map[string]string{}
			for _, kv := range strings.Fields(line) {
				k, v, _ := strings.Cut(kv, "=")
				fields[k] = v
			}
			if fields["name"] != name {
				continue
			}
			id, err := strconv.ParseInt(fields["id"], 10, 64)
			require.NoError(t, err, "CLIENT LIST line %q", line)
			require.NoError(t, node.Do(ctx, node.B().ClientKill().Id(id).Build()).Error())
			killed++
		}
	}
	return killed
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

// failStopWork makes w's StopWork on queue fail (its release refused, as
// on a broken connection), which leaves the queue served and its runtime's
// loop started again, and returns that runtime.
func failStopWork(t *testing.T, c *Client, w *Worker, queue string) *engine.Runtime {
	t.Helper()
	c.core.Store.SetFault(func(_ context.Context, op store.Op, _ string) error {
		if op == store.OpRelease {
			return errors.New("connection reset (test)")
		}
		return nil
	})
	require.Error(t, w.StopWork(ctxT(t), queue), "StopWork fails: the queue stays served")
	c.core.Store.SetFault(nil)
	r := runnerOf(w, queue)
	require.True(t, r.Taking(), "loop restarted")
	return r
}

// currentID is the worker's id if it may act: not closed, not fenced.
func currentID(w *Worker) (string, error) {
	w.core.Lock()
	defer w.core.Unlock()
	return w.core.Worker().Current("test")
}

// sessionOf is the session of queue on w (nil if it does not serve it).
func sessionOf(w *Worker, queue string) *engine.Session {
	w.core.Lock()
	defer w.core.Unlock()
	return w.core.Served()[queue]
}
