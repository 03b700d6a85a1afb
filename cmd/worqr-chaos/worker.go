package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// The worker process: a worqr worker running the handler runtime on every
// queue of the run, reporting each handler's start and end, each process's
// outcome and each fence as JSON lines on its standard output. The harness
// starts it by running its own binary again with -worker-process first.
//
// Handlers by payload:
//   - job-N…: ordinary work, 1 to 20 ms (one in ten: 100 to 600 ms), then
//     what the job's plan says (see plan.go): nil, a planned failure
//     after 1 to 20 ms of work, a Permanent one, or waiting for the job
//     queues' timeout;
//   - wf-N-step…: a workflow's step, 1 to 20 ms of work, then what its
//     plan says (see workflows.go);
//   - conn-N: a persistent task, held until the context ends;
//   - probe-…: held until the harness writes "release" on standard input
//     (the end-of-run check that every worker still takes work).
//
// Any handler whose context ends stops at once and returns the cause.
//
// The job queues retry failed tasks after retryBackoff, MaxAttempts
// jobMaxAttempts, and time handlers out after jobTimeout. How each process
// ended (finished, retried, dead, lost) comes from a worqr observer.

// workerFlag makes the program a worker process.
const workerFlag = "-worker-process"

// Queues of the run and how many handlers each worker runs on each.
var (
	jobQueues = []string{"jobs-a", "jobs-b", groupQueue}
	connQueue = "conns"
)

// Ways to break a worker on purpose, to see the checks fail.
const (
	sabotageLinger = "linger" // persistent handlers hold on for 2 TTL after their context ends
	sabotageWedge  = "wedge"  // a worker stops taking one job queue's work after its first fence
	// The producer drops delayed tasks' delays, and handlers complete
	// tasks planned to exhaust their budget on their second attempt.
	sabotageLifecycle = "lifecycle"
	// The harness sets every group limit one higher than the verifier
	// judges by: groups run over their limit, sequences two at once.
	sabotageGroups = "groups"
)

const (
	jobConcurrency  = 4
	connConcurrency = 4
)

func allQueues() []string { return append(append([]string(nil), jobQueues...), wfQueue, connQueue) }

func concurrency(queue string) int {
	if queue == connQueue {
		return connConcurrency
	}
	return jobConcurrency
}

// reporter writes reports, one whole line per write: a line written
// before the process is killed is in the pipe, and the harness reads it.
type reporter struct {
	mu sync.Mutex
}

func (rp *reporter) emit(r report) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	r.T = now() // under the lock: each process's reports are in time order
	r.W = time.Now().UnixMicro()
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	if _, err := os.Stdout.Write(append(b, '\n')); err != nil {
		os.Exit(3) // the harness is gone
	}
}

func workerMain(args []string) {
	fs := flag.NewFlagSet("worker-process", flag.ExitOnError)
	name := fs.String("name", "", "worker process name")
	addr := fs.String("addr", "", "Redis address")
	prefix := fs.String("prefix", "", "key prefix")
	ttl := fs.Duration("ttl", worqr.DefaultTTL, "lease TTL")
	resp2 := fs.Bool("resp2", false, "speak RESP2 (a separate pub/sub connection) instead of RESP3")
	sabotage := fs.String("sabotage", "", "misbehave on purpose: linger or wedge (see -sabotage in -help)")
	_ = fs.Parse(args)
	if err := runWorker(*name, *addr, *prefix, *ttl, *resp2, *sabotage); err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: %v\n", *name, err)
		os.Exit(1)
	}
}

