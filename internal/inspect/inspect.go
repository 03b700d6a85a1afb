// Package inspect holds the read side's arithmetic that needs no Redis:
// a queue's groups report and its picks, the order of a queue's
// processes and FindTask's bounds, an inspection call's options (the cut
// of its payloads) and a listing's records converted.
package inspect

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
	"github.com/worqr/worqr/worqrtype"
)

// Tops are the groups a groups report lists, each list by its count,
// largest first, then by key, at most n of them (GroupsReport's lists).
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

// FindBounds bound FindTask's search in each place it looks: the tasks
// it looks at and their bytes (the root's FindTask tells them).
var FindBounds = store.FindBounds{Limit: 20000, Budget: 16 << 20}

// SortProcs orders processes by id, which is dequeue order: the store
// reads them in hash order.
func SortProcs(ps []store.Proc) {
	slices.SortFunc(ps, func(a, b store.Proc) int { return cmp.Compare(store.PIDSeq(a.PID), store.PIDSeq(b.PID)) })
}

// Groups is a queue's groups report: the top n groups of each list, of
// those st read.
func Groups(queue string, st store.GroupsState, n int) worqrtype.GroupsReport {
	r := worqrtype.GroupsReport{Queue: queue, Ready: st.Ready, Running: st.Running, DefaultLimit: st.DefaultLimit,
		DefaultRate: st.DefaultRate, DefaultPer: st.DefaultPer, DefaultTurns: cmp.Or(st.DefaultTurns, 1), TurnSize: cmp.Or(st.TurnSize, 1), Partial: st.Partial}
	infos := func(gs []store.GroupState) []worqrtype.GroupInfo {
		var out []worqrtype.GroupInfo
		for _, g := range gs {
			out = append(out, groupInfo(g, st))
		}
		return out
	}
	t := TopGroups(st.Groups, n)
	r.TopWaiting, r.TopRunning, r.HeldBack, r.HeldOnDead = infos(t.Waiting), infos(t.Running), infos(t.HeldBack), infos(t.HeldOnDead)
	return r
}

// groupInfo is a group as GroupInfo describes it, the queue's defaults
// filled in where it has no setting of its own.
func groupInfo(g store.GroupState, st store.GroupsState) worqrtype.GroupInfo {
	gi := worqrtype.GroupInfo{Key: g.Key, Waiting: g.Waiting, Running: g.Running, Limit: cmp.Or(g.Limit, st.DefaultLimit),
		Rate: g.Rate, Per: g.Per, HeldBack: HeldBack(g), DeadTask: g.DeadTask,
		Turns: cmp.Or(g.Turns, st.DefaultTurns, 1), Hold: worqrtype.GroupHold(g.Hold)}
	if gi.Rate == 0 {
		gi.Rate, gi.Per = st.DefaultRate, st.DefaultPer
	}
	if g.RateUntil > 0 {
		gi.RateHeldUntil = time.UnixMicro(g.RateUntil)
	}
	return gi
}

// Options are an inspection call's options (the root's InspectOption
// values set them).
type Options struct {
	Cut int // bytes of each payload; < 0: whole
}

// Cut is the cut opts ask for (-1: whole), or ErrInvalidOptions for a
// negative prefix, in the error of the call op on queue.
func Cut[O ~func(*Options)](op, queue string, opts []O) (int, error) {
	o := Options{Cut: -1}
	set := false
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
			set = true
		}
	}
	if set && o.Cut < 0 {
		return 0, fmt.Errorf("worqr: %s %q: payload prefix %d: %w", op, queue, o.Cut, errs.ErrInvalidOptions)
	}
	return o.Cut, nil
}

// Each is f of every element of xs, in order: a listing's records as
// worqrtype gives them.
func Each[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
