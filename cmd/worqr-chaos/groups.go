package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/worqr/worqr"
)

// groupTurns are the turns in a row of groupQueue's groups that have
// their own (the others take one): the groups take unequal shares of the
// starts, which must exceed no limit and break no sequence's order.
var groupTurns = map[string]int{"l0": 3, "u0": 2, "s1": 2}

// unheldGroup is the sequence whose own setting never holds it on a dead
// task, whatever the queue's (see switchHolds).
const unheldGroup = "s2"

// sabotageHolds sets every sequence's own sequence hold off, while the
// verifier judges them as following the queue's: a sequence whose task
// dies while the queue holds its sequences goes on (held sequence
// started). The producer makes more of the sequences' tasks fail
// permanently (producer.seqDeaths), so that a short run has deaths to
// hold on.
const sabotageHolds = "holds"

// setGroupLimits sets groupQueue's group limits (see groupLimit) before
// the run: each group's own, and the default; extra more than that
// (-sabotage groups). It sets the groups' turns (groupTurns), and
// unheldGroup's own sequence hold off, every sequence's with unheld
// (-sabotage holds), and the queue's turn size (-group-turn-size).
func setGroupLimits(ctx context.Context, c *worqr.Client, extra int, unheld bool, turnSize int) error {
	if err := c.SetGroupConcurrency(ctx, groupQueue, "", defaultGroupLimit+extra, worqr.CreateQueue()); err != nil {
		return err
	}
	if err := c.SetGroupTurnSize(ctx, groupQueue, turnSize); err != nil {
		return err
	}
	for _, g := range groups {
		if n, own := groupLimit(g); own {
			if err := c.SetGroupConcurrency(ctx, groupQueue, g, n+extra); err != nil {
				return err
			}
		}
		if n := groupTurns[g]; n > 0 {
			if err := c.SetGroupTurns(ctx, groupQueue, g, n); err != nil {
				return err
			}
		}
		if n, _ := groupLimit(g); unheld && n == 1 && g != unheldGroup {
			if err := c.SetGroupSequenceHold(ctx, groupQueue, g, worqr.GroupHoldOff); err != nil {
				return err
			}
		}
	}
	return c.SetGroupSequenceHold(ctx, groupQueue, unheldGroup, worqr.GroupHoldOff)
}

// holdsVerdict is what switchHolds did.
type holdsVerdict struct {
	// on is how long groupQueue held its sequences on a dead task, and
	// held the sequences so held when it stopped (-1: not read).
	on   time.Duration
	held int64
	// from and until bound, by the wall clock of Redis's host (µs), a
	// time the queue's setting was surely on: from the return of the
	// call that turned it on to the first try of the one that turned it
	// off (a try that failed may have turned it off all the same).
	from, until int64
	err         error
}

