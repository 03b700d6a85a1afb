package main

import (
	"context"

	"github.com/google/uuid"

	"github.com/worqr/worqr"
)

// benchKind is the kind the kinds scenario gives its tasks; the Router
// serving them holds two more, as a queue of several kinds does.
const benchKind = "email.welcome"

// runKinds measures what a task kind costs: the same no-op tasks drained
// twice with one worker and -concurrency handlers, without a kind by a
// plain handler, and with a kind through a Router of three kinds (the two
// alternate, each twice, so that drift on a shared machine hits both
// alike); and Redis memory per waiting task with and without the kind.
func runKinds(ctx context.Context, b *bench) (*result, error) {
	total := b.pick(60_000, 3_000)
	q := b.queues[:1]
	conc := b.cfg.concurrency
	res := &result{}
	var plain, kinded span
	for range 2 {
		d, err := drainWith(ctx, b, q, total, func(ctx context.Context, w *worqr.Worker, h worqr.Handler) error {
			return w.Handle(ctx, q[0], h, worqr.HandleOptions{Concurrency: conc})
		})
		if err != nil {
			return nil, err
		}
		plain = plain.plus(d)
		d, err = drainWith(ctx, b, q, total, func(ctx context.Context, w *worqr.Worker, h worqr.Handler) error {
			r := &worqr.Router{}
			for _, k := range []string{benchKind, "email.receipt", "report.daily"} {
				if err := r.Handle(k, h); err != nil {
					return err
				}
			}
			return w.Handle(ctx, q[0], r.Serve, worqr.HandleOptions{Concurrency: conc})
		}, worqr.Kind(benchKind))
		if err != nil {
			return nil, err
		}
		kinded = kinded.plus(d)
	}
	n := int64(2 * total)
	plainRate, kindRate := float64(n)/plain.elapsed.Seconds(), float64(n)/kinded.elapsed.Seconds()
	res.add("kind_tasks_per_s", "tasks/s", kindRate)
	res.add("plain_tasks_per_s", "tasks/s", plainRate)
	res.add("ratio", "×", kindRate/plainRate)
	kinded.perTask(res, "kind_", n, scripts...)
	plain.perTask(res, "plain_", n, scripts...)
	if b.embedded {
		res.note("memory skipped: miniredis reports no memory")
		return res, nil
	}
	for _, m := range []struct {
		name string
		opts []worqr.EnqueueOption
	}{{"plain_", nil}, {"kind_", []worqr.EnqueueOption{worqr.Kind(benchKind)}}} {
		bytes, err := waitingBytes(ctx, b, b.pick(100_000, 5_000), m.opts...)
		if err != nil {
			return nil, err
		}
		res.add(m.name+"waiting_bytes_per_task", "B", bytes)
	}
	res.note("kind %q (%d bytes), routed by a Router of three kinds", benchKind, len(benchKind))
	return res, nil
}

// waitingBytes is Redis's memory per waiting task: the change in
// used_memory over n tasks of payloadSize bytes enqueued with opts on a
// client of its own, removed afterwards.
func waitingBytes(ctx context.Context, b *bench, n int, opts ...worqr.EnqueueOption) (float64, error) {
	c, prefix, err := b.newClient()
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Close(ctx); _ = cleanup(ctx, b.rdb, prefix) }()
	m0, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return 0, err
	}
	if err := fill(ctx, c, b.queues[:1], n, uuid.NewString()[:8], opts...); err != nil {
		return 0, err
	}
	m1, err := settledMemory(ctx, b.rdb)
	if err != nil {
		return 0, err
	}
	return float64(m1-m0) / float64(n), nil
}
