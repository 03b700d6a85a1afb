// Command worqr-bench measures worqr against the least Redis work a
// reliable queue needs, done with rueidis directly in the same run: LPUSH
// to enqueue, LMOVE from the queue into a per-consumer list to take, LREM
// to acknowledge, auto-pipelined across the same number of goroutines.
// Every worqr throughput is reported as a ratio to that baseline, because
// on a shared machine the absolute numbers move from run to run and the
// ratio moves much less.
//
//	go run ./cmd/worqr-bench -redis 127.0.0.1:6391                 # every scenario, 3 runs
//	go run ./cmd/worqr-bench -redis 127.0.0.1:6391 -scenario enqueue,latency -runs 5
//	go run ./cmd/worqr-bench -redis 10.0.0.1:7000,10.0.0.2:7000 -queues 3  # a Redis Cluster
//	go run ./cmd/worqr-bench -redis 127.0.0.1:7101 -single 127.0.0.1:6391 -scenario shards -queues 30
//	go run ./cmd/worqr-bench -short                               # smoke run on an embedded miniredis
//
// Scenarios: enqueue, bulk, process, latency, recovery, memory, fanout,
// delay, burst, retry, idle, limits, priorities, rate, multiqueue, batch,
// aggregate, stats, kinds, shards, groups, workflow (see
// BENCHMARKS.md for what each does and its target). Each
// prints one JSON line on standard output and a human summary on standard
// error. Targets are reported, never enforced: the exit status says only
// whether the program ran.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// config is what the flags say.
type config struct {
	addrs       []string
	resp2       bool
	scenarios   []string
	runs        int
	short       bool
	queues      int
	concurrency int
	verbose     bool
	fleet       []int // the idle scenario's fleet sizes
	fleetApart  bool  // the idle scenario gives each worker a client and connection of its own
	// fleetClients spreads the idle scenario's fleet evenly over this many
	// clients, each with a connection of its own (1: one client, on the
	// bench's connection).
	fleetClients int
	// fleetRenew, if set, is the idle scenario's workers' renew interval,
	// with a TTL three times as long (metrics w<N>_..._r<interval>_).
	fleetRenew time.Duration
	// fleetOneConn gives each of the idle scenario's own clients one
	// connection, pinged only after it has been quiet for the renew
	// interval (metrics w<N>_..._1c_).
	fleetOneConn bool
	// fleetKeepAlive, if set, is the rueidis Dialer.KeepAlive of the idle
	// scenario's own clients: how long a connection stays quiet before
	// rueidis PINGs it (metrics w<N>_..._ka<interval>_).
	fleetKeepAlive time.Duration
	// groupsVariant, if set, is the one variant the groups scenario runs
	// (groups10k, ...), without its memory, fairness and turns measures:
	// builds compared on one variant alternate in seconds, so the
	// machine's load moves less between them.
	groupsVariant string
	// fleetProbe, if set, is how many plain tasks' pickups the idle
	// scenario measures before each fleet starts and while it renews.
	fleetProbe int
	// fleetRecovery has the idle scenario kill a worker process among
	// each fleet and time its tasks' return.
	fleetRecovery bool
	// recoveryTTLs, if set, are the TTLs the recovery scenario measures.
	recoveryTTLs []time.Duration
	// single are the addresses of the single Redis the shards scenario
	// compares a Cluster with.
	single []string
}

// bench is what every scenario runs against.
type bench struct {
	cfg config
	rdb rueidis.Client
	// embedded is set when rdb is an in-process miniredis: numbers from it
	// say nothing about Redis, and the server statistics are missing.
	embedded bool
	// queues are the queue names, each hashing to a different part of the
	// slot space, so that on a Cluster they land on different shards.
	queues []string
	log    *slog.Logger
	// single, if set (-single), is a bench on a single Redis that the
	// shards scenario runs its workload on too, as its baseline.
	single *bench
}

// scenario is one group of measurements.
type scenario struct {
	name string
	run  func(ctx context.Context, b *bench) (*result, error)
	// targets are the goals, checked against the medians.
	targets []target
}

