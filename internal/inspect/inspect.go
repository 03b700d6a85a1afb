// Package inspect holds the read side's arithmetic that needs no Redis:
// the picks of a queue's groups report, the quantiles of the stats'
// histograms, the order of a queue's processes and FindTask's bounds. The root package converts the results to its public types.
package inspect

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/worqr/worqr/internal/store"
)

// Tops are the groups a groups report lists, each list by its count,
// largest first, then by key, at most n of them (the root's
// GroupsReport).
type Tops struct {
	Waiting    []store.GroupState // with tasks waiting, by tasks waiting
	Running    []store.GroupState // with slots held, by slots held
	HeldBack   []store.GroupState // held back at a limit or rate (not on a dead task), by tasks waiting
	HeldOnDead []store.GroupState // held on a dead task, by tasks waiting
}

// HeldBack says whether a group is held back: it has tasks waiting but
// its turn may not come.
func HeldBack(g store.GroupState) bool { return g.Waiting > 0 && !g.Ready }

// TopGroups picks the lists of a groups report from the groups read.
func TopGroups(gs []store.GroupState, n int) Tops {
	top := func(keep func(store.GroupState) bool, by func(store.GroupState) int64) []store.GroupState {
		var out []store.GroupState
		for _, g := range gs {
			if keep(g) {
				out = append(out, g)
			}
		}
		slices.SortFunc(out, func(a, b store.GroupState) int { return cmp.Or(cmp.Compare(by(b), by(a)), cmp.Compare(a.Key, b.Key)) })
		return out[:min(n, len(out))]
	}
	waiting := func(g store.GroupState) int64 { return g.Waiting }
	return Tops{
		Waiting:    top(func(g store.GroupState) bool { return g.Waiting > 0 }, waiting),
		Running:    top(func(g store.GroupState) bool { return g.Running > 0 }, func(g store.GroupState) int64 { return g.Running }),
		HeldBack:   top(func(g store.GroupState) bool { return HeldBack(g) && g.DeadTask == "" }, waiting),
		HeldOnDead: top(func(g store.GroupState) bool { return g.DeadTask != "" }, waiting),
	}
}

// Bound is the upper bound of a histogram's bucket k: 2^k µs.
func Bound(k int) time.Duration {
	return time.Duration(int64(1)<<k) * time.Microsecond
}

// Count is the number of durations a histogram's buckets counted.
func Count(buckets []int64) int64 {
	var n int64
	for _, b := range buckets {
		n += b
	}
	return n
}

// Quantile estimates the q-quantile of the durations a histogram's
// buckets counted (q clamped to 0..1), interpolating linearly inside its
// bucket (bucket k holds those above Bound(k-1) up to Bound(k)); 0 if none
// was counted.
func Quantile(buckets []int64, q float64) time.Duration {
	n := Count(buckets)
	if n == 0 {
		return 0
	}
	q = math.Min(math.Max(q, 0), 1)
	rank := q * float64(n)
	var seen float64
	for k, b := range buckets {
		if b == 0 {
			continue
		}
		if seen+float64(b) >= rank {
			lo := time.Duration(0)
			if k > 0 {
				lo = Bound(k - 1)
			}
			hi := Bound(k)
			frac := (rank - seen) / float64(b)
			return lo + time.Duration(frac*float64(hi-lo))
		}
		seen += float64(b)
	}
	return Bound(len(buckets) - 1)
}

// FindBounds bound FindTask's search in each place it looks: the tasks
// it looks at and their bytes (the root's FindTask tells them).
var FindBounds = store.FindBounds{Limit: 20000, Budget: 16 << 20}

// SortProcs orders processes by id, which is dequeue order: the store
// reads them in hash order.
func SortProcs(ps []store.Proc) {
	slices.SortFunc(ps, func(a, b store.Proc) int { return cmp.Compare(store.PIDSeq(a.PID), store.PIDSeq(b.PID)) })
}
