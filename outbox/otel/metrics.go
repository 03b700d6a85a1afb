// Package worqroutboxotel exports the state of a worqr outbox table
// (github.com/worqr/worqr/outbox) as OpenTelemetry metrics, in a package
// of its own so that programs using the outbox without OpenTelemetry do
// not build its SDK's API.
package worqroutboxotel

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	worqroutbox "github.com/worqr/worqr/outbox"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/worqr/worqr/outbox/otel"

// DefaultTimeout bounds the query of one collection.
const DefaultTimeout = 5 * time.Second

// TableKey is the attribute naming the outbox table, schema-qualified.
const TableKey = attribute.Key("worqr.outbox.table")

// Options configure Register. The zero value is the default.
type Options struct {
	// MeterProvider makes the meter. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Timeout bounds the query of one collection; a collection whose
	// query fails or times out reports no numbers and counts in
	// worqr.outbox.scrape.errors. Default DefaultTimeout.
	Timeout time.Duration
	// OnError, if set, is given the error of each collection that failed
	// (to log it).
	OnError func(error)
}

// Register registers asynchronous instruments that read, each time the
// meter's reader collects, ob's backlog, the age of its oldest row and
// its failed rows (worqroutbox.Outbox.Stats) through db: numbers shared
// by every program, so register them in one (or aggregate with max, not
// sum). Unregister the returned Registration to stop.
//
// Instruments, each with the attribute worqr.outbox.table:
//
//	worqr.outbox.backlog         gauge {row}      rows committed and not yet moved into worqr
//	worqr.outbox.oldest_waiting  gauge s          how long the oldest of them has waited (0: none)
//	worqr.outbox.failed          gauge {row}      rows worqr refused for good, kept and skipped
//	worqr.outbox.scrape.errors   counter {error}  collections whose query failed or timed out
//
// The numbers are gauges, not up-down counters: every program that
// registers them reports the same numbers, which do not add up.
func Register(ob *worqroutbox.Outbox, db worqroutbox.Querier, opts Options) (metric.Registration, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	meter := mp.Meter(ScopeName)
	backlog, err1 := meter.Int64ObservableGauge("worqr.outbox.backlog", metric.WithUnit("{row}"),
		metric.WithDescription("Rows of the outbox committed and not yet moved into worqr. Near zero on a healthy fleet: every commit wakes the relays."))
	oldest, err2 := meter.Float64ObservableGauge("worqr.outbox.oldest_waiting", metric.WithUnit("s"),
		metric.WithDescription("How long the oldest row of the outbox's backlog has waited, by the database's clock; 0 when none waits."))
	failed, err3 := meter.Int64ObservableGauge("worqr.outbox.failed", metric.WithUnit("{row}"),
		metric.WithDescription("Rows of the outbox that worqr refused for good: kept and skipped by the relays until someone fixes or deletes them."))
	scrapeErrors, err4 := meter.Int64ObservableCounter("worqr.outbox.scrape.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Collections of the outbox's state whose query failed or timed out (they reported no numbers)."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	table := metric.WithAttributes(TableKey.String(ob.Name()))
	var errs atomic.Int64
	return meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
		s, err := ob.Stats(ctx, db)
		if err != nil {
			errs.Add(1)
			if opts.OnError != nil {
				opts.OnError(err)
			}
		} else {
			o.ObserveInt64(backlog, s.Backlog, table)
			o.ObserveFloat64(oldest, s.Age.Seconds(), table)
			o.ObserveInt64(failed, s.Failed, table)
		}
		o.ObserveInt64(scrapeErrors, errs.Load(), table)
		return nil
	}, backlog, oldest, failed, scrapeErrors)
}
