package worqr

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envLimitChild makes the test binary a worker process of
// TestConcurrencyLimitAcrossProcesses: "addr|prefix|queue|log key|name".
const envLimitChild = "WORQR_TEST_LIMIT_CHILD"

// The handlers' log: each handler appends its start and its end, stamped
// by the Redis clock in µs: "s|e|x,<process>,<handler seq>,<task>,<weight>,<µs>"
// (e: it ran to the end; x: its context ended first).
var logRecord = rueidis.NewLuaScript(`local t = redis.call('TIME')
redis.call('RPUSH', KEYS[1], ARGV[1] .. ',' .. t[1] .. string.format('%06d', tonumber(t[2])))
return 1`)

// A fleet-wide concurrency limit with weighted tasks holds across worker
// processes while some are SIGKILLed and one is fenced (SIGSTOPped past its
// lease, then resumed): the weight in flight, sampled atomically in Redis
// and computed from the handlers' own start and end records, never exceeds
// the limit, and every task is done. Real Redis only: the workers are
// separate processes (this test binary, run again).
func TestConcurrencyLimitAcrossProcesses(t *testing.T) {
	if spec := os.Getenv(envLimitChild); spec != "" {
		limitChild(t, spec)
		return
	}
	addr := os.Getenv(envRedis)
	if addr == "" || os.Getenv(envCluster) != "" {
		t.Skip("needs worker processes on one real Redis: set " + envRedis)
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads process states from /proc")
	}
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	const limit, n, queue = 6, 300, "limited"
	logKey := b.prefix + ":test-log"
	t.Cleanup(func() { _ = c.core.Redis.Do(context.Background(), c.core.Redis.B().Del().Key(logKey).Build()).Error() })
	require.NoError(t, c.SetConcurrency(ctx, queue, limit, CreateQueue()))
	tasks := make([][]byte, 0, n)
	for i := range n {
		tasks = append(tasks, fmt.Appendf(nil, "%d,%d", i, 1+i%3))
	}
	for _, weight := range []int{1, 2, 3} {
		var batch [][]byte
		for i := weight - 1; i < n; i += 3 {
			batch = append(batch, tasks[i])
		}
		require.NoError(t, second(c.EnqueueBatch(ctx, queue, batch, Weight(weight))))
	}

	// The worker processes.
	type child struct {
		name   string
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		out    *strings.Builder
		exited chan struct{}
	}
	var children []*child
	start := func(name string) *child {
		cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrencyLimitAcrossProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), envLimitChild+"="+strings.Join([]string{addr, b.prefix, queue, logKey, name}, "|"))
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		ch := &child{name: name, cmd: cmd, stdin: stdin, out: &strings.Builder{}, exited: make(chan struct{})}
		cmd.Stdout, cmd.Stderr = &syncWriter{w: ch.out}, &syncWriter{w: ch.out}
		require.NoError(t, cmd.Start())
		go func() { _ = cmd.Wait(); close(ch.exited) }()
		children = append(children, ch)
		return ch
	}
	t.Cleanup(func() {
		for _, ch := range children {
			_ = ch.cmd.Process.Signal(syscall.SIGCONT)
			_ = ch.cmd.Process.Kill()
			<-ch.exited
		}
	})
	for i := range 4 {
		start(fmt.Sprintf("w%d", i))
	}

	// Sample the weight in flight, atomically (queue_info.lua).
	var sampled, samples atomic.Int64
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		for {
			select {
			case <-stopSampling:
				return
			default:
			}
			if info, err := c.QueueInfo(ctx, queue); err == nil {
				samples.Add(1)
				if info.InFlightWeight > sampled.Load() {
					sampled.Store(info.InFlightWeight)
				}
			}
		}
	}()

	redisNow := func() int64 {
		t.Helper()
		ts, err := c.core.Redis.Do(ctx, c.core.Redis.B().Time().Build()).AsStrSlice()
		require.NoError(t, err)
		sec, err1 := strconv.ParseInt(ts[0], 10, 64)
		us, err2 := strconv.ParseInt(ts[1], 10, 64)
		require.NoError(t, err1)
		require.NoError(t, err2)
		return sec*1_000_000 + us
	}
	logged := func(at int64) func() bool {
		return func() bool {
			l, err := c.core.Redis.Do(ctx, c.core.Redis.B().Llen().Key(logKey).Build()).AsInt64()
			return err == nil && l >= at
		}
	}
	killed := make(map[string]int64) // process -> Redis time after it was reaped
	frozen := make(map[string]int64) // process -> Redis time once it was stopped
	// A child writes its worker id once it has started; the log can reach
	// a count from the others first.
	workerID := func(ch *child) string {
		t.Helper()
		var id string
		eventually(t, 10*time.Second, ch.name+" wrote its worker id", func() bool {
			v, err := c.core.Redis.Do(ctx, c.core.Redis.B().Hget().Key(logKey+":ids").Field(ch.name).Build()).ToString()
			if rueidis.IsRedisNil(err) {
				return false
			}
			require.NoError(t, err)
			id = v
			return true
		})
		return id
	}
	held := func(id string) int {
		procs, err := c.Processes(ctx, queue)
		require.NoError(t, err)
		return len(slices.DeleteFunc(procs, func(p ProcessInfo) bool { return p.Owner != id }))
	}
	// Faults strike a process that holds work (it is sure to hold some a
	// moment later); orphaned counts the processes they left behind.
	orphaned := 0
	holding := func(ch *child) string {
		id := workerID(ch)
		eventually(t, 10*time.Second, ch.name+" holds work", func() bool { return held(id) > 0 })
		return id
	}
	kill := func(ch *child) {
		id := holding(ch)
		require.NoError(t, ch.cmd.Process.Signal(syscall.SIGKILL))
		recv(t, ch.exited, 10*time.Second, ch.name+" reaped")
		killed[ch.name] = redisNow()
		orphaned += held(id)
	}

	// 1. SIGKILL a worker process mid-run; another takes its place.
	eventually(t, 15*time.Second, "40 handler records", logged(40))
	kill(children[0])
	start("w4")

	// 2. Fence one: SIGSTOP it until its processes are reclaimed, then
	// SIGCONT it.
	eventually(t, 15*time.Second, "150 handler records", logged(150))
	victim := children[1]
	id := holding(victim)
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGSTOP))
	eventually(t, 5*time.Second, victim.name+" stopped", func() bool { return processState(victim.cmd.Process.Pid) == 'T' })
	frozen[victim.name] = redisNow()
	orphaned += held(id)
	eventually(t, 15*time.Second, "the stopped worker's processes are reclaimed", func() bool {
		return held(id) == 0 && leasesExpired(t, c, id, queue)
	})
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGCONT))

	// 3. SIGKILL another.
	eventually(t, 15*time.Second, "350 handler records", logged(350))
	kill(children[2])
	start("w5")

	// Every task is done.
	eventually(t, 25*time.Second, "every task done", func() bool {
		info, err := c.QueueInfo(ctx, queue)
		return err == nil && info.Waiting == 0 && info.Delayed == 0 && info.InFlight == 0
	})
	close(stopSampling)
	sampling.Wait()
	for _, ch := range children {
		if _, gone := killed[ch.name]; !gone {
			_ = ch.stdin.Close() // the process closes its worker and exits
			recv(t, ch.exited, 15*time.Second, ch.name+" exits")
			assert.True(t, ch.cmd.ProcessState.Success(), "%s: %s", ch.name, ch.out)
		}
	}

	// The handlers' records, as intervals of weight.
	entries, err := c.core.Redis.Do(ctx, c.core.Redis.B().Lrange().Key(logKey).Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(t, err)
	type span struct {
		proc            string
		weight          int
		task            string
		start, end      int64
		ended, finished bool
	}
	spans := make(map[string]*span) // process/seq
	done := make(map[string]bool)   // task -> some handler ran it to the end
	for _, e := range entries {
		f := strings.Split(e, ",")
		require.Len(t, f, 6, e)
		at, err := strconv.ParseInt(f[5], 10, 64)
		require.NoError(t, err)
		key := f[1] + "/" + f[2]
		switch f[0] {
		case "s":
			w, err := strconv.Atoi(f[4])
			require.NoError(t, err)
			spans[key] = &span{proc: f[1], weight: w, task: f[3], start: at, end: at}
		default:
			s := spans[key]
			require.NotNil(t, s, e)
			s.end, s.ended, s.finished = at, true, f[0] == "e"
			done[s.task] = done[s.task] || s.finished
		}
	}
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, s := range spans {
		if k, ok := killed[s.proc]; ok && !s.ended {
			s.end = max(s.start, k) // it ran until its process died
		}
		if f, ok := frozen[s.proc]; ok && s.start < f && s.end > f {
			// It stopped with its process; its lease ran out and the task
			// was reclaimed, so what it did after SIGCONT (before it found
			// out) was no longer in flight.
			s.end = f
		}
		edges = append(edges, edge{s.start, s.weight}, edge{s.end, -s.weight})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta // ends before starts at the same instant
	})
	peak, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	assert.Len(t, done, n, "every task ran to its end in some handler")
	assert.LessOrEqual(t, peak, limit, "weight of the handlers running at once")
	assert.GreaterOrEqual(t, peak, limit-2, "the limit was reached (up to a weight that did not fit)")
	assert.LessOrEqual(t, sampled.Load(), int64(limit), "weight in flight sampled in Redis (%d samples)", samples.Load())
	assert.Positive(t, sampled.Load())
	// (An orphaned process's handler may not have logged its start before
	// the fault, so runs need not exceed tasks by as many.)
	assert.Positive(t, orphaned, "the faults left processes to reclaim, and every task was done")
	info, err := c.QueueInfo(ctx, queue)
	require.NoError(t, err)
	assert.Zero(t, info.InFlightWeight)
	t.Logf("%d handler runs for %d tasks, %d processes orphaned by faults; peak weight %d computed, %d sampled in %d samples",
		len(spans), n, orphaned, peak, sampled.Load(), samples.Load())
}

