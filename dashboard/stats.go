package dashboard

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/worqr/worqr"
)

// Chart geometry of the queue page's stats chart (SVG user units).
const (
	chartW = 720
	chartH = 120
)

// statsView is the queue page's stats: a chart of the tasks finished,
// retried and dead (stacked) and started per minute (or hour), a chart of
// the wait and run percentiles, and the totals of the window.
type statsView struct {
	Hourly bool
	Window string // "last hour", "last 7 days"
	Bars   []statsBar
	Max    int64 // the chart's top: the most started, or ended (finished, retried, dead), in a bucket
	// The percentile chart: one polyline each (SVG points), scaled to
	// LatMax, the largest p99, as text.
	WaitP50Line, WaitP99Line, RunP50Line, RunP99Line string
	LatMax                                           string
	Total                                            worqr.StatsBucket
	Off                                              bool // nothing counted at all: stats may be off
	WaitP50                                          string
	WaitP99                                          string
	RunP50                                           string
	RunP99                                           string
}

// statsBar is one bucket of the chart: finished as a bar, retried and
// dead stacked on it, started as a mark, all scaled to the chart's
// height, with a tooltip.
type statsBar struct {
	X, W, Y, H, StartedY float64
	RetriedY, RetriedH   float64
	DeadY, DeadH         float64
	Title                string
}

// statsWindow is what the queue page charts: the last 60 minutes, or with
// res=h the last 168 hours.
func statsWindow(r *http.Request) (res time.Duration, buckets int) {
	if r.URL.Query().Get("res") == "h" {
		return time.Hour, 168
	}
	return time.Minute, 60
}

// newStatsView lays out s, read at resolution res, over its last n buckets.
func newStatsView(s worqr.Stats, res time.Duration, n int) statsView {
	v := statsView{Hourly: res == time.Hour, Window: "last hour"}
	if v.Hourly {
		v.Window = "last 7 days"
	}
	first := s.Now.Truncate(res).Add(-time.Duration(n-1) * res)
	var in []worqr.StatsBucket
	for _, b := range s.Buckets {
		if !b.Start.Before(first) {
			in = append(in, b)
			c := b.Counts
			v.Max = max(v.Max, c.Finished+c.Retried+c.Dead, c.Started)
		}
	}
	v.Total = worqr.Stats{Buckets: in}.Total()
	c := v.Total.Counts
	v.Off = c == (worqr.StatsCounts{})
	v.WaitP50, v.WaitP99 = latency(v.Total.Wait, 0.5), latency(v.Total.Wait, 0.99)
	v.RunP50, v.RunP99 = latency(v.Total.Run, 0.5), latency(v.Total.Run, 0.99)
	w := float64(chartW) / float64(n)
	scale := func(x int64) float64 {
		if v.Max == 0 {
			return 0
		}
		return float64(x) * (chartH - 2) / float64(v.Max)
	}
	layout := "15:04"
	if v.Hourly {
		layout = "Jan 2 15:04"
	}
	for _, b := range in {
		i := int(b.Start.Sub(first) / res)
		h := scale(b.Counts.Finished)
		rh, dh := scale(b.Counts.Retried), scale(b.Counts.Dead)
		v.Bars = append(v.Bars, statsBar{
			X: float64(i)*w + 0.5, W: max(w-1, 0.5), Y: chartH - h, H: h, StartedY: chartH - scale(b.Counts.Started),
			RetriedY: chartH - h - rh, RetriedH: rh, DeadY: chartH - h - rh - dh, DeadH: dh,
			Title: fmt.Sprintf("%s UTC: finished %d, started %d, enqueued %d, retried %d, dead %d; wait p50 %s, run p50 %s",
				b.Start.UTC().Format(layout), b.Counts.Finished, b.Counts.Started, b.Counts.Enqueued, b.Counts.Retried, b.Counts.Dead,
				latency(b.Wait, 0.5), latency(b.Run, 0.5)),
		})
	}
	v.percentileLines(in, first, res, w)
	return v
}

// percentileLines draws the wait and run p50 and p99 of each bucket that
// counted some, at the bucket's middle, scaled to the largest p99.
func (v *statsView) percentileLines(in []worqr.StatsBucket, first time.Time, res time.Duration, w float64) {
	var top time.Duration
	for _, b := range in {
		if b.Wait.Count() > 0 {
			top = max(top, b.Wait.Quantile(0.99))
		}
		if b.Run.Count() > 0 {
			top = max(top, b.Run.Quantile(0.99))
		}
	}
	if top <= 0 {
		return
	}
	v.LatMax = top.Round(time.Microsecond).String()
	line := func(pick func(worqr.StatsBucket) (time.Duration, bool)) string {
		var pts []string
		for _, b := range in {
			d, ok := pick(b)
			if !ok {
				continue
			}
			x := (float64(b.Start.Sub(first)/res) + 0.5) * w
			y := chartH - 1 - float64(d)*(chartH-2)/float64(top)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		return strings.Join(pts, " ")
	}
	q := func(h func(worqr.StatsBucket) worqr.Histogram, p float64) func(worqr.StatsBucket) (time.Duration, bool) {
		return func(b worqr.StatsBucket) (time.Duration, bool) {
			if h(b).Count() == 0 {
				return 0, false
			}
			return h(b).Quantile(p), true
		}
	}
	wait := func(b worqr.StatsBucket) worqr.Histogram { return b.Wait }
	run := func(b worqr.StatsBucket) worqr.Histogram { return b.Run }
	v.WaitP50Line, v.WaitP99Line = line(q(wait, 0.5)), line(q(wait, 0.99))
	v.RunP50Line, v.RunP99Line = line(q(run, 0.5)), line(q(run, 0.99))
}

// latency is a percentile for people: "—" when nothing was counted.
func latency(h worqr.Histogram, q float64) string {
	if h.Count() == 0 {
		return "—"
	}
	d := h.Quantile(q)
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
