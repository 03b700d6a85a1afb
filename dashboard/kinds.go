package dashboard

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	"github.com/worqr/worqr"
)

// filterScan bounds the tasks of a list one filtered page (by kind, or
// the delayed list's retries or scheduled tasks) reads past its start, and
// the tasks of each list the kinds' counts read.
const filterScan = 1000

// groupsShown is how many groups a queue's page lists in each of its
// groups' tables.
const groupsShown = 10

// filterChunk is the tasks a filtered page reads at a time.
const filterChunk = 200

// filtered reads a page of the tasks keep accepts, from position from,
// filterChunk at a time through read (the tasks at positions from to from
// + n - 1, each of size bytes: see sized), filterScan of them and
// filterBytes of their payloads at most: it returns them and the position
// the next page starts at, 0 if none.
func filtered[T any](from int, read func(from, n int) ([]T, error), keep func(T) bool, size func(T) int) ([]T, int, error) {
	var out []T
	at, bytes := from, 0
	for at-from < filterScan {
		if bytes >= filterBytes {
			// Used up (the last chunk's last read ended past it): sized
			// would take what is left, 0 or less, as no limit.
			return out, at, nil
		}
		ts, cut, err := sized(read, size, filterBytes-bytes)(at, filterChunk)
		if err != nil {
			return nil, 0, err
		}
		for i, t := range ts {
			bytes += size(t) + entryOverhead
			if keep(t) {
				out = append(out, t)
				if len(out) == pageSize {
					return out, at + i + 1, nil
				}
			}
		}
		if cut {
			return out, at + len(ts), nil
		}
		if len(ts) < filterChunk {
			return out, 0, nil
		}
		at += filterChunk
	}
	return out, at, nil
}

// kindCount is what a queue holds of one kind ("" for the tasks without
// one) among the first filterScan waiting, delayed and dead tasks, and
// its tasks in flight.
type kindCount struct {
	Kind                             string
	Waiting, Delayed, InFlight, Dead int
	// Ended is what the queue's stats counted of the kind in the stats
	// window (see addKindStats): Rated is false for the tasks without a
	// kind, which the stats do not count apart, and when stats are off.
	Ended worqr.KindCounts
	Rated bool
	// per is the stats window in the rates' unit (60 minutes, 168 hours).
	per float64
}

// FinishedRate, RetriedRate and DeadRate are the kind's tasks finished,
// retried and dead per minute (per hour on the hourly page) over the
// stats window, "—" when not rated.
func (k kindCount) FinishedRate() string { return k.rate(k.Ended.Finished) }
func (k kindCount) RetriedRate() string  { return k.rate(k.Ended.Retried) }
func (k kindCount) DeadRate() string     { return k.rate(k.Ended.Dead) }

func (k kindCount) rate(n int64) string {
	if !k.Rated || k.per <= 0 {
		return "—"
	}
	return strconv.FormatFloat(float64(n)/k.per, 'f', 2, 64)
}

// Other says the row is the stats' count of the kinds past their bound
// (worqr.StatsOtherKind), no kind a task has: it filters nothing.
func (k kindCount) Other() bool { return k.Kind == worqr.StatsOtherKind }

