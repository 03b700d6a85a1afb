package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr"
)

// runIdle measures what an idle fleet costs Redis: workers with the
// default TTL and renew interval (or -fleet-renew's) serving one queue
// each, nothing enqueued.
// After the fleet has settled it reads the servers' CPU time and calls for
// a window of 10 s (-short: 2 s), for each fleet size of -fleet (100 and
// 1,000 workers by default; -short: the first), and reports Redis CPU as a
// share of one core, script calls and commands (those run inside scripts
// counted too) per second, and this process's CPU (the fleet's clients).
//
// The workers share one client, which renews them together (one script
// per beat for up to 100 of them), unless -fleet-clients spreads them
// evenly over that many clients, each with a connection of its own, or
// -fleet-apart gives each a client and a connection of its own, as a fleet
// of one-worker processes has. It also reports how long starting the
// fleet took per worker, and how many workers fenced themselves (target
// 0: a fleet that starts too slowly loses its leases before it is up).
func runIdle(ctx context.Context, b *bench) (*result, error) {
	res := &result{}
	if b.embedded {
		res.note("skipped: miniredis reports no CPU time")
		return res, nil
	}
	sizes := b.cfg.fleet
	measure := 10 * time.Second
	if b.cfg.short {
		sizes, measure = sizes[:1], 2*time.Second
	}
	for _, n := range sizes {
		if err := idleFleet(ctx, b, res, n, measure); err != nil {
			return nil, fmt.Errorf("%d workers: %w", n, err)
		}
	}
	return res, nil
}

