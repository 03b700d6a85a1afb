package worqrprom

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/queuestats"
)

// Defaults of CollectorOptions.
const (
	// DefaultTimeout bounds the reads of one scrape.
	DefaultTimeout = queuestats.DefaultTimeout
	// DefaultMaxQueues is how many queues a scrape reports.
	DefaultMaxQueues = queuestats.DefaultMaxQueues
	// DefaultParallel is how many reads a scrape has in flight at once.
	DefaultParallel = queuestats.DefaultParallel
)

// Values of the state label of worqr_queue_tasks.
const (
	StateWaiting  = "waiting"   // in the queue, ready to run
	StateDelayed  = "delayed"   // scheduled for later, or waiting out a retry backoff
	StateInFlight = "in_flight" // held by a worker
	StateDead     = "dead"      // in the queue's dead letters
)

// CollectorOptions configure a Collector. The zero value is the default.
type CollectorOptions struct {
	// Timeout bounds the reads of one scrape; what is not read by then is
	// left out of it and counted in worqr_scrape_errors_total. Default
	// DefaultTimeout; keep it below the scrape timeout.
	Timeout time.Duration
	// MaxQueues is how many queues a scrape reports, the first by name;
	// worqr_queues still counts them all. Default DefaultMaxQueues.
	MaxQueues int
	// Parallel is how many reads a scrape has in flight at once (rueidis
	// pipelines them). Default DefaultParallel.
	Parallel int
	// ConstLabels are added to every metric (say, the Redis instance, when
	// one registry holds collectors of several).
	ConstLabels prometheus.Labels
	// OnError, if set, is given the first error of each scrape that had
	// any (to log it).
	OnError func(error)
}

// Collector is a prometheus.Collector that reads, on each scrape, the
// sizes of the queues and the number of live workers from Redis through a
// worqr Client: numbers shared by every process, so register it in one
// place (or aggregate with max, not sum). A scrape makes four reads per
// queue (the in-flight count reads the processes' payloads, so it grows
// with the tasks in flight) and one for the queues and one for the
// workers, bounded by CollectorOptions; scrapes that overlap share one
// read.
//
// Metrics:
//
//	worqr_queue_tasks{queue,state}   tasks by state: waiting, delayed, in_flight, dead
//	worqr_queue_oldest_waiting_seconds{queue}  how long its task waiting longest has waited (0: none waits)
//	worqr_queues                     queues in the registry (reported or not)
//	worqr_workers                    workers whose lease is live
//	worqr_scrape_errors_total        scrapes in which a read failed or timed out
//	worqr_scrape_duration_seconds    how long the last scrape's reads took
//
// A number whose read failed is left out of the scrape rather than
// reported as zero.
type Collector struct {
	reader  *queuestats.Reader
	onError func(error)

	tasks, oldest, queues, workers, took *prometheus.Desc
	errors                               prometheus.Counter
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector of the queues of client (of its
// prefix). Register it once per registry.
func NewCollector(client *worqr.Client, opts CollectorOptions) *Collector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, opts.ConstLabels)
	}
	return &Collector{
		reader:  &queuestats.Reader{Client: client, Timeout: opts.Timeout, MaxQueues: opts.MaxQueues, Parallel: opts.Parallel},
		onError: opts.OnError,
		tasks: desc("worqr_queue_tasks",
			"Tasks of a queue by state: waiting (ready to run), delayed (scheduled, or waiting out a retry backoff), in_flight (held by a worker), dead (dead letters).",
			"queue", "state"),
		oldest: desc("worqr_queue_oldest_waiting_seconds",
			"How long the task of a queue that has waited longest (since its enqueue, or the end of its delay or backoff) has waited, by the Redis clock against this process's; 0 when none waits. A queue that keeps up has a young oldest task however many wait.",
			"queue"),
		queues:  desc("worqr_queues", "Queues in the registry, including any beyond the collector's limit of queues reported."),
		workers: desc("worqr_workers", "Workers whose lease is live."),
		took:    desc("worqr_scrape_duration_seconds", "How long the last scrape took to read the queue sizes from Redis."),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "worqr_scrape_errors_total",
			Help:        "Scrapes of the queue sizes in which a read from Redis failed or timed out (the numbers not read were left out).",
			ConstLabels: opts.ConstLabels,
		}),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasks
	ch <- c.oldest
	ch <- c.queues
	ch <- c.workers
	ch <- c.took
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector: it reads from Redis.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.reader.Read(context.Background())
	gauge := func(d *prometheus.Desc, n queuestats.Count, labels ...string) {
		if n.OK {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(n.N), labels...)
		}
	}
	for _, q := range s.Queues {
		name := queuestats.Label(q.Name)
		gauge(c.tasks, q.Waiting, name, StateWaiting)
		gauge(c.tasks, q.Delayed, name, StateDelayed)
		gauge(c.tasks, q.InFlight, name, StateInFlight)
		gauge(c.tasks, q.Dead, name, StateDead)
		if q.Waiting.OK {
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, q.OldestWaiting(time.Now()).Seconds(), name)
		}
	}
	gauge(c.queues, s.QueueCount)
	gauge(c.workers, s.Workers)
	ch <- prometheus.MustNewConstMetric(c.took, prometheus.GaugeValue, s.Took.Seconds())
	if s.Failures > 0 {
		c.errors.Inc()
		if c.onError != nil {
			c.onError(s.Err)
		}
	}
	c.errors.Collect(ch)
}