func runWorker(name, addr, prefix string, ttl time.Duration, resp2 bool, sabotage string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("process", name)
	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stopSignals()
	rp := &reporter{}

	// Standard input: "release" ends the probes; end of file means the
	// harness died, and so does this process.
	release := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		once := sync.Once{}
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "release" {
				once.Do(func() { close(release) })
			}
		}
		log.Error("standard input closed: the harness is gone")
		os.Exit(2)
	}()

	opt := rueidis.ClientOption{
		InitAddress:  []string{addr},
		DisableCache: true,
		ClientName:   "chaos-" + name, // the harness finds this process's connections by name
		AlwaysRESP2:  resp2,
	}
	var rdb rueidis.Client
	b := backoff{min: 50 * time.Millisecond, max: time.Second}
	for {
		var err error
		if rdb, err = rueidis.NewClient(opt); err == nil {
			break
		}
		log.Warn("connecting failed; retrying", "err", err)
		if !b.wait(ctx) {
			return nil
		}
	}
	defer rdb.Close()
	outcomes := &outcomes{}
	client, err := worqr.New(worqr.Options{Redis: rdb, Prefix: prefix, Logger: log, Observer: outcomes,
		DeadLetters: worqr.DeadLetterOptions{MaxCount: deadLetterMax}})
	if err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(uint64(now()), uint64(os.Getpid())))
	var rngMu sync.Mutex
	workTime := func(short bool) time.Duration {
		rngMu.Lock()
		defer rngMu.Unlock()
		if !short && rng.IntN(10) == 0 { // a slow one, likely in flight when a fault strikes
			return 100*time.Millisecond + randDur(rng, 500*time.Millisecond)
		}
		return time.Millisecond + randDur(rng, 20*time.Millisecond)
	}
	handler := func(hctx context.Context, p *worqr.Process) error {
		task := string(p.Task())
		rp.emit(report{Ev: "start", Q: p.Queue(), PID: p.ID(), Task: task, Owner: p.Owner(), Attempt: p.Attempt()})
		go func() {
			<-p.Done()
			rp.emit(report{Ev: "settled", Q: p.Queue(), PID: p.ID(), Cause: outcomes.of(p)})
		}()
		var err error
		switch {
		case strings.HasPrefix(task, "probe-"):
			select {
			case <-release:
			case <-hctx.Done():
				err = context.Cause(hctx)
			}
		case strings.HasPrefix(task, "conn-"):
			<-hctx.Done()
			err = context.Cause(hctx)
			if sabotage == sabotageLinger {
				time.Sleep(2 * ttl) // still using the connection: a broken handler
			}
		case strings.HasPrefix(task, "wf-"):
			err = doStep(hctx, p, client, workTime, sabotage == sabotageWorkflows)
		default:
			err = doJob(hctx, p, workTime, sabotage == sabotageLifecycle)
		}
		r := report{Ev: "end", Q: p.Queue(), PID: p.ID(), OK: err == nil}
		if err != nil {
			r.Cause = err.Error()
			switch {
			case errors.Is(err, worqr.ErrTaskTimeout):
				r.Fail = failTimeout
			case worqr.IsPermanent(err):
				r.Fail = failPermanent
			case strings.HasPrefix(err.Error(), plannedFailure):
				r.Fail = failPlanned
			}
		}
		rp.emit(r)
		return err
	}
	var wedge sync.Once
	var worker atomic.Pointer[worqr.Worker]
	onFenced := func(ev worqr.FenceEvent) {
		lost := make([]lostProc, len(ev.Lost))
		for i, p := range ev.Lost {
			lost[i] = lostProc{Q: p.Queue(), PID: p.ID(), Task: string(p.Task())}
		}
		rp.emit(report{Ev: "fence", Owner: ev.WorkerID, Cause: ev.Cause.Error(), Lost: lost})
		if w := worker.Load(); w != nil && sabotage == sabotageWedge {
			// Quietly stop taking one queue's work, as a worker that lost
			// its subscription for good would.
			wedge.Do(func() { _ = w.StopWork(context.Background(), jobQueues[0]) })
		}
	}

	// Join: register and serve every queue. A fault may strike half-way;
	// then close what was started (its leases expire if Redis is away)
	// and start again.
	var w *worqr.Worker
	b = backoff{min: 50 * time.Millisecond, max: time.Second}
	for w == nil {
		w, err = join(ctx, client, ttl, handler, onFenced)
		if err != nil {
			log.Warn("joining failed; retrying", "err", err)
			if !b.wait(ctx) {
				return nil
			}
		}
	}
	worker.Store(w)
	rp.emit(report{Ev: "ready", Owner: w.ID()})

	<-ctx.Done()
	// Graceful shutdown: ordinary handlers get a moment; persistent ones
	// are cancelled (cause ErrShutdown) and their tasks go back to the
	// front of the queue.
	grace, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := w.Shutdown(grace); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("shutdown", "err", err)
	}
	rp.emit(report{Ev: "exit"})
	return nil
}

func join(ctx context.Context, client *worqr.Client, ttl time.Duration, h worqr.Handler, onFenced func(worqr.FenceEvent)) (*worqr.Worker, error) {
	w, err := client.NewWorker(ctx, worqr.WorkerOptions{TTL: ttl, OnFenced: onFenced})
	if err != nil {
		return nil, err
	}
	for _, q := range allQueues() {
		opts := worqr.HandleOptions{Concurrency: concurrency(q)}
		if q != connQueue {
			opts.Retry = worqr.RetryPolicy{MaxAttempts: jobMaxAttempts, Backoff: retryBackoff}
			opts.Timeout = jobTimeout
		}
		if err := w.Handle(ctx, q, h, opts); err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), ttl)
			_ = w.Close(cctx)
			cancel()
			return nil, fmt.Errorf("handle %q: %w", q, err)
		}
	}
	return w, nil
}

