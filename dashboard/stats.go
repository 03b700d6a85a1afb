package dashboard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/worqr/worqr"
)

// Chart geometry of the queue page's stats chart (SVG user units).
const (
	chartW = 720
	chartH = 120
)

// statsView is the queue page's stats: a chart of the tasks finished and
// started per minute (or hour), and the totals of the window.
type statsView struct {
	Hourly  bool
	Window  string // "last hour", "last 7 days"
	Bars    []statsBar
	Max     int64 // the chart's top: the most started or finished in a bucket
	Total   worqr.StatsBucket
	Off     bool // nothing counted at all: stats may be off
	WaitP50 string
	WaitP99 string
	RunP50  string
	RunP99  string
}

// statsBar is one bucket of the chart: finished as a bar, started as a
// mark, both scaled to the chart's height, with a tooltip.
type statsBar struct {
	X, W, Y, H, StartedY float64
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
			v.Max = max(v.Max, b.Counts.Finished, b.Counts.Started)
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
		v.Bars = append(v.Bars, statsBar{
			X: float64(i)*w + 0.5, W: max(w-1, 0.5), Y: chartH - h, H: h, StartedY: chartH - scale(b.Counts.Started),
			Title: fmt.Sprintf("%s UTC: finished %d, started %d, enqueued %d, retried %d, dead %d; wait p50 %s, run p50 %s",
				b.Start.UTC().Format(layout), b.Counts.Finished, b.Counts.Started, b.Counts.Enqueued, b.Counts.Retried, b.Counts.Dead,
				latency(b.Wait, 0.5), latency(b.Run, 0.5)),
		})
	}
	return v
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
