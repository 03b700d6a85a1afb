package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/worqr/worqr"
)

func statsCommands() []*command {
	return []*command{
		{name: "stats", synopsis: "<queue>", group: "Inspect", summary: "a queue's stats per minute (or hour): counts, wait and run times", run: cmdStats, help: `
Shows a queue's stats as the scripts keep them in Redis: per minute for the
last 6 hours (per hour for the last 7 days with --hourly), one row per
minute in which something happened, oldest first, and a total: tasks
enqueued, started, finished, retried, requeued, dead-lettered, reclaimed
and cancelled, and the median and 99th percentile of their wait (from due
to start) and run (from start to end) times, read from log-scale
histograms (within a factor of 2). --since limits the rows to the last
duration (like 15m). Times are UTC, by the Redis clock.

When tasks with a kind ended, a second table shows each kind's finished,
retried and dead tasks over the rows shown and their rates per minute
(over --since, or from the first row's start to now). A queue's stats keep
up to 10 kinds apart; tasks of kinds past them count as (other).`},
	}
}

// histogramJSON is a histogram for --json: its count, sum and
// percentiles in ms, and its non-empty buckets by upper bound (µs).
type histogramJSON struct {
	Count   int64           `json:"count"`
	SumMs   float64         `json:"sumMs"`
	MeanMs  float64         `json:"meanMs"`
	P50Ms   float64         `json:"p50Ms"`
	P90Ms   float64         `json:"p90Ms"`
	P99Ms   float64         `json:"p99Ms"`
	Buckets map[int64]int64 `json:"buckets"` // upper bound in µs -> count
}

// countsJSON are a bucket's counters for --json.
type countsJSON struct {
	Enqueued  int64 `json:"enqueued"`
	Started   int64 `json:"started"`
	Finished  int64 `json:"finished"`
	Retried   int64 `json:"retried"`
	Requeued  int64 `json:"requeued"`
	Dead      int64 `json:"dead"`
	Reclaimed int64 `json:"reclaimed"`
	Cancelled int64 `json:"cancelled"`
}

// kindCountsJSON are a kind's counters for --json.
type kindCountsJSON struct {
	Finished int64 `json:"finished"`
	Retried  int64 `json:"retried"`
	Dead     int64 `json:"dead"`
}

type statsBucketJSON struct {
	Start  *time.Time                `json:"start"`
	Counts countsJSON                `json:"counts"`
	Kinds  map[string]kindCountsJSON `json:"kinds,omitempty"` // by task kind, when any had one
	Wait   histogramJSON             `json:"wait"`
	Run    histogramJSON             `json:"run"`
}

// kindRateJSON is a kind's tasks per minute over the span shown.
type kindRateJSON struct {
	FinishedPerMin float64 `json:"finishedPerMin"`
	RetriedPerMin  float64 `json:"retriedPerMin"`
	DeadPerMin     float64 `json:"deadPerMin"`
}

