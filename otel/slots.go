package worqrotel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/queuestats"
)

// Values of worqr.slot.state.
const (
	SlotBusy = "busy" // a handler runs in it
	SlotFree = "free" // a handler could start in it now
	// SlotHeld: its handler returned and its outcome is still being
	// written, past the bound on those writes (see worqr.PoolSlots).
	SlotHeld = "held"
)

// Attribute keys of worqr.handler.slots.
const (
	// PoolKey is a pool's name: its queues joined by ",", bounded by
	// SlotMetricsOptions.MaxPools.
	PoolKey = attribute.Key("worqr.pool")
	// SlotStateKey is the state of the slots counted: "busy", "free" or
	// "held".
	SlotStateKey = attribute.Key("worqr.slot.state")
)

// SlotMetricsOptions configure RegisterSlotMetrics. The zero value is the
// default.
type SlotMetricsOptions struct {
	// MeterProvider makes the meter. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// MaxPools bounds the values of worqr.pool as Options.MaxQueues does
	// the queue names: the first MaxPools pools seen are their own name,
	// the others OtherQueue. Default DefaultMaxQueues; negative: every
	// pool is OtherQueue.
	MaxPools int
}

// RegisterSlotMetrics registers an asynchronous instrument that reads,
// each time the meter's reader collects, the handler slots of the workers
// of client (worqr.Client.Slots: the workers' own counts, no Redis, and
// nothing counted on a task's way): the saturation of the program's pools.
// Register it in every program that runs workers. Unregister the returned
// Registration to stop.
//
// Instrument:
//
//	worqr.handler.slots  updowncounter {slot}  worqr.pool, worqr.slot.state ("busy", "free", "held")
//
// A pool is a Handle call (named for its queue) or a HandleQueues call
// (its queues joined by ","); the slots of the pools of the same name of
// the program's workers are summed, and the states of a pool add up to
// its Concurrency. There is no worker attribute: a worker's id changes
// when it registers again after a fence, which would start new series;
// the program's resource tells its workers apart from other programs'.
func RegisterSlotMetrics(client *worqr.Client, opts SlotMetricsOptions) (metric.Registration, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	slots, err := meter.Int64ObservableUpDownCounter("worqr.handler.slots", metric.WithUnit("{slot}"),
		metric.WithDescription(`Handler slots of this program's pools (a Handle or HandleQueues call, named for its queues), by state: "busy" (a handler runs), "free" (a handler could start now), "held" (its handler returned and its outcome is still being written). The states add up to the pool's Concurrency.`))
	if err != nil {
		return nil, err
	}
	pools := queuestats.NewQueues(opts.MaxPools)
	busy, free, held := SlotStateKey.String(SlotBusy), SlotStateKey.String(SlotFree), SlotStateKey.String(SlotHeld)
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, ps := range queuestats.SumSlots(client.Slots(), pools) {
			pool := PoolKey.String(ps.Pool)
			o.ObserveInt64(slots, ps.Busy, metric.WithAttributes(pool, busy))
			o.ObserveInt64(slots, ps.Free, metric.WithAttributes(pool, free))
			o.ObserveInt64(slots, ps.Held, metric.WithAttributes(pool, held))
		}
		return nil
	}, slots)
}
