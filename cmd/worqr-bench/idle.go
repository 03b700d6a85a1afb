package main

import (
	"context"
	"errors"
	"fmt"
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
	cs := []*worqr.Client{c}
	if clients > 1 {
		cs = make([]*worqr.Client, clients)
		for i := range cs {
			rdb, err := connectWith(b.cfg.addrs, b.embedded, b.cfg.resp2, change)
			if err != nil {
				return fmt.Errorf("client %d: %w", i+1, err)
			}
			defer rdb.Close()
			own, err := worqr.New(worqr.Options{Redis: rdb, Prefix: prefix, Logger: b.log})
			if err != nil {
				return err
			}
			defer func() { _ = own.Close(ctx) }()
			cs[i] = own
		}
	}
	queue := b.queues[0]
	idle := func(context.Context, *worqr.Process) error { return nil }
	var fenced atomic.Int64
	opts := worqr.WorkerOptions{OnFenced: func(worqr.FenceEvent) { fenced.Add(1) }}
	if b.cfg.fleetRenew > 0 {
		opts.TTL, opts.RenewInterval = 3*renew, renew
	}
	began := time.Now()
	for i := range n {
		// Round robin: the clients' shares differ by one at most.
		w, err := cs[i%len(cs)].NewWorker(ctx, opts)
		if err != nil {
			return err
		}
		if err := w.Handle(ctx, queue, idle, worqr.HandleOptions{Concurrency: 1}); err != nil {
			return err
		}
	}
	started := time.Since(began)
	// Joining is a burst; two renew intervals later the fleet is steady.
	select {
	case <-time.After(2 * renew):
	case <-ctx.Done():
		return ctx.Err()
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
	res.add(name+"fenced", "", float64(fenced.Load()))
	return nil
}