func scenarios() []scenario {
	return []scenario{
		{"enqueue", runEnqueue, []target{atLeast("batch_tasks_per_s", 1e6), atLeast("single_ratio", 0.8)}},
		{"bulk", runBulk, []target{atLeast("batch_ratio", 0.54)}},
		{"process", runProcess, []target{atLeast("ratio", 0.7)}},
		{"latency", runLatency, []target{atMost("p99_ms", 2), atMost("p99_ratio", 1.2), atMost("started_twice", 0)}},
		{"recovery", runRecovery, []target{
			atMost("ttl3s_recovery_s", 4), atMost("ttl1s_recovery_s", 2),
			atMost("ttl3s_after_expiry_ms", 100), atMost("ttl1s_after_expiry_ms", 100),
			atMost("lost", 0),
		}},
		{"memory", runMemory, []target{
			atMost("waiting_bytes_per_task", payloadSize+64), atMost("inflight_bytes_per_task", payloadSize+200),
		}},
		{"fanout", runFanout, []target{atMost(fmt.Sprintf("trickle_w%d_started_twice", fanoutWorkers), 0)}},
		{"delay", runDelay, []target{atMost("p99_ms", 2), atMost("early", 0)}},
		{"burst", runBurst, []target{atLeast("ratio", 0.8)}},
		{"multiqueue", runMultiqueue, nil},
		{"batch", runBatch, nil},
		{"aggregate", runAggregate, nil},
		{"retry", runRetry, []target{atLeast("ratio", 0.45)}},
		{"idle", runIdle, []target{atMost("w1000_redis_cpu_pct", 1)}},
		{"limits", runLimits, []target{
			atLeast("nonbinding_ratio", 0.95),
			atMost("binding_w1_peak_weight", 8), atLeast("binding_w1_ratio_to_ideal", 0.9),
			atMost("binding_w2_peak_weight", 8), atLeast("binding_w2_ratio_to_ideal", 0.9),
		}},
		{"priorities", runPriorities, nil},
		{"rate", runRate, []target{atMost("max_starts_in_window", 100), atMost("early", 0)}},
		{"stats", runStats, []target{atLeast("ratio", 0.95)}},
		{"workflow", runWorkflow, []target{atMost("per_task_ratio", 1.5), atMost("release_p99_ms", 2), atMost("release_longest_call_ms", 20)}},
		{"kinds", runKinds, []target{atLeast("ratio", 0.95)}},
		{"shards", runShards, nil},
		{"groups", runGroups, []target{
			atLeast("groups10_ratio", 0.8), atLeast("groups10k_ratio", 0.8), atLeast("limit1_groups1k_ratio", 0.6),
			atMost("fair_flood_starts_before_last_small", 2000), atMost("fair_turn8_flood_starts_before_last_small", 2000),
			atLeast("turns3_starts_per_turns1_start", 2.7), atMost("turns3_starts_per_turns1_start", 3.3),
		}},
	}
}

// atLeast is the target that a metric's median be at least limit.
func atLeast(metric string, limit float64) target {
	return target{Metric: metric, Op: ">=", Limit: limit}
}

