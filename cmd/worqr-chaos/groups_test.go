package main

import (
	"strconv"
	"testing"
)

// groupRun reports a run of a grouped task on groupQueue: it starts with
// process id pid (the Redis clock, µs) and its handler ends at end (wall
// clock µs), settled as out.
func groupRun(l *ledger, task string, pid, end int64, out string) {
	p := strconv.FormatInt(pid, 16)
	l.apply("w1.1", report{Ev: "start", T: pid, W: pid, Q: groupQueue, PID: p, Task: task, Owner: "w1.1-id", Attempt: 1})
	l.apply("w1.1", report{Ev: "end", T: end, W: end, Q: groupQueue, PID: p, OK: out == outFinished})
	l.apply("w1.1", report{Ev: "settled", Q: groupQueue, PID: p, Cause: out})
}

// grouped is tasks of groupQueue, each enqueued once at its id.
func grouped(ids map[string]int64) map[string]*taskInfo {
	out := make(map[string]*taskInfo)
	for t, id := range ids {
		pl, err := parsePlan(t)
		if err != nil {
			panic(err)
		}
		out[t] = &taskInfo{queue: groupQueue, kind: "job", plan: pl, copies: []int64{1}, enqueuedUs: id}
	}
	return out
}

// The group checks: a start while the group's limit of runs settled by
// their worker were in flight is over the limit, one after another's
// handler ended is not, nor is one after a lost run's start; a sequence's
// start of a task after a later task's start is out of order, a retry of
// the front task before the later one is not.
func TestJudgeGroups(t *testing.T) {
	t.Parallel()
	tasks := grouped(map[string]int64{"job-1.gs0": 1, "job-2.gs0": 2, "job-3.gl0": 3, "job-4.gl0": 4, "job-5.gl0": 5})

	l := newLedger()
	groupRun(l, "job-1.gs0", 100, 110, outRetried)
	groupRun(l, "job-1.gs0", 120, 130, outFinished)
	groupRun(l, "job-2.gs0", 131, 140, outFinished)
	groupRun(l, "job-3.gl0", 1000, 1100, outFinished)
	groupRun(l, "job-4.gl0", 1001, 1050, outLost) // its slot may have been freed at once
	groupRun(l, "job-5.gl0", 1002, 1060, outFinished)
	v := l.judgeGroups(tasks)
	if len(v.overLimit)+len(v.outOfOrder) != 0 || v.runs != 6 || v.seqStarts != 3 || v.most[1] != 1 || v.most[2] != 2 {
		t.Fatalf("a run within the rules judged a violation: %+v", v)
	}

	l = newLedger()
	groupRun(l, "job-1.gs0", 100, 110, outFinished)
	groupRun(l, "job-2.gs0", 105, 120, outFinished) // while job-1 ran
	groupRun(l, "job-3.gl0", 1000, 1100, outFinished)
	groupRun(l, "job-4.gl0", 1001, 1050, outRetried)
	groupRun(l, "job-5.gl0", 1002, 1060, outFinished) // the third at once
	v = l.judgeGroups(tasks)
	if len(v.overLimit) != 2 || v.most[1] != 2 || v.most[2] != 3 {
		t.Fatalf("starts over the limit not caught: %+v", v)
	}

	l = newLedger()
	groupRun(l, "job-2.gs0", 100, 110, outFinished)
	groupRun(l, "job-1.gs0", 120, 130, outFinished) // enqueued first, started after job-2
	v = l.judgeGroups(tasks)
	if len(v.outOfOrder) != 1 || len(v.overLimit) != 0 {
		t.Fatalf("a sequence out of order not caught: %+v", v)
	}
	tasks["job-1.gs0"].copies = []int64{1, 2} // two copies: its place is not known
	v = l.judgeGroups(tasks)
	if len(v.outOfOrder) != 0 || v.seqSkipped != 1 {
		t.Fatalf("a task that may have two copies judged by order: %+v", v)
	}
}

// The check of held sequences: a sequence whose task died while the
// queue's hold was surely on is held from a millisecond past its dead
// letter's time until the hold went off, and a run of its tasks that
// began then is a start while held; runs before the death or after the
// hold are not, nor are runs of a sequence whose task died before the
// hold was on, of the sequence that never holds, or of a group that is
// no sequence.
func TestJudgeHolds(t *testing.T) {
	t.Parallel()
	tasks := grouped(map[string]int64{
		"job-1.gs0": 1, "job-2.gs0": 2, "job-3.gs0": 3, "job-4.gs0": 4,
		"job-5.gs1": 5, "job-6.gs1": 6,
		"job-7.gs2": 7, "job-8.gs2": 8,
		"job-9.gl0": 9, "job-10.gl0": 10,
	})
	const from, until = 10_000, 100_000 // the hold surely on, µs
	dead := map[string][]deadLetter{
		"job-1.gs0":  {{reason: "exhausted", died: 20_000}}, // s0 held from 21,000
		"job-5.gs1":  {{reason: "permanent", died: 9_000}},  // before the hold was on
		"job-7.gs2":  {{reason: "permanent", died: 20_000}}, // the sequence that never holds
		"job-9.gl0":  {{reason: "permanent", died: 20_000}}, // no sequence
		"job-10.gl0": nil,
	}

	l := newLedger()
	groupRun(l, "job-1.gs0", 19_000, 19_500, outDead)
	groupRun(l, "job-2.gs0", 20_500, 20_600, outFinished) // within the dead letter's millisecond
	groupRun(l, "job-3.gs0", 100_000, 100_100, outFinished)
	groupRun(l, "job-5.gs1", 8_000, 8_500, outDead)
	groupRun(l, "job-6.gs1", 30_000, 30_100, outFinished)
	groupRun(l, "job-7.gs2", 19_001, 19_500, outDead) // each run its own process id
	groupRun(l, "job-8.gs2", 30_001, 30_100, outFinished)
	groupRun(l, "job-9.gl0", 19_002, 19_500, outDead)
	groupRun(l, "job-10.gl0", 30_002, 30_100, outFinished)
	v := l.judgeHolds(tasks, dead, from, until)
	if len(v.heldStarts) != 0 || v.holds != 1 || v.judged != 3 {
		t.Fatalf("a run within the rules judged a start while held: %+v", v)
	}

	groupRun(l, "job-4.gs0", 21_000, 21_100, outFinished) // while s0 was held
	groupRun(l, "job-2.gs0", 99_999, 100_050, outFinished)
	v = l.judgeHolds(tasks, dead, from, until)
	if len(v.heldStarts) != 2 || v.holds != 1 || v.judged != 5 {
		t.Fatalf("starts while held not caught: %+v", v)
	}
	dead["job-1.gs0"] = append(dead["job-1.gs0"], deadLetter{reason: "permanent", died: 99_000})
	if w := l.judgeHolds(tasks, dead, from, until); len(w.heldStarts) != 2 {
		t.Fatalf("a later death of the same sequence moved its hold: %+v", w)
	}
}