// addKindStats puts the counts of the kinds' ended tasks in the stats
// window (st.Total.Kinds) beside the kinds counted, adding a row for a
// kind the lists no longer hold (and worqr.StatsOtherKind's) after them.
func addKindStats(kinds []kindCount, st statsView) []kindCount {
	if st.Off {
		return kinds
	}
	per := 60.0
	if st.Hourly {
		per = 168
	}
	seen := map[string]bool{}
	for i := range kinds {
		if k := kinds[i].Kind; k != "" {
			kinds[i].Ended, kinds[i].Rated, kinds[i].per = st.Total.Kinds[k], true, per
			seen[k] = true
		}
	}
	var more []kindCount
	for k, c := range st.Total.Kinds {
		if !seen[k] {
			more = append(more, kindCount{Kind: k, Ended: c, Rated: true, per: per})
		}
	}
	slices.SortFunc(more, func(a, b kindCount) int {
		return cmp.Or(cmp.Compare(b2i(a.Other()), b2i(b.Other())), cmp.Compare(b.Ended.Finished+b.Ended.Retried+b.Ended.Dead, a.Ended.Finished+a.Ended.Retried+a.Ended.Dead), cmp.Compare(a.Kind, b.Kind))
	})
	return append(kinds, more...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Total is the kind's tasks counted in every list.
func (k kindCount) Total() int { return k.Waiting + k.Delayed + k.InFlight + k.Dead }

// kindCounts counts a queue's tasks by kind: the first filterScan of its
// waiting and delayed tasks and dead letters, newest first, their
// payloads not read, and procs, its tasks in flight. It returns the counts,
// most tasks first, and whether a list held more than it read.
func (h *handler) kindCounts(ctx context.Context, queue string, procs []worqr.ProcessInfo) ([]kindCount, bool, error) {
	by := map[string]*kindCount{}
	count := func(kind string) *kindCount {
		k := by[kind]
		if k == nil {
			k = &kindCount{Kind: kind}
			by[kind] = k
		}
		return k
	}
	// Each list read to kindBytes at most (see sized): cutW, cutL and
	// cutD say one was cut short.
	none := worqr.PayloadPrefix(0)
	waiting, cutW, err := sized(func(from, n int) ([]worqr.TaskInfo, error) {
		return h.c.Tasks(ctx, queue, int64(from), int64(from+n-1), none)
	}, taskSize, kindBytes)(0, filterScan)
	if err != nil {
		return nil, false, err
	}
	delayed, cutL, err := sized(func(from, n int) ([]worqr.TaskInfo, error) {
		return h.c.Delayed(ctx, queue, int64(from), int64(from+n-1), none)
	}, taskSize, kindBytes)(0, filterScan)
	if err != nil {
		return nil, false, err
	}
	dead, cutD, err := sized(func(from, n int) ([]worqr.DeadLetter, error) {
		return h.c.DeadLetters(ctx, queue, from, n, none)
	}, deadSize, kindBytes)(0, filterScan)
	if err != nil {
		return nil, false, err
	}
	for _, t := range waiting {
		count(t.Kind).Waiting++
	}
	for _, t := range delayed {
		count(t.Kind).Delayed++
	}
	for _, p := range procs {
		count(p.TaskKind).InFlight++
	}
	for _, d := range dead {
		count(d.Kind).Dead++
	}
	out := make([]kindCount, 0, len(by))
	for _, k := range by {
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b kindCount) int {
		return cmp.Or(cmp.Compare(b.Total(), a.Total()), cmp.Compare(a.Kind, b.Kind))
	})
	more := len(waiting) == filterScan || len(delayed) == filterScan || len(dead) == filterScan || cutW || cutL || cutD
	return out, more, nil
}

// noKind is the kind filter's value for the tasks without a kind: kinds
// have no parentheses, so no kind is named so.
const noKind = "(none)"

// pageOf reads a page of a list from position from: through filtered when
// only some tasks are to be shown, else the pageSize tasks from there,
// in calls of about callBytes (see sized). It returns them and where the
// next page starts, 0 if none.
func pageOf[T any](from int, filter bool, read func(from, n int) ([]T, error), keep func(T) bool, size func(T) int) ([]T, int, error) {
	if filter {
		return filtered(from, read, keep, size)
	}
	ts, err := whole(read, size)(from, pageSize)
	if err != nil || len(ts) < pageSize {
		return ts, 0, err
	}
	return ts, from + pageSize, nil
}

// Param is the kind filter's value that shows this kind's tasks.
func (k kindCount) Param() string {
	if k.Kind == "" {
		return noKind
	}
	return k.Kind
}

// ShowKinds says whether the queue's page has a kinds section: some task
// counted has a kind, or the lists are filtered by one.
func (d queueData) ShowKinds() bool {
	return d.Kind != "" || len(d.Kinds) > 1 || len(d.Kinds) == 1 && d.Kinds[0].Kind != ""
}