// atMost is the target that a metric's median be at most limit.
func atMost(metric string, limit float64) target {
	return target{Metric: metric, Op: "<=", Limit: limit}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		if err := crashChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "worqr-bench child:", err)
			os.Exit(1)
		}
		return
	}
	redisFlag := flag.String("redis", "", "comma-separated Redis addresses (a Cluster is detected); empty runs an embedded miniredis, for smoke runs only")
	scenarioFlag := flag.String("scenario", "all", "comma-separated scenarios: enqueue, bulk, process, latency, recovery, memory, fanout, delay, burst, retry, idle, limits, priorities, rate, multiqueue, batch, aggregate, stats, kinds, shards, groups, workflow, or all")
	runs := flag.Int("runs", 3, "runs of each scenario; the median and min–max are reported")
	short := flag.Bool("short", false, "small counts, one run, seconds in all: a smoke test")
	queues := flag.Int("queues", 1, "queues to spread the work over; names hash to different slots, so a Cluster's shards share it")
	concurrency := flag.Int("concurrency", 50, "goroutines that enqueue, and handlers (and baseline consumers) per queue")
	resp2 := flag.Bool("resp2", false, "speak RESP2 to a real Redis (RESP3 is the default)")
	verbose := flag.Bool("v", false, "log worqr's warnings to standard error")
	fleet := flag.String("fleet", "100,1000", "comma-separated fleet sizes (workers) for the idle scenario")
	fleetApart := flag.Bool("fleet-apart", false, "idle scenario: give each worker a client and a connection of its own, as a fleet of one-worker processes has (metrics w<N>_apart_...)")
	fleetRenew := flag.Duration("fleet-renew", 0, "idle scenario: the workers' renew interval, with a TTL three times as long (metrics w<N>_..._r<interval>_); 0 is the defaults (1.5s, TTL 3s)")
	fleetOneConn := flag.Bool("fleet-one-conn", false, "idle scenario, with -fleet-apart or -fleet-clients: each client gets one connection (rueidis PipelineMultiplex -1), pinged by rueidis only after it has been quiet for the renew interval (Dialer.KeepAlive; metrics w<N>_..._1c_)")
	fleetKeepAlive := flag.Duration("fleet-keepalive", 0, "idle scenario, with -fleet-apart or -fleet-clients: the clients' rueidis Dialer.KeepAlive, how long a connection stays quiet before rueidis PINGs it, with ConnWriteTimeout kept at its default 10s (metrics w<N>_..._ka<interval>_); 0 is rueidis's default (1s), or the renew interval with -fleet-one-conn")
	recoveryTTL := flag.String("recovery-ttl", "", "recovery scenario: comma-separated worker TTLs, each renewed every third of it (metrics ttl<N>s_...); empty is 3s,1s")
	fleetProbe := flag.Int("fleet-probe", 0, "idle scenario: measure enqueue → start of this many plain tasks, 20 ms apart, on one idle worker before each fleet starts and again while it renews (metrics w<N>_..._pickup_..., pickup_alone_..., and their ratios); 0 is none")
	fleetRecovery := flag.Bool("fleet-recovery", false, "idle scenario: SIGKILL a worker process of the fleet's TTL holding tasks while the fleet renews, and time their return (metrics w<N>_..._recovery_...)")
	fleetClients := flag.Int("fleet-clients", 1, "idle scenario: spread each fleet evenly over this many clients, each with a connection of its own (metrics w<N>_c<K>_...); 1 is one client on the bench's connection")
	single := flag.String("single", "", "shards scenario: the address of a single Redis to run the same workload on, alternated with -redis (a Cluster), as its baseline")
	groupsVariant := flag.String("groups-variant", "", "groups scenario: run only this variant (groups10, turns_groups10, groups10k, limit1_groups1k, groups10k_turn8 or limit1_groups1k_turn8), without the memory, fairness and turns measures, or only the fairness measure (fair, fair_turn8); empty runs them all")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the client side to this file")
	flag.Parse()

	cfg := config{runs: *runs, short: *short, queues: *queues, concurrency: *concurrency, resp2: *resp2, verbose: *verbose, fleetApart: *fleetApart, fleetClients: *fleetClients, fleetRenew: *fleetRenew, fleetOneConn: *fleetOneConn, fleetKeepAlive: *fleetKeepAlive, fleetProbe: *fleetProbe, fleetRecovery: *fleetRecovery, groupsVariant: *groupsVariant}
	if cfg.fleetClients < 1 {
		fmt.Fprintf(os.Stderr, "worqr-bench: -fleet-clients %d: want at least 1\n", cfg.fleetClients)
		os.Exit(2)
	}
	if *redisFlag != "" {
		cfg.addrs = strings.Split(*redisFlag, ",")
	}
	if *single != "" {
		cfg.single = strings.Split(*single, ",")
	}
	for _, f := range strings.Split(*recoveryTTL, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 3*time.Millisecond {
			fmt.Fprintf(os.Stderr, "worqr-bench: -recovery-ttl %q: want durations of 3ms or more\n", *recoveryTTL)
			os.Exit(2)
		}
		cfg.recoveryTTLs = append(cfg.recoveryTTLs, d)
	}
	for _, f := range strings.Split(*fleet, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "worqr-bench: -fleet %q: want positive worker counts\n", *fleet)
			os.Exit(2)
		}
		cfg.fleet = append(cfg.fleet, n)
	}
	if cfg.short && !isSet("runs") {
		cfg.runs = 1
	}
	all := scenarios()
	if *scenarioFlag == "all" {
		for _, s := range all {
			cfg.scenarios = append(cfg.scenarios, s.name)
		}
	} else {
		cfg.scenarios = strings.Split(*scenarioFlag, ",")
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	if err := run(cfg, all); err != nil {
		pprof.StopCPUProfile()
		fatal(err)
	}
}

func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "worqr-bench:", err)
	os.Exit(1)
}

