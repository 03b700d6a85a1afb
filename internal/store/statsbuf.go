package store

import (
	"context"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/clock"
)

// The hot path's stats (enqueued, started and the waits, finished, retried
// and the runs, and finished and retried per kind for tasks with a kind)
// are counted here, by the client, from the replies of the
// enqueue, dequeue, finish and retry scripts, and written to the queue's
// stats hash (see stats.go) about once a second per queue: the counts
// ride, as one argument, on an enqueue, dequeue, finish or retry call of
// the queue made anyway
// once they are StatsFlushEvery old, and the script adds them with
// stats_add and stats_flush (common/stats.lua), as if it had counted them. A
// queue that goes idle with counts pending has them written by a call of
// their own (FlushIdleStats, which the client runs on a timer), and a
// client that closes writes all it holds (FlushStats). Counting in Lua
// cost a dequeue of 14 tasks about 20 µs; here it costs the client a
// fraction of a µs per task.
//
// Counts go to Redis at most once: a call that carried them and failed
// gives them back only when Redis says it did not run the script; a call
// whose outcome is unknown (the connection broke) loses them. A process
// that dies loses what it held: at most about a second of its queues'
// started and finished counts and times.

// StatsFlushEvery is how long a client holds a queue's counts before the
// next call of the queue carries them to Redis.
const StatsFlushEvery = time.Second

// statsIdleAfter is how long a queue with counts pending must have made no
// call before FlushIdleStats writes them with a call of their own: a
// queue busier than that carries them on its own calls.
const statsIdleAfter = 250 * time.Millisecond

// statsBuf holds the counts a client has not yet written, per queue. Nil
// when stats are off: every method is then a no-op.
type statsBuf struct {
	// notify is told when a queue gets counts pending while none were
	// (the client's timer starts then). Set before the store is used.
	notify func()

	// clock tells the time (the store's). Set before the store is used.
	clock clock.Clock

	mu sync.Mutex // guards every, idle and queues, and each pendingStats in queues
	// every and idle are StatsFlushEvery and statsIdleAfter; tests change
	// them (SetStatsTiming).
	every, idle time.Duration
	queues      map[string]*pendingStats // queues with counts pending
}

// pendingStats are a queue's counts not yet written.
type pendingStats struct {
	enqueued, started, finished, retried int64
	wait, run                            [HistogramBuckets]int64
	waitSum, runSum                      int64     // µs
	since                                time.Time // when the first of them was counted
	lastCall                             time.Time // the last call of the queue seen
	// kinds are the finished and retried counts of tasks with a kind,
	// by kind: nil while none ended (a queue without kinds makes none).
	// At most statsPendingKinds kinds are kept apart, later ones are
	// StatsOtherKind; the scripts bound them again (StatsKinds), for the
	// queue across its clients.
	kinds map[string]*[2]int64
}

// StatsKinds is how many kinds of tasks a queue's stats keep apart (see
// stats_kinds_map in common/stats.lua): the tasks of other kinds are counted
// under StatsOtherKind.
const StatsKinds = 10

// StatsOtherKind is the kind the stats count tasks of kinds past
// StatsKinds under: not a kind a task can have (kinds have no
// parentheses).
const StatsOtherKind = "(other)"

// statsPendingKinds bounds the kinds a client holds counts of per queue
// between two writes. Past StatsKinds, so that a client that sees many
// kinds at once does not fold into StatsOtherKind a kind the queue keeps
// apart, unless it sees that many.
const statsPendingKinds = 4 * StatsKinds

// kind is the counts of a kind, made if need be (StatsOtherKind's past
// the bound).
func (p *pendingStats) kind(kind string) *[2]int64 {
	c := p.kinds[kind]
	if c != nil {
		return c
	}
	if p.kinds == nil {
		p.kinds = make(map[string]*[2]int64)
	}
	if len(p.kinds) >= statsPendingKinds {
		kind = StatsOtherKind
		if c = p.kinds[kind]; c != nil {
			return c
		}
	}
	c = new([2]int64)
	p.kinds[kind] = c
	return c
}

func newStatsBuf(clk clock.Clock) *statsBuf {
	return &statsBuf{clock: clk, every: StatsFlushEvery, idle: statsIdleAfter, queues: make(map[string]*pendingStats)}
}

// statsCarry are counts taken out of the buffer to be written by one
// script call; zero (p nil) when there are none.
type statsCarry struct {
	queue string
	p     *pendingStats
}

// statsBucket is the histogram bucket of a duration of us µs: k such that
// 2^(k-1) < us <= 2^k, 0 for us <= 1, at most HistogramBuckets-1. It must
// agree with stats_bucket in common/stats.lua.
func statsBucket(us int64) int {
	if us <= 1 {
		return 0
	}
	return min(bits.Len64(uint64(us-1)), HistogramBuckets-1)
}

