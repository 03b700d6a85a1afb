package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// latencyGap is the time between two tasks of the idle-latency scenario
// (between a worqr task and the next; a baseline task goes out half-way
// between them).
const latencyGap = 20 * time.Millisecond

// runLatency measures, with the consumer idle, the time from the start of
// an enqueue to the start of the handler, one task every 20 ms. The
// baseline is a consumer blocked in BLMOVE: the least a reliable queue can
// do without polling.
//
// The two are measured together, interleaved: worqr's idle worker and the
// baseline's blocked consumer both wait, and a baseline task goes out
// half-way between two worqr tasks (in turn first or second of each pair),
// so both see the same machine. On a shared machine p99 moves by several
// times from one second to the next; measured one after the other, the
// ratio of two p99s was mostly that movement (0.35–4.7× within one run).
func runLatency(ctx context.Context, b *bench) (*result, error) {
	count := b.pick(500, 50)
	res := &result{}
	tb, tw := newTimings(count, latencyGap), newTimings(count, latencyGap)

	base := startBaseConsumers(ctx, b, tb)
	defer base.close(ctx)
	fleet, err := startIdleWorkers(ctx, b, tw, 1)
	if err != nil {
		return nil, err
	}
	defer fleet.close(ctx)
	time.Sleep(50 * time.Millisecond) // let the consumers block and the runtimes park

	start := time.Now()
	for i := range tw.sent {
		at := start.Add(time.Duration(i) * latencyGap)
		pair := [2]func() error{
			func() error { return tw.sendOne(i, func(task []byte) error { return fleet.enqueue(ctx, i, task) }) },
			func() error { return tb.sendOne(i, func(task []byte) error { return base.push(ctx, i, task) }) },
		}
		if i%2 == 1 {
			pair[0], pair[1] = pair[1], pair[0]
		}
		for j, send := range pair {
			time.Sleep(time.Until(at.Add(time.Duration(j) * latencyGap / 2)))
			if err := send(); err != nil {
				return nil, err
			}
		}
	}
	got, err := tw.wait(timeout(b.cfg.short))
	if err != nil {
		return nil, err
	}
	based, err := tb.wait(timeout(b.cfg.short))
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	// Starts that come after the last first start are counted too.
	time.Sleep(10 * latencyGap)
	addLatencies(res, "", got)
	res.add("started_twice", "tasks", float64(tw.repeats()))
	addLatencies(res, "baseline_", based)
	res.add("p50_ratio", "×", pct(got, 50).Seconds()/pct(based, 50).Seconds())
	res.add("p99_ratio", "×", pct(got, 99).Seconds()/pct(based, 99).Seconds())
	// Where the gap is: the enqueue's own round trip against the LPUSH's
	// (on an idle Redis a script pays for each call it makes, cold).
	erts, prts := tw.roundTrips(), tb.roundTrips()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	res.add("enqueue_rt_p50_ms", "ms", ms(pct(erts, 50)))
	res.add("baseline_lpush_rt_p50_ms", "ms", ms(pct(prts, 50)))
	res.add("rt_p50_ratio", "×", pct(erts, 50).Seconds()/pct(prts, 50).Seconds())
	// And the rest: from the sender hearing back to the handler's start,
	// the consumer's side (its connection's reader and the hops to the
	// handler's goroutine).
	wa, ba := tw.afterReply(), tb.afterReply()
	res.add("after_reply_p50_ms", "ms", ms(pct(wa, 50)))
	res.add("after_reply_p99_ms", "ms", ms(pct(wa, 99)))
	res.add("baseline_after_reply_p50_ms", "ms", ms(pct(ba, 50)))
	res.add("baseline_after_reply_p99_ms", "ms", ms(pct(ba, 99)))
	return res, nil
}

// idleWorkers is a client and n idle workers serving every queue whose
// handlers record each task's arrival in t.
type idleWorkers struct {
	b       *bench
	c       *worqr.Client
	prefix  string
	workers []*worqr.Worker
}

func startIdleWorkers(ctx context.Context, b *bench, t *timings, n int) (*idleWorkers, error) {
	c, prefix, err := b.newClient()
	if err != nil {
		return nil, err
	}
	f := &idleWorkers{b: b, c: c, prefix: prefix}
	h := func(_ context.Context, p *worqr.Process) error {
		t.arrived(p.Task())
		return nil
	}
	for range n {
		w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
		if err != nil {
			f.close(ctx)
			return nil, err
		}
		f.workers = append(f.workers, w)
		for _, q := range b.queues {
			if err := w.Handle(ctx, q, h, worqr.HandleOptions{}); err != nil {
				f.close(ctx)
				return nil, err
			}
		}
	}
	return f, nil
}

// enqueue enqueues task i, to the queues in turn.
func (f *idleWorkers) enqueue(ctx context.Context, i int, task []byte) error {
	_, err := f.c.Enqueue(ctx, f.b.queues[i%len(f.b.queues)], task)
	return err
}

func (f *idleWorkers) close(ctx context.Context) {
	for _, w := range f.workers {
		_ = w.Close(ctx)
	}
	_ = f.c.Close(ctx)
	_ = cleanup(ctx, f.b.rdb, f.prefix)
}