func idleFleet(ctx context.Context, b *bench, res *result, n int, measure time.Duration) error {
	c, prefix, err := b.newClient()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	clients, name := 1, fmt.Sprintf("w%d_", n)
	switch {
	case b.cfg.fleetApart:
		clients, name = n, fmt.Sprintf("w%d_apart_", n)
	case b.cfg.fleetClients > 1:
		clients = min(b.cfg.fleetClients, n)
		name = fmt.Sprintf("w%d_c%d_", n, clients)
	}
	renew := worqr.DefaultRenewInterval
	if r := b.cfg.fleetRenew; r > 0 {
		renew, name = r, fmt.Sprintf("%sr%v_", name, r)
	}
	var changes []func(*rueidis.ClientOption)
	if b.cfg.fleetOneConn && clients > 1 {
		name += "1c_"
		changes = append(changes, func(o *rueidis.ClientOption) {
			o.PipelineMultiplex = -1
			o.Dialer.KeepAlive = max(renew, rueidis.DefaultTCPKeepAlive)
		})
	}
	if ka := b.cfg.fleetKeepAlive; ka > 0 && clients > 1 {
		name += fmt.Sprintf("ka%v_", ka)
		changes = append(changes, func(o *rueidis.ClientOption) {
			o.Dialer.KeepAlive = ka
			// rueidis's default is ten keep-alives: kept at 10 s, so
			// that only the PINGs' period changes.
			o.ConnWriteTimeout = 10 * rueidis.DefaultTCPKeepAlive
		})
	}
	change := func(o *rueidis.ClientOption) {
		// A one-worker process's calls take a few hundred bytes: rueidis's
		// 0.5 MiB buffers each way would hold 10,000 clients' 10 GiB.
		o.ReadBufferEachConn, o.WriteBufferEachConn = 16<<10, 16<<10
		o.RingScaleEachConn = 8
		for _, c := range changes {
			c(o)
		}
	}
	ttl := worqr.DefaultTTL
	if b.cfg.fleetRenew > 0 {
		ttl = 3 * renew
	}
	// The same pickups before the fleet starts and while it renews: the
	// latency its renewals' bursts cost a plain task, as a same-run ratio.
	var alone []time.Duration
	if b.cfg.fleetProbe > 0 {
		if alone, err = probePickups(ctx, b); err != nil {
			return fmt.Errorf("pickups without the fleet: %w", err)
		}
	}
	cs := []*worqr.Client{c}
	if clients > 1 {
		cs = make([]*worqr.Client, 0, clients)
	}
	queue := b.queues[0]
	idle := func(context.Context, *worqr.Process) error { return nil }
	var fenced atomic.Int64
	opts := worqr.WorkerOptions{OnFenced: func(worqr.FenceEvent) { fenced.Add(1) }}
	if b.cfg.fleetRenew > 0 {
		opts.TTL, opts.RenewInterval = ttl, renew
	}
	began := time.Now()
	for i := range n {
		// A client is connected just before its first worker starts, not
		// all of them first: 10,000 connections waiting for their
		// workers drew a PING a second each (rueidis's keep-alive on a
		// quiet connection) on top of the renewals of those already
		// started, and the fleet lost its leases before it was up.
		if len(cs) < clients {
			own, rdb, err := fleetClient(b, prefix, change)
			if err != nil {
				return fmt.Errorf("client %d: %w", len(cs)+1, err)
			}
			defer rdb.Close()
			defer func() { _ = own.Close(ctx) }()
			cs = append(cs, own)
		}
		// Round robin: the clients' shares differ by one at most.
		w, err := cs[i%len(cs)].NewWorker(ctx, opts)
		if err != nil {
			return err
		}
		if err := w.Handle(ctx, queue, idle, worqr.HandleOptions{Concurrency: 1}); err != nil {
			return err
		}
		if (i+1)%1000 == 0 {
			if err := holding(i+1, fenced.Load(), "starting"); err != nil {
				return err
			}
		}
	}
	started := time.Since(began)
	// Joining is a burst; two renew intervals later the fleet is steady.
	select {
	case <-time.After(2 * renew):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := holding(n, fenced.Load(), "starting"); err != nil {
		return err
	}
	before, cpu := readStats(ctx, b.rdb), processCPU()
	start := time.Now()
	select {
	case <-time.After(measure):
	case <-ctx.Done():
		return ctx.Err()
	}
	client := processCPU() - cpu
	after := readStats(ctx, b.rdb)
	took := time.Since(start).Seconds()
	if !before.ok || !after.ok {
		return errors.New("the server's INFO has no CPU or command statistics")
	}
	var calls, scripts int64
	for cmd, k := range after.calls {
		calls += k - before.calls[cmd]
	}
	scripts = after.calls["evalsha"] - before.calls["evalsha"] + after.calls["eval"] - before.calls["eval"]
	res.add(name+"redis_cpu_pct", "%", 100*(after.cpu-before.cpu).Seconds()/took)
	res.add(name+"scripts_per_s", "/s", float64(scripts)/took)
	res.add(name+"commands_per_s", "/s", float64(calls)/took)
	res.add(name+"redis_cpu_us_per_worker_s", "µs", (after.cpu-before.cpu).Seconds()*1e6/took/float64(n))
	res.add(name+"client_cpu_pct", "%", 100*client.Seconds()/took)
	res.add(name+"start_us_per_worker", "µs", float64(started.Microseconds())/float64(n))
	if err := holding(n, fenced.Load(), "the window"); err != nil {
		return err
	}
	// Said now: what follows (the probes, a crash) may yet break a fleet
	// at the edge of what this machine holds.
	fmt.Fprintf(os.Stderr, "idle: %d workers: Redis %.2f %% of a core, %.1f µs per worker-second, %.0f commands/s; this process %.1f %%; started at %.0f µs each\n",
		n, 100*(after.cpu-before.cpu).Seconds()/took, (after.cpu-before.cpu).Seconds()*1e6/took/float64(n),
		float64(calls)/took, 100*client.Seconds()/took, float64(started.Microseconds())/float64(n))
	if b.cfg.fleetProbe > 0 {
		among, err := probePickups(ctx, b)
		if err != nil {
			return fmt.Errorf("pickups beside the fleet: %w", err)
		}
		addLatencies(res, name+"pickup_", among)
		addLatencies(res, name+"pickup_alone_", alone)
		res.add(name+"pickup_p50_ratio", "×", pct(among, 50).Seconds()/pct(alone, 50).Seconds())
		res.add(name+"pickup_p99_ratio", "×", pct(among, 99).Seconds()/pct(alone, 99).Seconds())
		if err := holding(n, fenced.Load(), "the pickups"); err != nil {
			return err
		}
	}
	if b.cfg.fleetRecovery {
		// A worker process of the fleet's TTL killed among the fleet's:
		// its tasks, on a queue of their own, must come back within the
		// TTL (and the reclaim's few milliseconds) while the others renew.
		r, err := crashAt(ctx, b, ttl, c, prefix, queue+"-crash")
		if err != nil {
			return fmt.Errorf("recovery beside the fleet: %w", err)
		}
		res.add(name+"recovery_s", "s", r.took.Seconds())
		res.add(name+"recovery_lost", "tasks", float64(r.lost))
		if r.lost == 0 {
			res.add(name+"recovery_after_expiry_ms", "ms", float64(r.afterExpiry.Microseconds())/1000)
		}
		if len(r.twice) > 0 {
			res.note("%d workers: started more than twice: %s", n, strings.Join(r.twice, ", "))
		}
	}
	// Counted last: a fleet that kept its leases through the probes and
	// the crash fenced nobody.
	res.add(name+"fenced", "", float64(fenced.Load()))
	return nil
}

// holding is an error once more than 1 % of a fleet of n has fenced
// itself (by the end of phase): past that the fleet is not idle but
// registering again, its reclaims calling Redis at every lease that runs
// out, and a run measures that churn rather than the fleet, for minutes.
func holding(n int, fenced int64, phase string) error {
	if fenced*100 > int64(n) {
		return fmt.Errorf("%d of %d workers fenced themselves by the end of %s: the fleet lost its leases (this process or Redis short of CPU)", fenced, n, phase)
	}
	return nil
}

// fleetClient is a client of the fleet's registry on a rueidis client of
// its own, built with change; the caller closes both.
func fleetClient(b *bench, prefix string, change func(*rueidis.ClientOption)) (*worqr.Client, rueidis.Client, error) {
	rdb, err := connectWith(b.cfg.addrs, b.embedded, b.cfg.resp2, change)
	if err != nil {
		return nil, nil, err
	}
	c, err := worqr.New(worqr.Options{Redis: rdb, Prefix: prefix, Logger: b.log})
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return c, rdb, nil
}

// probePickups measures enqueue → handler start for -fleet-probe plain
// tasks sent to one idle worker, 20 ms apart: every phase of the beats'
// 50 ms grid, so the p99 shows what a burst of renewals costs.
func probePickups(ctx context.Context, b *bench) ([]time.Duration, error) {
	ds, _, again, err := worqrLatency(ctx, b, b.cfg.fleetProbe, latencyGap, 1)
	if err != nil {
		return nil, err
	}
	if again > 0 {
		return nil, fmt.Errorf("%d tasks started twice", again)
	}
	return ds, nil
}