func run(cfg config, all []scenario) error {
	if cfg.runs < 1 || cfg.queues < 1 || cfg.concurrency < 1 {
		return errors.New("-runs, -queues and -concurrency must be at least 1")
	}
	var chosen []scenario
	for _, name := range cfg.scenarios {
		i := slices.IndexFunc(all, func(s scenario) bool { return s.name == name })
		if i < 0 {
			return fmt.Errorf("unknown scenario %q", name)
		}
		chosen = append(chosen, all[i])
	}
	b := &bench{cfg: cfg, queues: queueNames(cfg.queues)}
	if cfg.verbose {
		b.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	} else {
		b.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	addrs := cfg.addrs
	if len(addrs) == 0 {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return err
		}
		defer m.Close()
		addrs, b.embedded = []string{m.Addr()}, true
		fmt.Fprintln(os.Stderr, "embedded miniredis at", m.Addr(), "(a smoke run: its numbers say nothing about Redis)")
	}
	rdb, err := connect(addrs, b.embedded, cfg.resp2)
	if err != nil {
		return err
	}
	defer rdb.Close()
	b.rdb = rdb
	b.cfg.addrs = addrs
	if len(cfg.single) > 0 {
		single, err := connect(cfg.single, false, cfg.resp2)
		if err != nil {
			return fmt.Errorf("-single: %w", err)
		}
		defer single.Close()
		b.single = &bench{cfg: b.cfg, rdb: single, queues: b.queues, log: b.log}
		b.single.cfg.addrs = cfg.single
	}
	ctx := context.Background()
	describe(ctx, b)

	for _, s := range chosen {
		var results []*result
		for i := 0; i < cfg.runs; i++ {
			res, err := s.run(ctx, b)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", s.name, i+1, err)
			}
			results = append(results, res)
			if cfg.runs > 1 {
				fmt.Fprintf(os.Stderr, "  %s run %d/%d done\n", s.name, i+1, cfg.runs)
			}
		}
		report(os.Stdout, os.Stderr, s, results, b)
	}
	return nil
}

// connect builds the rueidis client the way an application would: one
// client for everything, a Cluster detected from the addresses.
func connect(addrs []string, embedded, resp2 bool) (rueidis.Client, error) {
	return connectWith(addrs, embedded, resp2, nil)
}

// connectWith is connect with the caller's changes to the options.
func connectWith(addrs []string, embedded, resp2 bool, change func(*rueidis.ClientOption)) (rueidis.Client, error) {
	opt := rueidis.ClientOption{InitAddress: addrs, DisableCache: true, AlwaysRESP2: resp2}
	if change != nil {
		change(&opt)
	}
	if embedded {
		// miniredis speaks RESP2 only and has no CLUSTER or CLIENT
		// TRACKING commands.
		opt.AlwaysRESP2, opt.ForceSingleClient = true, true
	}
	return rueidis.NewClient(opt)
}

// describe prints what the numbers come from.
func describe(ctx context.Context, b *bench) {
	mode := "single"
	if b.rdb.Mode() == rueidis.ClientModeCluster {
		mode = "cluster"
	}
	version := "miniredis"
	if !b.embedded {
		if info, err := infoOf(ctx, b.rdb, "server"); err == nil {
			version = info["redis_version"]
		}
	}
	proto := "RESP3"
	if b.embedded || b.cfg.resp2 {
		proto = "RESP2"
	}
	fmt.Fprintf(os.Stderr, "worqr-bench: redis %s (%s, %d node(s), %s) at %s; %d CPUs; queues %s; concurrency %d; runs %d%s\n",
		version, mode, len(b.rdb.Nodes()), proto, strings.Join(b.cfg.addrs, ","), runtime.NumCPU(), strings.Join(b.queues, ","), b.cfg.concurrency, b.cfg.runs, map[bool]string{true: "; short", false: ""}[b.cfg.short])
}

// newClient is a worqr client on the shared connection, under a key prefix
// of its own, so runs never meet each other or anything else on the
// server.
func (b *bench) newClient() (*worqr.Client, string, error) {
	return b.newClientWith(worqr.Options{})
}

// newClientWith is newClient with options of the caller's (its Redis,
// Prefix and Logger are set here).
func (b *bench) newClientWith(o worqr.Options) (*worqr.Client, string, error) {
	prefix := "wqb-" + uuid.NewString()[:8]
	o.Redis, o.Prefix, o.Logger = b.rdb, prefix, b.log
	c, err := worqr.New(o)
	return c, prefix, err
}

// pick is a count for a full run, or for a -short one.
func (b *bench) pick(full, short int) int {
	if b.cfg.short {
		return short
	}
	return full
}

// metric is one number a run measured.
type metric struct {
	Name  string
	Unit  string
	Value float64
}