// doJob runs a job by its plan: ordinary work, then nil or the planned
// failure; a planned timeout waits for the context to end. A context that
// ends early stops it with the cause.
func doJob(ctx context.Context, p *worqr.Process, workTime func(short bool) time.Duration, sabotage bool) error {
	pl, err := parsePlan(string(p.Task()))
	if err != nil {
		return worqr.Permanent(err) // a harness bug: the verifier reports the dead letter
	}
	failures := failuresBefore(p.LastError())
	if sabotage && pl.behave == behaveExhaust && failures > 0 {
		pl.behave = behavePlain
	}
	timedOut := strings.Contains(p.LastError(), worqr.ErrTaskTimeout.Error())
	var fail error
	switch {
	case pl.behave == behaveFail && failures < pl.fails, pl.behave == behaveExhaust:
		fail = fmt.Errorf("%s%d", plannedFailure, failures+1)
	case pl.behave == behavePermanent:
		fail = worqr.Permanent(errors.New(plannedPermanent))
	case pl.behave == behaveTimeouts, pl.behave == behaveTimeout && !timedOut:
		<-ctx.Done() // the queue's Timeout ends it, unless a fault does first
		return context.Cause(ctx)
	}
	// Failing attempts work briefly: a slow one would come near the
	// timeout.
	t := time.NewTimer(workTime(fail != nil))
	defer t.Stop()
	select {
	case <-t.C:
		return fail
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// doStep runs a workflow's step by its plan: brief work, then nil, a
// planned failure (a step planned to fail n times fails its first n
// attempts) or a permanent one. With sabotage, a step that names a child
// to start early enqueues that child's task, as a plain task, before its
// own work, which it makes long enough for the child to start first.
func doStep(ctx context.Context, p *worqr.Process, client *worqr.Client, workTime func(short bool) time.Duration, sabotage bool) error {
	pl, early, err := parseStep(string(p.Task()))
	if err != nil {
		return worqr.Permanent(err) // a harness bug: the verifier reports the dead letter
	}
	work := workTime(true)
	if sabotage && early != "" {
		if _, err := client.Enqueue(ctx, wfQueue, []byte(early)); err != nil {
			return err
		}
		work = 300 * time.Millisecond
	}
	var fail error
	switch failures := failuresBefore(p.LastError()); {
	case pl.permanent:
		fail = worqr.Permanent(errors.New(plannedPermanent))
	case failures < pl.fails:
		fail = fmt.Errorf("%s%d", plannedFailure, failures+1)
	}
	t := time.NewTimer(work)
	defer t.Stop()
	select {
	case <-t.C:
		return fail
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// deadLetterMax is the dead letters every client of the run keeps per
// queue: more than a run makes, so that none is trimmed before the
// verifier reads them.
const deadLetterMax = 1_000_000

// outcomes is the worker's observer: it records how each process ended,
// by queue and process id, for the settled report.
type outcomes struct{ m sync.Map }

// ObserveFinish is called before the process's Done channel closes when
// the runtime settled it (finished, retried, dead letter).
func (o *outcomes) ObserveFinish(_ context.Context, e worqr.FinishEvent) {
	o.m.Store(e.Queue+"/"+e.ProcessID, e.Outcome)
}

// of names how a process ended, once its Done channel is closed: lost
// (fenced, or given back at shutdown), cancelled or deleted from its
// error; else, the runtime having written its outcome, what the observer
// heard: finished, retried or dead.
func (o *outcomes) of(p *worqr.Process) string {
	v, seen := o.m.LoadAndDelete(p.Queue() + "/" + p.ID())
	err := p.Err()
	switch {
	case errors.Is(err, worqr.ErrTaskCancelled):
		return "cancelled"
	case errors.Is(err, worqr.ErrQueueDeleted):
		return "deleted"
	case errors.Is(err, worqr.ErrProcessLost):
		return outLost
	case !seen:
		return "unobserved"
	}
	switch v.(worqr.Outcome) {
	case worqr.OutcomeSucceeded:
		return outFinished
	case worqr.OutcomeRetried:
		return outRetried
	case worqr.OutcomeDead:
		return outDead
	default:
		return string(v.(worqr.Outcome))
	}
}

// backoff waits between retries, doubling up to max.
type backoff struct{ min, max, next time.Duration }

func (b *backoff) wait(ctx context.Context) bool {
	if b.next == 0 {
		b.next = b.min
	}
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, b.max)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