// The value names of the histogram buckets (see stats.go).
var waitNames, runNames = func() (w, u [HistogramBuckets]string) {
	for k := range HistogramBuckets {
		w[k], u[k] = "w"+strconv.Itoa(k), "u"+strconv.Itoa(k)
	}
	return
}()

// counts is the script argument that carries the counts: "" for none, else
// space-separated "<value name>=<n>" (see stats_add in common/stats.lua).
func (c statsCarry) counts() string {
	p := c.p
	if p == nil {
		return ""
	}
	var b strings.Builder
	add := func(name string, n int64) {
		if n <= 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(n, 10))
	}
	add("e", p.enqueued)
	add("s", p.started)
	add("f", p.finished)
	add("r", p.retried)
	for k, n := range p.wait {
		add(waitNames[k], n)
	}
	add("ws", p.waitSum)
	for k, n := range p.run {
		add(runNames[k], n)
	}
	add("us", p.runSum)
	for kind, c := range p.kinds {
		add("f/"+kind, c[0])
		add("r/"+kind, c[1])
	}
	return b.String()
}

// pending returns the queue's entry, made if it had none (then made
// reports true: the caller tells notify), and marks a call of the queue.
// Callers hold b.mu.
func (b *statsBuf) pending(queue string, now time.Time) (p *pendingStats, made bool) {
	p = b.queues[queue]
	if p == nil {
		p = &pendingStats{since: now}
		b.queues[queue] = p
		made = true
	}
	p.lastCall = now
	return p, made
}

// take returns the queue's counts for a call of it to carry, if they are
// StatsFlushEvery old, and notes the call.
func (b *statsBuf) take(queue string) statsCarry {
	if b == nil {
		return statsCarry{}
	}
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.queues[queue]
	if p == nil {
		return statsCarry{}
	}
	p.lastCall = now
	if now.Sub(p.since) < b.every {
		return statsCarry{}
	}
	delete(b.queues, queue)
	return statsCarry{queue: queue, p: p}
}

// sent settles counts a call carried: sendErr is the error that kept the
// call from being sent (a test's fault), else res is its reply. The counts
// are given back when the script did not run, else they are gone: written,
// or, when the outcome is unknown, lost rather than perhaps counted twice.
func (b *statsBuf) sent(c statsCarry, sendErr error, res rueidis.RedisResult) {
	if c.p == nil {
		return
	}
	if sendErr == nil && !scriptNotRun(res.Error()) {
		return
	}
	now := b.clock.Now()
	b.mu.Lock()
	p, made := b.pending(c.queue, now)
	p.enqueued += c.p.enqueued
	p.started += c.p.started
	p.finished += c.p.finished
	p.retried += c.p.retried
	for k := range p.wait {
		p.wait[k] += c.p.wait[k]
		p.run[k] += c.p.run[k]
	}
	p.waitSum += c.p.waitSum
	p.runSum += c.p.runSum
	for kind, n := range c.p.kinds {
		k := p.kind(kind)
		k[0] += n[0]
		k[1] += n[1]
	}
	if c.p.since.Before(p.since) {
		p.since = c.p.since
	}
	b.mu.Unlock()
	if made && b.notify != nil {
		b.notify()
	}
}

// scriptNotRun reports whether err is Redis's answer that it did not run
// the script at all: loading, busy with another script, a cluster between
// states or redirecting, a replica refusing writes (its first write would
// be the stats'). Any other error may come after the script ran.
func scriptNotRun(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	switch code {
	case "LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "NOSCRIPT", "MOVED", "ASK":
		return true
	}
	return false
}

// enqueued counts n tasks an enqueue of queue added.
func (b *statsBuf) enqueued(queue string, n int) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	p, made := b.pending(queue, b.clock.Now())
	p.enqueued += int64(n)
	b.mu.Unlock()
	if made && b.notify != nil {
		b.notify()
	}
}

// started counts the processes a dequeue of queue took and their waits:
// from when each task became due to its dequeue, which its process id
// is (both µs by the Redis clock).
func (b *statsBuf) started(queue string, procs []Proc) {
	if b == nil || len(procs) == 0 {
		return
	}
	now := b.clock.Now()
	b.mu.Lock()
	p, made := b.pending(queue, now)
	p.started += int64(len(procs))
	for _, pr := range procs {
		since := pr.Task.Since()
		if since <= 0 {
			continue // an entry worqr did not write: counted, not timed
		}
		wait := max(int64(PIDSeq(pr.PID))-since, 0)
		p.wait[statsBucket(wait)]++
		p.waitSum += wait
	}
	b.mu.Unlock()
	if made && b.notify != nil {
		b.notify()
	}
}

