package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// delayConcurrency is the handlers per queue of the delay scenario: enough
// that a task never waits for a free handler.
const delayConcurrency = 200

// delayConsumers is the baseline's BLMOVE consumers per queue.
const delayConsumers = 20

// runDelay enqueues tasks up front, each due (worqr.At) at a random moment
// of the next 10 s, to one worker already serving the queues with 200
// handlers, and measures each handler's start minus its task's due time;
// a start before the due time counts as early. Redis keeps due times in
// microseconds (At rounds up), so the start minus that stored time
// is reported too (stored_*): worqr's own promise is never to start a task
// before it. The due times are drawn to the nanosecond, as a program's
// would be. The baseline is the least
// a delayed queue needs: a timer per task in this process that LPUSHes the
// task when it is due, to consumers blocked in BLMOVE. It is not durable
// (the timers die with the process): it shows what a timer and a round
// trip cost on this machine.
//
// Due times are on the Redis clock and handlers start on this machine's:
// the scenario reads Redis TIME at the start, takes the offset between the
// two clocks at the midpoint of the round trip (best of a few reads), and
// turns every due time into a local one with it. Redis on loopback shares
// this machine's clock, so the offset should be about zero; it is
// reported, and so is how far it moved by the end.
func runDelay(ctx context.Context, b *bench) (*result, error) {
	n := b.pick(10_000, 300)
	spread := time.Duration(b.pick(10_000, 2_000)) * time.Millisecond
	// lead is the time to enqueue before the first due time.
	lead := time.Duration(b.pick(1_000, 300)) * time.Millisecond
	res := &result{}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

	base, err := baseDelay(ctx, b, n, lead, spread)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	got, err := worqrDelay(ctx, b, n, lead, spread)
	if err != nil {
		return nil, err
	}
	addLatencies(res, "", got.late)
	res.add("early", "tasks", float64(got.early))
	res.add("early_by_max_ms", "ms", ms(max(0, -slices.Min(got.late))))
	res.add("stored_p50_ms", "ms", ms(pct(got.lateStored, 50)))
	res.add("stored_p99_ms", "ms", ms(pct(got.lateStored, 99)))
	res.add("stored_min_ms", "ms", ms(slices.Min(got.lateStored)))
	res.add("stored_early", "tasks", float64(got.earlyStored))
	addLatencies(res, "baseline_", base.late)
	res.add("baseline_early", "tasks", float64(base.early))
	res.add("p99_ratio", "×", pct(got.late, 99).Seconds()/pct(base.late, 99).Seconds())
	res.add("enqueue_s", "s", got.enqueue.Seconds())
	res.add("due_before_enqueued", "tasks", float64(got.overdue))
	// Sizes only: the summary prints no negative numbers.
	res.add("clock_offset_abs_us", "µs", math.Abs(float64(got.clock.offset.Nanoseconds())/1000))
	res.add("clock_rtt_us", "µs", float64(got.clock.rtt.Nanoseconds())/1000)
	res.add("clock_drift_abs_us", "µs", math.Abs(float64(got.drift.Nanoseconds())/1000))
	res.note("start minus due on this machine's clock, due times moved from the Redis clock by the offset read at the start (Redis TIME at the midpoint of the round trip)")
	res.note("stored_*: start minus the due time as Redis keeps it, At's time rounded up to the microsecond")
	if got.overdue > 0 {
		res.note("%d task(s) were due before their enqueue returned: their lateness includes the enqueue", got.overdue)
	}
	return res, nil
}

// lateness is what one side of the delay scenario measured.
type lateness struct {
	late        []time.Duration // start minus the due time asked for, one per task
	lateStored  []time.Duration // start minus the due time as Redis keeps it (whole ms)
	early       int             // starts before the due time asked for
	earlyStored int             // starts before the due time as Redis keeps it
	overdue     int             // tasks due before their enqueue returned
	enqueue     time.Duration   // time to enqueue them all
	clock       clockReading    // at the start
	drift       time.Duration   // the offset at the end minus at the start
}

