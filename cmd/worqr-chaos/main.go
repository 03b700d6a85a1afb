// Command worqr-chaos runs worqr under faults that really happen and
// checks what it promises: no task lost, none run twice unless a holder
// of it died or fenced itself (or its handler failed, and it was retried),
// persistent tasks never held by two live workers at once, nothing
// orphaned in Redis, and no worker left wedged. Jobs follow plans written
// in their payloads (plan.go): some fail and are retried, some exhaust
// their budget or fail permanently and must end in the dead letters with
// the right kind, some time out, some are delayed and must not start
// before they are due. A third job queue's tasks are grouped, under each
// group's concurrency limit, some groups sequences (a limit of 1): no
// group may have more than its limit in flight, judged by the Redis clock,
// no sequence may start a task after a later one, and none held on a dead
// task (the queue holds its sequences for the middle third of the run)
// may start one while held (groups.go).
// Workflows (chains, chords and diamonds, some with a step that fails
// permanently, some run with RunAfterFailure) share the run's rate: no
// step may start before its parents succeeded (or ended), none of a
// cancelled branch may run, and every workflow must end with every step
// as its parents and plan say (workflows.go).
//
// It starts its own redis-server (a free loopback port, a temporary
// directory, append-only file on), several worker processes (this binary
// again) running the handler runtime on two job queues and a queue of
// persistent tasks, and a producer. For -duration it injects faults at
// random: SIGKILL of a worker process (a new one takes its slot), SIGSTOP
// of one past the lease TTL and SIGCONT later (it wakes fenced), CLIENT
// KILL of the workers' command and pub/sub connections, CLIENT PAUSE
// longer than the lease TTL (every worker fences itself), and a Redis
// restart. With -mode holders it only kills or freezes, more often, the
// worker processes that hold persistent tasks. Then it stops the faults,
// lets the queues drain, checks, and prints a one-line summary. It exits
// 1 on any violation.
//
//	go run ./cmd/worqr-chaos -duration 60s     # what CI runs, then:
//	go run ./cmd/worqr-chaos -duration 60s -workers 4 -persistent 10 -ttl 2s -mode holders
//	go run ./cmd/worqr-chaos -duration 30m     # a soak
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

type config struct {
	duration    time.Duration
	mode        string
	workers     int
	persistent  int
	ttl         time.Duration
	rate        int
	seed        uint64
	drain       time.Duration
	redisServer string
	fsync       string
	keep        bool
	sabotage    string
	resp2       bool
	turnSize    int
}

const prefix = "chaos"