// switchHolds turns groupQueue's sequence hold on at on and off at off,
// through the run's faults: each call is tried again until it takes (the
// second until 30 s past off: the queue must not drain with sequences
// held). Before it stops it reads how many sequences are held.
func switchHolds(c *worqr.Client, on, off time.Time) holdsVerdict {
	try := func(until time.Time, f func(ctx context.Context) error) error {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := f(ctx)
			cancel()
			if err == nil || time.Now().After(until) {
				return err
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	time.Sleep(time.Until(on))
	if err := try(off, func(ctx context.Context) error { return c.SetSequenceHold(ctx, groupQueue, true) }); err != nil {
		return holdsVerdict{err: fmt.Errorf("sequence hold on: %w", err)}
	}
	began := time.Now()
	time.Sleep(time.Until(off))
	v := holdsVerdict{held: -1, from: began.UnixMicro()}
	_ = try(time.Now().Add(5*time.Second), func(ctx context.Context) error {
		info, err := c.QueueInfo(ctx, groupQueue)
		if err == nil {
			v.held = info.GroupsHeldOnDead
		}
		return err
	})
	v.until = time.Now().UnixMicro()
	if err := try(time.Now().Add(30*time.Second), func(ctx context.Context) error { return c.SetSequenceHold(ctx, groupQueue, false) }); err != nil {
		v.err = fmt.Errorf("sequence hold off: %w", err)
	}
	v.on = time.Since(began)
	return v
}

// groupVerdict is what the group checks found.
type groupVerdict struct {
	// runs are the grouped tasks' runs judged; most is, per group limit,
	// the most runs of one group found in flight at once.
	runs int
	most map[int]int
	// overLimit are starts of a group's task while its limit of runs was
	// already in flight, by the Redis clock.
	overLimit []string
	// seqStarts are the starts of sequences' tasks judged for order, and
	// seqSkipped those of tasks an enqueue may have queued twice (their
	// place in the order is not known); outOfOrder are starts of a
	// sequence's task after a later task of it had started.
	seqStarts, seqSkipped int
	outOfOrder            []string
}

// judgeGroups checks groupQueue's runs against the groups' limits and
// the sequences' order, by the Redis clock.
//
// A run's process, in Redis, is in flight from its process id (the
// Redis clock at its dequeue) until the script that settles it; for a run
// its own worker settled (finished, retried or dead: not lost, fenced or
// killed), that script ran after the handler's end report, whose wall
// clock (the workers run on Redis's host, whose clock TIME reads) is so a
// time the process was still in flight. So a run that started, by its id,
// between another's id and that one's end report started while the other
// held a slot of its group: more such at once than the limit is a
// violation, whatever the faults (a lost run is not counted: its slot may
// have been freed by a reclaim before its handler ended).
//
// In a sequence, the tasks start in enqueue order (their ids), a retried
// or reclaimed one again before any later one: the starts of its runs,
// in process id order, must never go back to an earlier task.
func (l *ledger) judgeGroups(tasks map[string]*taskInfo) groupVerdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := groupVerdict{most: make(map[int]int)}
	type start struct {
		task       string
		pid, until int64 // until: the end report's wall clock, 0 unless settled by its worker
		order      int64 // the task's enqueue (its id), 0 if it may have two copies
	}
	byGroup := make(map[string][]start)
	for t, info := range tasks {
		if info.queue != groupQueue || info.kind != "job" {
			continue
		}
		order := info.enqueuedUs
		if len(info.copies) != 1 {
			order = 0
		}
		for _, ru := range l.byTask[t] {
			if ru.q != groupQueue {
				continue
			}
			pid, err := strconv.ParseInt(ru.pid, 16, 64)
			if err != nil {
				l.problem("a run of %s has a process id %q that is no Redis clock reading", t, ru.pid)
				continue
			}
			s := start{task: t, pid: pid, order: order}
			switch ru.settled {
			case outFinished, outRetried, outDead:
				if ru.wEnd > 0 {
					s.until = ru.wEnd
				}
			}
			byGroup[info.plan.group] = append(byGroup[info.plan.group], s)
		}
	}
	for g, starts := range byGroup {
		limit, _ := groupLimit(g)
		slices.SortFunc(starts, func(a, b start) int { return int(a.pid - b.pid) })
		v.runs += len(starts)
		for i, s := range starts {
			n := 1
			for _, r := range starts[:i] {
				if r.until > s.pid {
					n++
				}
			}
			v.most[limit] = max(v.most[limit], n)
			if n > limit {
				v.overLimit = append(v.overLimit, fmt.Sprintf("group %s (limit %d): %s started (pid %x) while %d of its runs were in flight", g, limit, s.task, s.pid, n-1))
			}
		}
		if limit != 1 {
			continue
		}
		var last start
		for _, s := range starts {
			if s.order == 0 {
				v.seqSkipped++
				continue
			}
			v.seqStarts++
			if last.order > s.order {
				v.outOfOrder = append(v.outOfOrder, fmt.Sprintf("sequence %s: %s (enqueued %d) started (pid %x) after %s, enqueued after it, had (pid %x)", g, s.task, s.order, s.pid, last.task, last.pid))
			}
			if s.order > last.order {
				last = s
			}
		}
	}
	return v
}

// holdVerdict is what the check of held sequences found.
type holdVerdict struct {
	// holds counts the sequences judged held, and judged their tasks'
	// runs judged against those holds; heldStarts are runs that began
	// while their sequence was held.
	holds, judged int
	heldStarts    []string
}

// judgeHolds checks that no held sequence of groupQueue started a task,
// by the Redis clock: a sequence (a group of limit 1 that follows the
// queue's sequence hold) whose task died, by its dead letter's time,
// while the queue's setting was surely on (from, until: see
// holdsVerdict) is held from that death until the setting went off (its
// dead letters are neither requeued nor deleted during the run), so
// every run of its tasks with a process id (the Redis clock at its
// dequeue) past the death and before until is a start while held. A dead
// letter's time is cut to the millisecond: the death is taken a
// millisecond later, never earlier than it was.
func (l *ledger) judgeHolds(tasks map[string]*taskInfo, dead map[string][]deadLetter, from, until int64) holdVerdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	var v holdVerdict
	heldFrom := make(map[string]int64) // sequence -> its first death surely held
	heldBy := make(map[string]string)  // sequence -> the task that died then
	for t, info := range tasks {
		g := info.plan.group
		if info.queue != groupQueue || info.kind != "job" || g == unheldGroup {
			continue
		}
		if n, _ := groupLimit(g); n != 1 {
			continue
		}
		for _, dl := range dead[t] {
			at := dl.died + 1000
			if dl.died < from || at >= until {
				continue
			}
			if h, ok := heldFrom[g]; !ok || at < h {
				heldFrom[g], heldBy[g] = at, t
			}
		}
	}
	v.holds = len(heldFrom)
	for t, info := range tasks {
		at, held := heldFrom[info.plan.group]
		if info.queue != groupQueue || info.kind != "job" || !held {
			continue
		}
		for _, ru := range l.byTask[t] {
			if ru.q != groupQueue {
				continue
			}
			pid, err := strconv.ParseInt(ru.pid, 16, 64)
			if err != nil {
				continue // judgeGroups reports it
			}
			v.judged++
			if pid >= at && pid < until {
				v.heldStarts = append(v.heldStarts, fmt.Sprintf("sequence %s, held from %x (µs) by the death of %s until %x: %s started (pid %x)",
					info.plan.group, at, heldBy[info.plan.group], until, t, pid))
			}
		}
	}
	slices.Sort(v.heldStarts)
	return v
}
