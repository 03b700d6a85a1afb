package worqrprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/queuestats"
)

// Values of the state label of worqr_handler_slots.
const (
	SlotBusy = "busy" // a handler runs in it
	SlotFree = "free" // a handler could start in it now
	// SlotHeld: its handler returned and its outcome is still being
	// written, past the bound on those writes (see worqr.PoolSlots).
	SlotHeld = "held"
)

// SlotCollectorOptions configure a SlotCollector. The zero value is the
// default.
type SlotCollectorOptions struct {
	// ConstLabels are added to every metric.
	ConstLabels prometheus.Labels
	// MaxPools bounds the values of the pool label as
	// ObserverOptions.MaxQueues does those of queue: the first MaxPools
	// pools the collector sees are labelled with their name, the others
	// with OtherQueue. Default DefaultMaxQueues; negative: every pool is
	// OtherQueue.
	MaxPools int
}

// SlotCollector is a prometheus.Collector of the handler slots of one
// program's workers, read on each scrape from the workers' own counts
// (worqr.Client.Slots: no Redis, and nothing counted on a task's way): the
// saturation of its pools. Register one per program, in the program.
//
// Metrics:
//
//	worqr_handler_slots{pool,state}  a pool's slots: state "busy" (a handler runs), "free" (one could start), "held" (an outcome still being written)
//
// A pool is a Handle call (named for its queue) or a HandleQueues call
// (named for its queues joined by ","); the slots of the pools of the same
// name of the program's workers are summed. Its states add up to its size
// (the Concurrency), so busy over the sum is how saturated it is. There is
// no worker label: a worker's id changes when it registers again after a
// fence, which would start new series; the program is the scrape target,
// so its instance label tells its workers apart from the other programs'.
type SlotCollector struct {
	client *worqr.Client
	pools  *queuestats.Queues // the pool label's values, bounded
	slots  *prometheus.Desc
}

var _ prometheus.Collector = (*SlotCollector)(nil)

// NewSlotCollector returns a SlotCollector of the workers of client.
// Register it once per registry.
func NewSlotCollector(client *worqr.Client, opts SlotCollectorOptions) *SlotCollector {
	return &SlotCollector{
		client: client,
		pools:  queuestats.NewQueues(opts.MaxPools),
		slots: prometheus.NewDesc("worqr_handler_slots",
			`Handler slots of this program's pools (a Handle or HandleQueues call, named for its queues), by state: "busy" (a handler runs), "free" (a handler could start now), "held" (its handler returned and its outcome is still being written). The states add up to the pool's Concurrency.`,
			[]string{"pool", "state"}, opts.ConstLabels),
	}
}

// Describe implements prometheus.Collector.
func (c *SlotCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.slots }

// Collect implements prometheus.Collector.
func (c *SlotCollector) Collect(ch chan<- prometheus.Metric) {
	for _, ps := range queuestats.SumSlots(c.client.Slots(), c.pools) {
		ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(ps.Busy), ps.Pool, SlotBusy)
		ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(ps.Free), ps.Pool, SlotFree)
		ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(ps.Held), ps.Pool, SlotHeld)
	}
}