// worqrLatency measures enqueue → handler start for count tasks sent gap
// apart to n idle workers serving every queue, what Redis and this process
// spent on it, and how many tasks were started more than once (none may
// be: no worker dies).
func worqrLatency(ctx context.Context, b *bench, count int, gap time.Duration, n int) ([]time.Duration, span, int, error) {
	t := newTimings(count, gap)
	f, err := startIdleWorkers(ctx, b, t, n)
	if err != nil {
		return nil, span{}, 0, err
	}
	defer f.close(ctx)
	win := openWindow(ctx, b.rdb)
	if err := t.send(ctx, func(i int, task []byte) error { return f.enqueue(ctx, i, task) }); err != nil {
		return nil, span{}, 0, err
	}
	ds, err := t.wait(timeout(b.cfg.short))
	sp := win.close(ctx)
	// Starts that come after the last first start are counted too.
	time.Sleep(10 * gap)
	return ds, sp, t.repeats(), err
}

// baseConsumers is one BLMOVE consumer per queue, each recording its
// tasks' arrival in t; tasks are LPUSHed.
type baseConsumers struct {
	b    *bench
	keys []baseKeys
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func startBaseConsumers(ctx context.Context, b *bench, t *timings) *baseConsumers {
	bc := &baseConsumers{b: b, keys: baseKeysFor(b.queues)}
	cctx, stop := context.WithCancel(ctx)
	bc.stop = stop
	for _, k := range bc.keys {
		bc.wg.Go(func() {
			rdb, mine := b.rdb, k.consumer(0)
			for cctx.Err() == nil {
				task, err := rdb.Do(cctx, rdb.B().Blmove().Source(k.waiting()).Destination(mine).Right().Left().Timeout(1).Build()).AsBytes()
				if rueidis.IsRedisNil(err) || err != nil {
					continue
				}
				t.arrived(task)
				_ = rdb.Do(cctx, rdb.B().Lrem().Key(mine).Count(1).Element(string(task)).Build()).Error()
			}
		})
	}
	return bc
}

// push LPUSHes task i, to the queues in turn.
func (bc *baseConsumers) push(ctx context.Context, i int, task []byte) error {
	k := bc.keys[i%len(bc.keys)]
	return bc.b.rdb.Do(ctx, bc.b.rdb.B().Lpush().Key(k.waiting()).Element(string(task)).Build()).Error()
}

func (bc *baseConsumers) close(ctx context.Context) {
	bc.stop()
	bc.wg.Wait()
	_ = cleanup(ctx, bc.b.rdb, bc.keys[0].prefix)
}

// warmup is how many tasks are sent, and not counted, before the measured
// ones: connections and scripts are ready by then.
const warmup = 5

// timings records when each task was sent and when it arrived.
type timings struct {
	gap  time.Duration
	mu   sync.Mutex
	sent []time.Time
	took []time.Duration
	// rt is each send's own round trip (the enqueue's, the LPUSH's): the
	// part of the pickup spent before the sender hears back.
	rt      []time.Duration
	arrives int
	again   int // starts of tasks that had started already
	all     chan struct{}
}

func newTimings(count int, gap time.Duration) *timings {
	return &timings{gap: gap, sent: make([]time.Time, warmup+count), took: make([]time.Duration, warmup+count), rt: make([]time.Duration, warmup+count), all: make(chan struct{})}
}

// send sends every task on a fixed schedule, gap apart.
func (t *timings) send(ctx context.Context, enqueue func(i int, task []byte) error) error {
	start := time.Now()
	for i := range t.sent {
		time.Sleep(time.Until(start.Add(time.Duration(i) * t.gap)))
		if err := t.sendOne(i, func(task []byte) error { return enqueue(i, task) }); err != nil {
			return err
		}
	}
	return nil
}

// sendOne notes the time and sends task i, and how long the send took.
func (t *timings) sendOne(i int, send func(task []byte) error) error {
	task := []byte(strconv.Itoa(i))
	t.mu.Lock()
	at := time.Now()
	t.sent[i] = at
	t.mu.Unlock()
	err := send(task)
	rt := time.Since(at)
	t.mu.Lock()
	t.rt[i] = rt
	t.mu.Unlock()
	return err
}

// roundTrips are the counted sends' own round trips.
func (t *timings) roundTrips() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.rt[warmup:])
}

// afterReply is, for each counted task, the time from its send's reply to
// its start (negative when the start came first).
func (t *timings) afterReply() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Duration, 0, len(t.took)-warmup)
	for i := warmup; i < len(t.took); i++ {
		out = append(out, t.took[i]-t.rt[i])
	}
	return out
}

func (t *timings) arrived(task []byte) {
	now := time.Now()
	i, err := strconv.Atoi(string(task))
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i < 0 || i >= len(t.took) {
		return
	}
	if t.took[i] != 0 {
		t.again++
		return
	}
	t.took[i] = now.Sub(t.sent[i])
	if t.arrives++; t.arrives == len(t.took) {
		close(t.all)
	}
}

// repeats is how many starts were of tasks that had started already.
func (t *timings) repeats() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.again
}

// wait returns the latencies of the counted tasks once all arrived.
func (t *timings) wait(limit time.Duration) ([]time.Duration, error) {
	select {
	case <-t.all:
	case <-time.After(limit):
		t.mu.Lock()
		defer t.mu.Unlock()
		return nil, fmt.Errorf("only %d of %d tasks arrived", t.arrives, len(t.took))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.took[warmup:]), nil
}

// pct is the p-th percentile (nearest rank).
func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func addLatencies(r *result, prefix string, ds []time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.add(prefix+"p50_ms", "ms", ms(pct(ds, 50)))
	r.add(prefix+"p90_ms", "ms", ms(pct(ds, 90)))
	r.add(prefix+"p99_ms", "ms", ms(pct(ds, 99)))
	r.add(prefix+"max_ms", "ms", ms(slices.Max(ds)))
}