// result is what one run of a scenario measured, in report order.
type result struct {
	metrics []metric
	// notes are facts that are not numbers to aggregate (for example the
	// tasks started more than twice).
	notes []string
}

func (r *result) add(name, unit string, v float64) {
	r.metrics = append(r.metrics, metric{name, unit, v})
}

func (r *result) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// target is a goal from the issue: the median of Metric compared with
// Limit.
type target struct {
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Limit  float64 `json:"limit"`
	Median float64 `json:"median"`
	Met    bool    `json:"met"`
}

// stat is a metric over the runs.
type stat struct {
	Unit   string  `json:"unit"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// line is the JSON line of one scenario.
type line struct {
	Scenario    string `json:"scenario"`
	Runs        int    `json:"runs"`
	Short       bool   `json:"short"`
	Embedded    bool   `json:"embedded"`
	Queues      int    `json:"queues"`
	Concurrency int    `json:"concurrency"`
	// Load is the machine's 1-minute load average when the scenario
	// ended: on a shared machine, the first thing to look at when numbers
	// move.
	Load    float64          `json:"load1"`
	Metrics map[string]*stat `json:"metrics"`
	Targets []target         `json:"targets,omitempty"`
	Notes   []string         `json:"notes,omitempty"`
}

func report(out, human io.Writer, s scenario, results []*result, b *bench) {
	l := line{Scenario: s.name, Runs: len(results), Short: b.cfg.short, Embedded: b.embedded, Queues: len(b.queues), Concurrency: b.cfg.concurrency, Load: loadAverage(), Metrics: map[string]*stat{}}
	var order []string
	values := map[string][]float64{}
	for _, r := range results {
		for _, m := range r.metrics {
			if _, ok := l.Metrics[m.Name]; !ok {
				l.Metrics[m.Name] = &stat{Unit: m.Unit}
				order = append(order, m.Name)
			}
			values[m.Name] = append(values[m.Name], m.Value)
		}
		for _, n := range r.notes {
			if !slices.Contains(l.Notes, n) {
				l.Notes = append(l.Notes, n)
			}
		}
	}
	for name, vs := range values {
		st := l.Metrics[name]
		st.Median, st.Min, st.Max = median(vs), slices.Min(vs), slices.Max(vs)
	}
	for _, t := range s.targets {
		st, ok := l.Metrics[t.Metric]
		if !ok {
			continue
		}
		t.Median = st.Median
		t.Met = t.Op == ">=" && st.Median >= t.Limit || t.Op == "<=" && st.Median <= t.Limit
		l.Targets = append(l.Targets, t)
	}
	for _, st := range l.Metrics { // JSON has no NaN
		for _, f := range []*float64{&st.Median, &st.Min, &st.Max} {
			if math.IsNaN(*f) || math.IsInf(*f, 0) {
				*f = -1
			}
		}
	}
	enc := json.NewEncoder(out)
	_ = enc.Encode(l)

	fmt.Fprintf(human, "\n%s (%d run(s); median [min–max]; load %.1f)\n", s.name, len(results), l.Load)
	for _, name := range order {
		st := l.Metrics[name]
		fmt.Fprintf(human, "  %-42s %12s %-9s [%s–%s]\n", name, num(st.Median), st.Unit, num(st.Min), num(st.Max))
	}
	for _, t := range l.Targets {
		verdict := "MISSED"
		if t.Met {
			verdict = "met"
		}
		fmt.Fprintf(human, "  target %s %s %s: %s\n", t.Metric, t.Op, num(t.Limit), verdict)
	}
	for _, n := range l.Notes {
		fmt.Fprintf(human, "  note: %s\n", n)
	}
}

// loadAverage is the 1-minute load average, or -1 where there is none.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		return -1
	}
	return f
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// num prints a number legibly: thousands separated, a few significant
// digits for small ones.
func num(f float64) string {
	switch {
	case math.IsNaN(f) || f < 0:
		return "n/a"
	case f >= 1000:
		s := fmt.Sprintf("%.0f", f)
		var out []byte
		for i, c := range []byte(s) {
			if i > 0 && (len(s)-i)%3 == 0 {
				out = append(out, ',')
			}
			out = append(out, c)
		}
		return string(out)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	default:
		return fmt.Sprintf("%.3g", f)
	}
}

// timeout bounds waits that should end long before it.
func timeout(short bool) time.Duration {
	if short {
		return 30 * time.Second
	}
	return 5 * time.Minute
}