type statsJSON struct {
	Queue        string            `json:"queue"`
	ResolutionMs int64             `json:"resolutionMs"`
	Now          *time.Time        `json:"now"`
	Buckets      []statsBucketJSON `json:"buckets"`
	Total        statsBucketJSON   `json:"total"`
	// SpanMs is the time the rates are over; KindRates are the rates of
	// the kinds in Total.Kinds.
	SpanMs    int64                   `json:"spanMs"`
	KindRates map[string]kindRateJSON `json:"kindRates,omitempty"`
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func histogramOf(h worqr.Histogram) histogramJSON {
	out := histogramJSON{Count: h.Count(), SumMs: millis(h.Sum), MeanMs: millis(h.Mean()),
		P50Ms: millis(h.Quantile(0.5)), P90Ms: millis(h.Quantile(0.9)), P99Ms: millis(h.Quantile(0.99)),
		Buckets: map[int64]int64{}}
	for k, n := range h.Buckets {
		if n > 0 {
			out.Buckets[worqr.HistogramBound(k).Microseconds()] = n
		}
	}
	return out
}

func bucketOf(b worqr.StatsBucket) statsBucketJSON {
	out := statsBucketJSON{Start: jsonTime(b.Start), Counts: countsJSON(b.Counts), Wait: histogramOf(b.Wait), Run: histogramOf(b.Run)}
	for kind, c := range b.Kinds {
		if out.Kinds == nil {
			out.Kinds = map[string]kindCountsJSON{}
		}
		out.Kinds[kind] = kindCountsJSON(c)
	}
	return out
}

// statsSpan is the time the rows shown cover, which the rates are over:
// the last since, else from the first row's start to now; at least one
// row's resolution.
func statsSpan(s worqr.Stats, since time.Duration) time.Duration {
	span := since
	if span <= 0 && len(s.Buckets) > 0 {
		span = s.Now.Sub(s.Buckets[0].Start)
	}
	return max(span, s.Resolution)
}

// kindRates are the kinds' tasks per minute over span.
func kindRates(kinds map[string]worqr.KindCounts, span time.Duration) map[string]kindRateJSON {
	if len(kinds) == 0 {
		return nil
	}
	out := make(map[string]kindRateJSON, len(kinds))
	mins := span.Minutes()
	for kind, c := range kinds {
		out[kind] = kindRateJSON{FinishedPerMin: float64(c.Finished) / mins, RetriedPerMin: float64(c.Retried) / mins, DeadPerMin: float64(c.Dead) / mins}
	}
	return out
}

// sortedKinds are the kinds of a stats total in order, StatsOtherKind
// last.
func sortedKinds(kinds map[string]worqr.KindCounts) []string {
	out := slices.Sorted(maps.Keys(kinds))
	if i := slices.Index(out, worqr.StatsOtherKind); i >= 0 {
		out = append(slices.Delete(out, i, i+1), worqr.StatsOtherKind)
	}
	return out
}

// rate is a rate per minute for a table, with two decimals.
func rate(r float64) string { return strconv.FormatFloat(r, 'f', 2, 64) }

// latency is a percentile for a table: "-" when nothing was counted, µs
// under a millisecond.
func latency(h worqr.Histogram, q float64) string {
	if h.Count() == 0 {
		return "-"
	}
	d := h.Quantile(q)
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return span(d)
}

func cmdStats(e *env, args []string) error {
	fs := e.flags()
	hourly := fs.Bool("hourly", false, "per hour for the last 7 days, not per minute for the last 6 hours")
	since := duration(fs, "since", "show only the last `duration` (like 15m, 2h)")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	opts := worqr.StatsOptions{Resolution: time.Minute}
	if *hourly {
		opts.Resolution = time.Hour
	}
	s, err := c.Stats(e.ctx, queue, opts)
	if err != nil {
		return err
	}
	if *since > 0 {
		// Since by the Redis clock, which Stats read.
		keep := s.Buckets[:0]
		for _, b := range s.Buckets {
			if b.Start.Add(s.Resolution).After(s.Now.Add(-*since)) {
				keep = append(keep, b)
			}
		}
		s.Buckets = keep
	}
	total := s.Total()
	span := statsSpan(s, *since)
	rates := kindRates(total.Kinds, span)
	if e.g.json {
		out := statsJSON{Queue: queue, ResolutionMs: s.Resolution.Milliseconds(), Now: jsonTime(s.Now), Buckets: []statsBucketJSON{}, Total: bucketOf(total),
			SpanMs: span.Milliseconds(), KindRates: rates}
		for _, b := range s.Buckets {
			out.Buckets = append(out.Buckets, bucketOf(b))
		}
		return e.printJSON(out)
	}
	if len(s.Buckets) == 0 {
		e.note("no stats for %q in that time", escape(queue))
		return nil
	}
	format := "2006-01-02 15:04"
	t := e.table("TIME", "ENQUEUED", "STARTED", "FINISHED", "RETRIED", "REQUEUED", "DEAD", "RECLAIMED", "CANCELLED", "WAIT-P50", "WAIT-P99", "RUN-P50", "RUN-P99")
	line := func(label string, b worqr.StatsBucket) {
		n := b.Counts
		t.row(label, itoa(n.Enqueued), itoa(n.Started), itoa(n.Finished), itoa(n.Retried), itoa(n.Requeued), itoa(n.Dead), itoa(n.Reclaimed), itoa(n.Cancelled),
			latency(b.Wait, 0.5), latency(b.Wait, 0.99), latency(b.Run, 0.5), latency(b.Run, 0.99))
	}
	for _, b := range s.Buckets {
		line(b.Start.UTC().Format(format), b)
	}
	line("TOTAL", total)
	if err := t.flush(); err != nil || len(total.Kinds) == 0 {
		return err
	}
	fmt.Fprintln(e.stdout)
	t = e.table("KIND", "FINISHED", "RETRIED", "DEAD", "FINISHED/MIN", "RETRIED/MIN", "DEAD/MIN")
	for _, kind := range sortedKinds(total.Kinds) {
		c, r := total.Kinds[kind], rates[kind]
		t.row(escape(kind), itoa(c.Finished), itoa(c.Retried), itoa(c.Dead), rate(r.FinishedPerMin), rate(r.RetriedPerMin), rate(r.DeadPerMin))
	}
	return t.flush()
}
