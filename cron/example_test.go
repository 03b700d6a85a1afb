package cron_test

import (
	"context"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/cron"
)

// Every worker that registers a schedule runs it; each tick is enqueued
// once across them.
func Example() {
	run := func(ctx context.Context, worker *worqr.Worker) error {
		// A report every weekday at 06:00 in Paris, on the "reports" queue.
		daily := cron.MustParse("CRON_TZ=Europe/Paris 0 6 * * 1-5")
		if err := worker.Periodic(ctx, "daily-report", "reports", daily, []byte("daily"), worqr.PeriodicOptions{}); err != nil {
			return err
		}
		// A cleanup every five minutes, with the tick's time as payload.
		return worker.Periodic(ctx, "cleanup", "maintenance", worqr.Every(5*time.Minute), nil, worqr.PeriodicOptions{
			Payload:     func(tick time.Time) []byte { return []byte(tick.Format(time.RFC3339)) },
			MaxAttempts: 3,
		})
	}
	_ = run
}
