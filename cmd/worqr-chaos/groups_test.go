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