// limitChild is one worker process of TestConcurrencyLimitAcrossProcesses:
// it serves the queue, logging each handler's start and end, until its
// stdin closes.
func limitChild(t *testing.T, spec string) {
	f := strings.Split(spec, "|")
	require.Len(t, f, 5)
	addr, prefix, queue, logKey, name := f[0], f[1], f[2], f[3], f[4]
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err)
	defer rdb.Close()
	c, err := New(Options{Redis: rdb, Prefix: prefix, PoisonLimit: -1, Logger: testLogger(t)})
	require.NoError(t, err)
	defer func() { _ = c.Close(context.Background()) }()
	ctx := context.Background()
	// A lease renewed ten times per TTL: only a stall of 2 s fences a
	// worker that is not stopped on purpose.
	w, err := c.NewWorker(ctx, WorkerOptions{TTL: 2 * time.Second, RenewInterval: 200 * time.Millisecond})
	require.NoError(t, err)
	record := func(kind string, seq int64, task []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// The task is "<index>,<weight>".
		err := logRecord.Exec(ctx, rdb, []string{logKey}, []string{fmt.Sprintf("%s,%s,%d,%s", kind, name, seq, task)}).Error()
		if err != nil {
			t.Errorf("log %s: %v", kind, err)
		}
	}
	var seq atomic.Int64
	h := func(ctx context.Context, p *Process) error {
		n := seq.Add(1)
		record("s", n, p.Task())
		select {
		case <-time.After(50 * time.Millisecond): // the work
			record("e", n, p.Task())
		case <-ctx.Done():
			record("x", n, p.Task())
		}
		return nil
	}
	require.NoError(t, w.Handle(ctx, queue, h, HandleOptions{Concurrency: 4}))
	require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(logKey+":ids").FieldValue().FieldValue(name, w.ID()).Build()).Error())
	_, _ = io.Copy(io.Discard, os.Stdin)
	require.NoError(t, w.Close(ctx))
}

// processState is a process's state letter from /proc (T: stopped).
func processState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ...: comm may hold spaces, so look after its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// syncWriter lets a process's stdout and stderr share one buffer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
