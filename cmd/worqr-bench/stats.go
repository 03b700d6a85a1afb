package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/worqr/worqr"
)

// runStats measures what the per-queue stats cost: it drains pre-loaded
// queues as the process scenario does (one worker, -concurrency handlers
// per queue), with stats on and with them off (Options.NoStats): six
// rounds of four drains in the order on, off, off, on, so that a drift of
// the machine's speed during the run weighs on both alike. ratio is the
// rate with stats on over the rate with them off, each over its twelve
// drains. (Racing the two at once, on separate connections, measures
// nothing: Redis serves connections in turn, so both get the same number
// of calls whatever each costs.)
func runStats(ctx context.Context, b *bench) (*result, error) {
	perQueue := b.pick(5_000, 500) / len(b.queues)
	total := int64(perQueue * len(b.queues))
	conc := b.cfg.concurrency
	run := uuid.NewString()[:8]
	res := &result{}

	var onTime, offTime time.Duration
	var on, off span
	for i := range 24 {
		noStats := i%4 == 1 || i%4 == 2
		got, _, err := drainClient(ctx, b, worqr.Options{NoStats: noStats}, perQueue, run, nil, worqr.HandleOptions{Concurrency: conc})
		if err != nil {
			return nil, fmt.Errorf("stats off %v: %w", noStats, err)
		}
		if noStats {
			offTime += got.elapsed
			off = got
		} else {
			onTime += got.elapsed
			on = got
		}
	}
	onRate := float64(12*total) / onTime.Seconds()
	offRate := float64(12*total) / offTime.Seconds()
	res.add("tasks_per_s", "tasks/s", onRate)
	res.add("off_tasks_per_s", "tasks/s", offRate)
	res.add("ratio", "×", onRate/offRate)
	// Redis's own time per task says what stats cost it, less moved by
	// the load of a shared machine than the rates are.
	on.perTask(res, "", total, scripts...)
	off.perTask(res, "off_", total, scripts...)
	return res, nil
}