func main() {
	if len(os.Args) > 1 && os.Args[1] == workerFlag {
		workerMain(os.Args[2:])
		return
	}
	var cfg config
	flag.DurationVar(&cfg.duration, "duration", time.Minute, "how long to inject faults")
	flag.StringVar(&cfg.mode, "mode", modeMixed, "which faults strike:\n"+
		"mixed: every kind (SIGKILL, freeze, CLIENT KILL, CLIENT PAUSE, Redis restart), 1 to 4 s apart, any worker process;\n"+
		"holders: SIGKILL (and restart) or freeze of a worker process holding persistent tasks, 1.5 to 3.5 s apart")
	flag.IntVar(&cfg.workers, "workers", 3, "worker processes (at least 2)")
	flag.IntVar(&cfg.persistent, "persistent", 6, fmt.Sprintf("persistent tasks (at most %d per worker process beyond the first: survivors take a lost worker's share)", connConcurrency))
	flag.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "workers' lease TTL")
	flag.IntVar(&cfg.rate, "rate", 50, "tasks enqueued per second")
	flag.Uint64Var(&cfg.seed, "seed", 0, "random seed for faults and the producer (0: from the clock)")
	flag.DurationVar(&cfg.drain, "drain", time.Minute, "longest wait for the queues to drain once the faults stop")
	flag.StringVar(&cfg.redisServer, "redis-server", "redis-server", "redis-server binary")
	flag.StringVar(&cfg.fsync, "appendfsync", "always", "Redis appendfsync: always or everysec")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the run's directory (Redis data, worker logs) even when every check passes")
	flag.IntVar(&cfg.turnSize, "group-turn-size", 1, "the group queue's turn size (worqr.SetGroupTurnSize), under which the group checks (limits, sequence order, holds) run")
	flag.StringVar(&cfg.sabotage, "sabotage", "", "test the checks by breaking the workers on purpose; the run must FAIL:\n"+
		"linger: persistent handlers hold on for 2 TTL after their context ends (overlaps);\n"+
		"wedge: a worker stops taking jobs-a after its first fence (wedged);\n"+
		"lifecycle: delayed tasks are enqueued without their delay (early) and tasks planned to exhaust their budget succeed on their second attempt (endings);\n"+
		"groups: the group limits are set one higher than the checks judge by (group limit, sequence order);\n"+
		"holds: every sequence's own sequence hold is set off, while the checks judge them as following the queue's, and more of their tasks fail permanently (held sequence started);\n"+
		"workflows: the first step of some workflows enqueues a child's task itself before its work (a step started early, run twice)")
	flag.BoolVar(&cfg.resp2, "resp2", false, "run even-numbered worker slots over RESP2 (rueidis then gives pub/sub a connection of its own);\n"+
		"can fail with rueidis v1.0.79, which never replaces a RESP2 pub/sub connection the server closed:\n"+
		"a worker whose pub/sub connection was killed stays deaf to work until its command connection dies too")
	flag.Parse()
	if cfg.sabotage != "" && cfg.sabotage != sabotageLinger && cfg.sabotage != sabotageWedge && cfg.sabotage != sabotageLifecycle && cfg.sabotage != sabotageGroups && cfg.sabotage != sabotageHolds && cfg.sabotage != sabotageWorkflows {
		fmt.Fprintln(os.Stderr, "worqr-chaos: -sabotage is linger, wedge, lifecycle, groups, holds or workflows")
		os.Exit(2)
	}
	if cfg.workers < 2 || cfg.rate < 1 || cfg.ttl < worqr.MinTTL || (cfg.fsync != "always" && cfg.fsync != "everysec") {
		fmt.Fprintln(os.Stderr, "worqr-chaos: need -workers >= 2, -rate >= 1, -ttl >= 1s, -appendfsync always|everysec")
		os.Exit(2)
	}
	if cfg.mode != modeMixed && cfg.mode != modeHolders {
		fmt.Fprintln(os.Stderr, "worqr-chaos: -mode is mixed or holders")
		os.Exit(2)
	}
	if most := connConcurrency * (cfg.workers - 1); cfg.persistent < 1 || cfg.persistent > most {
		fmt.Fprintf(os.Stderr, "worqr-chaos: -persistent is 1 to %d with %d worker processes (%d handlers each)\n", most, cfg.workers, connConcurrency)
		os.Exit(2)
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	ok, err := runChaos(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worqr-chaos:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// runChaos does one chaos run. It reports whether every check passed; an error
// means the harness could not do its job.
func runChaos(cfg config) (ok bool, err error) {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x6368616f73))
	dir, err := os.MkdirTemp("", "worqr-chaos-")
	if err != nil {
		return false, err
	}
	defer func() {
		if ok && err == nil && !cfg.keep {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintln(os.Stderr, "worqr-chaos: Redis data and worker logs kept in", dir)
		}
	}()
	logDir := filepath.Join(dir, "logs")
	redisDir := filepath.Join(dir, "redis")
	for _, d := range []string{logDir, redisDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return false, err
		}
	}
	srv, err := startRedis(cfg.redisServer, redisDir, cfg.fsync)
	if err != nil {
		return false, err
	}
	defer srv.stop()
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	protocol := "RESP3"
	if cfg.resp2 {
		protocol = "RESP3 and RESP2"
	}
	say("worqr-chaos: Redis on %s (appendfsync %s), %d worker processes (%s), %d persistent tasks, TTL %v, %d tasks/s, %s faults for %v, seed %d",
		srv.addr(), cfg.fsync, cfg.workers, protocol, cfg.persistent, cfg.ttl, cfg.rate, cfg.mode, cfg.duration, cfg.seed)

	// The harness's own connections are named chaos-harness: the faults
	// never kill them.
	connect := func() (rueidis.Client, *worqr.Client, error) {
		rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.addr()}, DisableCache: true, ClientName: "chaos-harness"})
		if err != nil {
			return nil, nil, err
		}
		c, err := worqr.New(worqr.Options{Redis: rdb, Prefix: prefix, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return rdb, c, nil
	}
	admin, client, err := connect()
	if err != nil {
		return false, err
	}
	defer admin.Close()
	prodRdb, prodClient, err := connect()
	if err != nil {
		return false, err
	}
	defer prodRdb.Close()

	l := newLedger()
	l.ttl = cfg.ttl
	fl, err := newFleet(srv.addr(), prefix, cfg.ttl, logDir, l)
	if err != nil {
		return false, err
	}
	fl.sabotage, fl.resp2 = cfg.sabotage, cfg.resp2
	defer fl.killAll()
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-interrupted
		fl.killAll()
		srv.stop()
		fmt.Fprintln(os.Stderr, "worqr-chaos: interrupted; data kept in", dir)
		os.Exit(130)
	}()

	for slot := 1; slot <= cfg.workers; slot++ {
		if _, err := fl.spawn(slot); err != nil {
			return false, err
		}
	}
	if err := fl.waitReady(30 * time.Second); err != nil {
		return false, err
	}
	// The persistent tasks, one per simulated connection, enqueued as
	// such: no number of holders dying soon after taking them buries them
	// as poison.
	tasks := make(map[string]*taskInfo)
	var conns []string
	var batch [][]byte
	for i := range cfg.persistent {
		t := fmt.Sprintf("conn-%d", i)
		conns = append(conns, t)
		batch = append(batch, []byte(t))
		tasks[t] = &taskInfo{queue: connQueue, kind: "conn", copies: []int64{now()}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = client.EnqueueBatch(ctx, connQueue, batch, worqr.Persistent())
	if err == nil {
		extra := 0
		if cfg.sabotage == sabotageGroups {
			extra = 1
		}
		err = setGroupLimits(ctx, client, extra, cfg.sabotage == sabotageHolds, cfg.turnSize)
	}
	cancel()
	if err != nil {
		return false, err
	}
	if missing := until(10*time.Second, func() string {
		open := l.openRuns(conns)
		for _, t := range conns {
			if open[t] != 1 {
				return t + " not held"
			}
		}
		return ""
	}); missing != "" {
		return false, errors.New("persistent tasks at start: " + missing)
	}

	// Faults and production.
	t0 := now()
	// Workflows' steps take a tenth of the rate, the tasks the rest.
	wfRate := max(1, cfg.rate/10)
	prod := newProducer(prodClient, prodRdb, max(1, cfg.rate-wfRate), rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())))
	prod.noDelay = cfg.sabotage == sabotageLifecycle
	prod.seqDeaths = cfg.sabotage == sabotageHolds
	wfProd := &wfProducer{client: prodClient, rate: wfRate, rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), sabotage: cfg.sabotage == sabotageWorkflows}
	stopProducing := make(chan struct{})
	produced := make(chan error, 2)
	go func() { produced <- prod.run(stopProducing) }()
	go func() { produced <- wfProd.run(stopProducing) }()
	// The group queue holds its sequences on a dead task for the middle
	// third of the faults.
	holds := make(chan holdsVerdict, 1)
	start := time.Now()
	go func() { holds <- switchHolds(prodClient, start.Add(cfg.duration/3), start.Add(2*cfg.duration/3)) }()
	fa := newFaults(admin, srv, fl, cfg.ttl, cfg.mode, rng, t0, os.Stderr)
	faultErr := fa.run(time.Now().Add(cfg.duration))
	close(stopProducing)
	hv := <-holds
	if err := errors.Join(faultErr, <-produced, <-produced, hv.err); err != nil {
		return false, err
	}
	chk := &checker{client: client, admin: admin, prefix: prefix, fleet: fl, ledger: l, log: os.Stderr, t0: t0, conns: conns}
	chk.logf("faults over; waiting for every worker process to serve and the queues to drain")

	var violations []string
	if err := fl.waitReady(30 * time.Second); err != nil {
		violations = append(violations, err.Error())
	}
	jobs, unknown, refused := prod.jobs()
	jobNames := make([]string, 0, len(jobs))
	for t, info := range jobs {
		tasks[t] = info
		jobNames = append(jobNames, t)
	}
	drainStart := time.Now()
	// Every workflow must end, its last steps released and run: a notice
	// of a step's end that a fault kept its worker from carrying waits
	// for a sweep (FlowSweepEvery, once FlowSweepAge old).
	flows, wfRetries := wfProd.workflows()
	stepTasks(flows, tasks)
	wfStates, wfWaited := waitWorkflows(client, flows, cfg.drain)
	chk.logf("%d of %d workflows ended in %v", countEnded(wfStates), len(flows), wfWaited.Round(100*time.Millisecond))
	if missing := chk.drained(jobNames, cfg.drain); missing != "" {
		violations = append(violations, "drain: "+missing)
	} else {
		chk.logf("drained in %v", time.Since(drainStart).Round(100*time.Millisecond))
	}
	orphans, found, err := chk.orphans()
	if err != nil {
		return false, err
	}
	wedged, problem := chk.probe(tasks, 30*time.Second)
	if problem != "" {
		violations = append(violations, problem)
	}
	chk.logf("stopping the worker processes gracefully")
	if late := fl.stop(15 * time.Second); len(late) > 0 {
		violations = append(violations, fmt.Sprintf("worker processes %v did not shut down within 15s", late))
	}
	if n, missing := chk.janitor(cfg.ttl); missing != "" {
		violations = append(violations, "a new worker did not reclaim the workers left registered after shutdown: "+missing)
	} else if n > 0 {
		chk.logf("%d worker ids fenced shortly before shutdown were left registered; a new worker reclaimed them", n)
	}
	violations = append(violations, chk.finalState()...)
	counts, err := chk.atEnd()
	if err != nil {
		return false, err
	}
	for _, t := range conns {
		tasks[t].atEnd, tasks[t].checkedAtEnd = counts[t], true
	}
	more, found2, err := chk.orphans()
	if err != nil {
		return false, err
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	dead, err := chk.deadLetters(ctx)
	cancel()
	if err != nil {
		return false, err
	}
	chk.logf("worker processes stopped; Redis checked")
	orphans += more
	found = append(found, found2...)

	v := l.judge(tasks, dead, t0)
	gv := l.judgeGroups(tasks)
	hd := l.judgeHolds(tasks, dead, hv.from, hv.until)
	wv := l.judgeWorkflows(flows, wfStates, dead, t0)
	if v.delayStarts > 0 && v.retryStarts > 0 {
		// Redis rounds due times down to the millisecond: a margin down
		// to -1ms is on time (see earlyTolerance).
		chk.logf("closest starts to their due times (negative: before, by less than Redis's ms rounding): delayed tasks %v (of %d starts), retries %v (of %d)",
			v.delaySlack.Round(10*time.Microsecond), v.delayStarts, v.retrySlack.Round(10*time.Microsecond), v.retryStarts)
	}
	// Violations by class, each class listed on its own so that a flood
	// of one does not hide the others.
	classes := [][]string{violations}
	add := func(prefix string, list []string) {
		var c []string
		for _, s := range list {
			c = append(c, prefix+s)
		}
		classes = append(classes, c)
	}
	var lost []string
	for _, t := range v.lost {
		lost = append(lost, t+": "+l.history(t, t0))
	}
	add("lost ", lost)
	add("", v.unexplained)
	add("", v.overlaps)
	add("", v.strangeEnds)
	add("handler never ended: ", v.neverEnded)
	add("", v.problems)
	add("early: ", v.early)
	add("ending: ", v.endings)
	add("outcome not recorded: ", v.unsettled)
	add("orphan: ", found)
	add("wedged: ", wedged)
	add("group limit: ", gv.overLimit)
	add("sequence order: ", gv.outOfOrder)
	add("held sequence started: ", hd.heldStarts)
	add("workflow not ended: ", wv.notEnded)
	add("workflow step lost: ", wv.lost)
	add("workflow step early: ", wv.early)
	add("workflow cancelled step ran: ", wv.cancelledRan)
	add("workflow end: ", wv.wrongEnds)
	violations = nil
	for _, c := range classes {
		violations = append(violations, c...)
	}

	var kinds []string
	total := 0
	for _, k := range faultKinds {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, fa.counts[k]))
		total += fa.counts[k]
	}
	verdict := "PASS"
	if len(violations) > 0 {
		verdict = "FAIL"
		for _, c := range classes {
			sort.Strings(c)
			for i, s := range c {
				if i == 20 {
					say("... and %d more like it", len(c)-20)
					break
				}
				say("VIOLATION: %s", s)
			}
		}
	}
	// Dead letters by reason: those the plans and the poison guard make,
	// then any other (each also a violation).
	known := []string{worqr.ReasonPermanent, worqr.ReasonExhausted, worqr.ReasonTimeout, worqr.ReasonPoison}
	var others []string
	for k := range v.deadByReason {
		if !slices.Contains(known, k) {
			others = append(others, k)
		}
	}
	slices.Sort(others)
	var deadReasons []string
	deadTotal := 0
	for _, k := range append(known, others...) {
		deadReasons = append(deadReasons, fmt.Sprintf("%s=%d", k, v.deadByReason[k]))
		deadTotal += v.deadByReason[k]
	}
	fmt.Printf("worqr-chaos %s: %v mode=%s seed=%d workers=%d persistent=%d tasks=%d runs=%d faults=%d (%s; skipped=%d; connections killed normal=%d pubsub=%d) fences=%d enqueue-retries=%d/%d lost=%d duplicates=%d explained=%d (released=%d retried=%d) orphans=%d overlaps=%d wedged=%d handovers=%d max-rehold=%v woken-handlers=%d (ended at most %v after SIGCONT) latency p50=%v p99=%v max=%v failures=%d (retries=%d ambiguous=%d) dead=%d (%s; poison explained=%d) persistent-dead=%d delayed=%d early=%d timeouts=%d (unplanned=%d)\n",
		verdict, cfg.duration, cfg.mode, cfg.seed, cfg.workers, cfg.persistent, v.tasks, v.runs, total, strings.Join(kinds, " "), fa.skipped,
		fa.killed[faultKillNormal], fa.killed[faultKillPubsub], v.fences, unknown, unknown+refused,
		len(v.lost), v.duplicates, v.explained, v.byRelease, v.byRetry, orphans, len(v.overlaps), len(wedged),
		v.handovers, v.maxRehold.Round(10*time.Millisecond), v.thawEnds, v.maxThawEnd.Round(time.Millisecond),
		v.latency(0.5).Round(time.Millisecond), v.latency(0.99).Round(10*time.Millisecond), v.latency(1).Round(10*time.Millisecond),
		v.failedRuns, v.retried, v.ambiguous, deadTotal, strings.Join(deadReasons, " "), v.poisonExplained, v.persistentDead,
		v.delayed, len(v.early), v.timeouts, v.unplanned)
	fmt.Printf("worqr-chaos groups: runs=%d most-in-flight (limit 1: %d, limit 2: %d, limit %d: %d) over-limit=%d sequence-starts=%d (skipped=%d) out-of-order=%d turns=%v sequence-hold on for %v (held at its end: %d) held-starts=%d (sequences held %d, runs judged %d)\n",
		gv.runs, gv.most[1], gv.most[2], defaultGroupLimit, gv.most[defaultGroupLimit], len(gv.overLimit), gv.seqStarts, gv.seqSkipped, len(gv.outOfOrder),
		groupTurns, hv.on.Round(100*time.Millisecond), hv.held, len(hd.heldStarts), hd.holds, hd.judged)
	fmt.Printf("worqr-chaos workflows: %s\n", wv.summary(wfRetries, wfWaited))
	return len(violations) == 0, nil
}

// countEnded counts the workflows read ended.
func countEnded(states map[string]worqr.WorkflowInfo) int {
	n := 0
	for _, info := range states {
		if info.State != worqr.WorkflowRunning {
			n++
		}
	}
	return n
}