// ended counts the processes a finish (retried false) or a retry of queue
// ended, those that were active, with their runs: from their dequeue (their
// process ids) to clock, the script's time (µs, Redis clock). kinds are
// their tasks' kinds, nil when none has one.
func (b *statsBuf) ended(queue string, retried bool, clock int64, pids, kinds []string, outs []Outcome) {
	if b == nil {
		return
	}
	n := 0
	for _, o := range outs {
		if o == WasActive || o == WasReleased {
			n++
		}
	}
	if n == 0 {
		return
	}
	now := b.clock.Now()
	b.mu.Lock()
	p, made := b.pending(queue, now)
	if retried {
		p.retried += int64(n)
	} else {
		p.finished += int64(n)
	}
	for i, o := range outs {
		if o != WasActive && o != WasReleased {
			continue
		}
		run := max(clock-int64(PIDSeq(pids[i])), 0)
		p.run[statsBucket(run)]++
		p.runSum += run
		if kinds != nil && kinds[i] != "" {
			k := p.kind(kinds[i])
			if retried {
				k[1]++
			} else {
				k[0]++
			}
		}
	}
	b.mu.Unlock()
	if made && b.notify != nil {
		b.notify()
	}
}

// Started counts, with its wait, a process the client starts that no
// dequeue of its own took: one an enqueue handed to it (see enqueue.lua).
func (s *Store) Started(queue string, p Proc) { s.stats.started(queue, []Proc{p}) }

// takeAll takes the counts to write with calls of their own: every
// queue's (queue ""), one queue's, or (idle) those of the queues that
// are StatsFlushEvery old and made no call for statsIdleAfter.
func (b *statsBuf) takeAll(queue string, idle bool) []statsCarry {
	if b == nil {
		return nil
	}
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []statsCarry
	for q, p := range b.queues {
		if queue != "" && q != queue {
			continue
		}
		if idle && (now.Sub(p.since) < b.every || now.Sub(p.lastCall) < b.idle) {
			continue
		}
		delete(b.queues, q)
		out = append(out, statsCarry{queue: q, p: p})
	}
	return out
}

// nextIdle is when takeAll(idle) will next take something, zero if no
// counts are pending.
func (b *statsBuf) nextIdle() time.Time {
	if b == nil {
		return time.Time{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var next time.Time
	for _, p := range b.queues {
		at := p.since.Add(b.every)
		if idle := p.lastCall.Add(b.idle); idle.After(at) {
			at = idle
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// OnStatsPending sets fn to be told when a queue gets stats counts pending
// while it had none (see FlushIdleStats). Call it before using the store;
// fn must not block.
func (s *Store) OnStatsPending(fn func()) {
	if s.stats != nil {
		s.stats.notify = fn
	}
}

// SetStatsTiming changes how long counts are held before a call carries
// them or FlushIdleStats writes them (every, StatsFlushEvery), and how long
// a queue must make no call for FlushIdleStats to write them (idle; zero
// keeps it). For tests.
func (s *Store) SetStatsTiming(every, idle time.Duration) {
	if s.stats != nil {
		s.stats.mu.Lock()
		s.stats.every = every
		if idle > 0 {
			s.stats.idle = idle
		}
		s.stats.mu.Unlock()
	}
}

// FlushStats writes the stats counts the client holds for queue (every
// queue when ""), each queue's with one call. It returns the first error;
// counts whose call surely did not run are kept for a later write.
func (s *Store) FlushStats(ctx context.Context, queue string) error {
	return s.writeStats(ctx, s.stats.takeAll(queue, false))
}

// FlushIdleStats writes the stats counts of the queues that hold them for
// StatsFlushEvery and made no call that could carry them for a while, and
// returns when it should run next (see StatsNextIdle).
func (s *Store) FlushIdleStats(ctx context.Context) (next time.Time, err error) {
	err = s.writeStats(ctx, s.stats.takeAll("", true))
	return s.stats.nextIdle(), err
}

// StatsNextIdle is when FlushIdleStats will next have counts to write,
// zero if none are pending.
func (s *Store) StatsNextIdle() time.Time { return s.stats.nextIdle() }

func (s *Store) writeStats(ctx context.Context, carries []statsCarry) error {
	var first error
	for _, c := range carries {
		k := s.keys.Queue(c.queue)
		res, err := s.run(ctx, OpStats, c.queue, s.scripts.Stats, []string{k.Stats, k.Meta}, []string{c.counts()})
		s.stats.sent(c, err, res)
		if err == nil {
			err = res.Error()
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}