// worqrDelay runs worqr's side of the delay scenario.
func worqrDelay(ctx context.Context, b *bench, n int, lead, spread time.Duration) (lateness, error) {
	c, prefix, err := b.newClient()
	if err != nil {
		return lateness{}, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	run := uuid.NewString()[:8]
	st := newStarts(run, n)
	w, err := c.NewWorker(ctx, worqr.WorkerOptions{})
	if err != nil {
		return lateness{}, err
	}
	defer func() { _ = w.Close(ctx) }()
	h := func(_ context.Context, p *worqr.Process) error {
		st.started(p.Task())
		return nil
	}
	for _, q := range b.queues {
		if err := w.Handle(ctx, q, h, worqr.HandleOptions{Concurrency: delayConcurrency}); err != nil {
			return lateness{}, err
		}
	}
	clk, err := readClock(ctx, b.rdb)
	if err != nil {
		return lateness{}, err
	}
	due := dueTimes(clk, n, lead, spread) // on the Redis clock
	start := time.Now()
	enqueued := make([]time.Time, n)
	err = parallel(b.cfg.concurrency, n, func(i int) error {
		_, err := c.Enqueue(ctx, b.queues[i%len(b.queues)], payload(run, i), worqr.At(due[i]))
		enqueued[i] = time.Now()
		return err
	})
	if err != nil {
		return lateness{}, err
	}
	out := lateness{enqueue: time.Since(start), clock: clk}
	starts, err := st.wait(lead + spread + timeout(b.cfg.short))
	if err != nil {
		return lateness{}, err
	}
	end, err := readClock(ctx, b.rdb)
	if err != nil {
		return lateness{}, err
	}
	out.drift = end.offset - clk.offset
	for i, s := range starts {
		local := clk.local(due[i])
		if enqueued[i].After(local) {
			out.overdue++
		}
		if s.Before(local) {
			out.early++
		}
		// Redis keeps due times in whole milliseconds: At rounds down.
		stored := clk.local(time.UnixMicro(due[i].UnixMicro()))
		if s.Before(stored) {
			out.earlyStored++
		}
		out.late = append(out.late, s.Sub(local))
		out.lateStored = append(out.lateStored, s.Sub(stored))
	}
	return out, nil
}

// baseDelay runs the baseline of the delay scenario: a local timer per
// task LPUSHes it at its due time; delayConsumers consumers per queue
// blocked in BLMOVE take it and acknowledge it with LREM.
func baseDelay(ctx context.Context, b *bench, n int, lead, spread time.Duration) (lateness, error) {
	keys := baseKeysFor(b.queues)
	defer func() { _ = cleanup(ctx, b.rdb, keys[0].prefix) }()
	run := uuid.NewString()[:8]
	st := newStarts(run, n)
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, k := range keys {
		for i := range delayConsumers {
			wg.Go(func() {
				rdb, mine := b.rdb, k.consumer(i)
				for cctx.Err() == nil {
					task, err := rdb.Do(cctx, rdb.B().Blmove().Source(k.waiting()).Destination(mine).Right().Left().Timeout(1).Build()).AsBytes()
					if err != nil {
						continue
					}
					st.started(task)
					_ = rdb.Do(cctx, rdb.B().Lrem().Key(mine).Count(1).Element(string(task)).Build()).Error()
				}
			})
		}
	}
	time.Sleep(50 * time.Millisecond) // let the consumers block
	clk, err := readClock(ctx, b.rdb)
	if err != nil {
		return lateness{}, err
	}
	due := dueTimes(clk, n, lead, spread)
	timers := make([]*time.Timer, n)
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	for i := range n {
		k, task := keys[i%len(keys)], string(payload(run, i))
		timers[i] = time.AfterFunc(time.Until(clk.local(due[i])), func() {
			_ = b.rdb.Do(cctx, b.rdb.B().Lpush().Key(k.waiting()).Element(task).Build()).Error()
		})
	}
	starts, err := st.wait(lead + spread + timeout(b.cfg.short))
	if err != nil {
		return lateness{}, err
	}
	out := lateness{clock: clk}
	for i, s := range starts {
		local := clk.local(due[i])
		if s.Before(local) {
			out.early++
		}
		out.late = append(out.late, s.Sub(local))
	}
	return out, nil
}

// dueTimes are n moments on the Redis clock, uniformly spread over
// [lead, lead+spread) from the clock reading, to the nanosecond.
func dueTimes(clk clockReading, n int, lead, spread time.Duration) []time.Time {
	now := clk.redisNow()
	due := make([]time.Time, n)
	for i := range due {
		due[i] = now.Add(lead + rand.N(spread))
	}
	return due
}

// clockReading relates the Redis clock to this machine's.
type clockReading struct {
	offset time.Duration // Redis TIME minus the local clock
	rtt    time.Duration // of the read the offset comes from
}

// readClock reads Redis TIME a few times and keeps the read with the
// shortest round trip: the offset is Redis's time minus the local time at
// the midpoint of that round trip, so it is off by at most half of it.
func readClock(ctx context.Context, rdb rueidis.Client) (clockReading, error) {
	best := clockReading{rtt: time.Hour}
	for range 7 {
		sent := time.Now()
		v, err := rdb.Do(ctx, rdb.B().Time().Build()).AsStrSlice()
		got := time.Now()
		if err != nil {
			return clockReading{}, err
		}
		if len(v) != 2 {
			return clockReading{}, fmt.Errorf("TIME answered %q", v)
		}
		sec, err1 := strconv.ParseInt(v[0], 10, 64)
		usec, err2 := strconv.ParseInt(v[1], 10, 64)
		if err1 != nil || err2 != nil {
			return clockReading{}, fmt.Errorf("TIME answered %q", v)
		}
		if rtt := got.Sub(sent); rtt < best.rtt {
			mid := sent.Add(rtt / 2).Round(0) // wall clock only
			best = clockReading{offset: time.Unix(sec, usec*1000).Sub(mid), rtt: rtt}
		}
	}
	return best, nil
}

// redisNow is the Redis clock's time now, by the reading (wall clock only).
func (c clockReading) redisNow() time.Time { return time.Now().Round(0).Add(c.offset) }

// local turns a time on the Redis clock into one on this machine's.
func (c clockReading) local(t time.Time) time.Time { return t.Round(0).Add(-c.offset) }

// starts records when each task of a run first started, on the local
// clock.
type starts struct {
	run  string
	mu   sync.Mutex
	at   []time.Time
	seen int
	all  chan struct{}
}

func newStarts(run string, n int) *starts {
	return &starts{run: run, at: make([]time.Time, n), all: make(chan struct{})}
}

// started records a task's start now; repeats of a task are ignored.
func (s *starts) started(task []byte) {
	now := time.Now()
	i := taskIndex(s.run, task)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.at) || !s.at[i].IsZero() {
		return
	}
	s.at[i] = now
	if s.seen++; s.seen == len(s.at) {
		close(s.all)
	}
}

// wait returns every task's start once all have started.
func (s *starts) wait(limit time.Duration) ([]time.Time, error) {
	select {
	case <-s.all:
	case <-time.After(limit):
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, fmt.Errorf("only %d of %d tasks started within %v", s.seen, len(s.at), limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at, nil
}

// taskIndex is the number of a task made by payload(run, i), or -1.
func taskIndex(run string, task []byte) int {
	from := len(run) + 1
	if len(task) < from+10 || string(task[:len(run)]) != run {
		return -1
	}
	i, err := strconv.Atoi(string(task[from : from+10]))
	if err != nil {
		return -1
	}
	return i
}
