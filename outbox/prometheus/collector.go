// Package worqroutboxprom exports the state of a worqr outbox table
// (github.com/worqr/worqr/outbox) as Prometheus metrics, in a package of
// its own so that programs using the outbox without Prometheus do not
// build the Prometheus client.
package worqroutboxprom

import (
	"context"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	worqroutbox "github.com/worqr/worqr/outbox"
)

// DefaultTimeout bounds the query of one scrape.
const DefaultTimeout = 5 * time.Second

// Options configure a Collector. The zero value is the default.
type Options struct {
	// Timeout bounds the query of one scrape; a scrape whose query fails
	// or times out reports no numbers and counts in
	// worqr_outbox_scrape_errors_total. Default DefaultTimeout; keep it
	// below the scrape timeout.
	Timeout time.Duration
	// ConstLabels are added to every metric.
	ConstLabels prometheus.Labels
	// OnError, if set, is given the error of each scrape that failed (to
	// log it).
	OnError func(error)
}

// Collector is a prometheus.Collector that reads, on each scrape, an
// outbox's backlog, the age of its oldest row and its failed rows
// (worqroutbox.Outbox.Stats): numbers shared by every process, so
// register it in one place (or aggregate with max, not sum).
//
// Metrics, each with the label table (the schema-qualified table name):
//
//	worqr_outbox_backlog                  rows committed and not yet moved into worqr
//	worqr_outbox_oldest_waiting_seconds   how long the oldest of them has waited (0: none)
//	worqr_outbox_failed                   rows worqr refused for good, kept and skipped
//	worqr_outbox_scrape_errors_total      scrapes whose query failed or timed out
type Collector struct {
	ob      *worqroutbox.Outbox
	db      worqroutbox.Querier
	timeout time.Duration
	onError func(error)
	table   string

	backlog, oldest, failed *prometheus.Desc
	errors                  prometheus.Counter
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector of ob's table, read through db (a
// *pgxpool.Pool, say). Register it once per registry.
func NewCollector(ob *worqroutbox.Outbox, db worqroutbox.Querier, opts Options) *Collector {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	// The error counter has no variable label, so its table is a constant.
	counterLabels := prometheus.Labels{"table": ob.Name()}
	maps.Copy(counterLabels, opts.ConstLabels)
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"table"}, opts.ConstLabels)
	}
	return &Collector{
		ob: ob, db: db, timeout: opts.Timeout, onError: opts.OnError, table: ob.Name(),
		backlog: desc("worqr_outbox_backlog",
			"Rows of the outbox committed and not yet moved into worqr. Near zero on a healthy fleet: every commit wakes the relays."),
		oldest: desc("worqr_outbox_oldest_waiting_seconds",
			"How long the oldest row of the outbox's backlog has waited, by the database's clock; 0 when none waits. It grows when the relays are down or cannot reach Redis."),
		failed: desc("worqr_outbox_failed",
			"Rows of the outbox that worqr refused for good (a payload over the relay's limit, say): kept and skipped by the relays until someone fixes or deletes them."),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "worqr_outbox_scrape_errors_total",
			Help:        "Scrapes of the outbox whose query failed or timed out (they reported no numbers).",
			ConstLabels: counterLabels,
		}),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.backlog
	ch <- c.oldest
	ch <- c.failed
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector: it queries the database.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	s, err := c.ob.Stats(ctx, c.db)
	if err != nil {
		c.errors.Inc()
		if c.onError != nil {
			c.onError(err)
		}
	} else {
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(s.Backlog), c.table)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, s.Age.Seconds(), c.table)
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, float64(s.Failed), c.table)
	}
	c.errors.Collect(ch)
}
