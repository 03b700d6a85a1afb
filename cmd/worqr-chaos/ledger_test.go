package main

import (
	"strings"
	"testing"
)

// The ledger's judgement on made-up reports: a checker that cannot fail
// proves nothing, so each violation it must catch is caught here, next to
// the look-alike it must let pass.

func start(l *ledger, inst, task, pid string, t int64) {
	l.apply(inst, report{Ev: "start", T: t, Q: "q", PID: pid, Task: task, Owner: inst + "-id"})
}

func end(l *ledger, inst, pid string, t int64, ok bool, cause string) {
	l.apply(inst, report{Ev: "end", T: t, Q: "q", PID: pid, OK: ok, Cause: cause})
}

func settled(l *ledger, inst, pid, out string) {
	l.apply(inst, report{Ev: "settled", Q: "q", PID: pid, Cause: out})
}

func fence(l *ledger, inst string, t int64, lost ...lostProc) {
	l.apply(inst, report{Ev: "fence", T: t, Lost: lost})
}

func job(copies ...int64) map[string]*taskInfo {
	return map[string]*taskInfo{"job-1": {queue: "q", kind: "job", copies: copies}}
}

func conn() map[string]*taskInfo {
	return map[string]*taskInfo{"conn-0": {queue: "q", kind: "conn", copies: []int64{1}}}
}

const fencedCause = "worqr: process lost: worqr: worker fenced (lease lost)"

func TestPersistentHoldsThatOverlapAreCaught(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "conn-0", "1", 10)
	start(l, "w2.1", "conn-0", "2", 20) // w1.1 still holds it
	v := l.judge(conn(), 0)
	if len(v.overlaps) != 1 {
		t.Fatalf("overlaps = %v, want one", v.overlaps)
	}
	if len(v.unexplained) != 1 {
		t.Errorf("a re-hold without a release must be unexplained: %v", v.unexplained)
	}
}

func TestKilledHolderHoldsUntilReaped(t *testing.T) {
	for _, tc := range []struct {
		reaped   int64
		overlaps int
	}{{reaped: 15, overlaps: 0}, {reaped: 25, overlaps: 1}} {
		l := newLedger()
		start(l, "w1.1", "conn-0", "1", 10)
		l.killed("w1.1", 12, tc.reaped)
		start(l, "w2.1", "conn-0", "2", 20)
		v := l.judge(conn(), 0)
		if len(v.overlaps) != tc.overlaps {
			t.Errorf("reaped at %d: overlaps = %v, want %d", tc.reaped, v.overlaps, tc.overlaps)
		}
		if len(v.unexplained) != 0 || v.handovers != 1 {
			t.Errorf("reaped at %d: a kill explains the hand-over: %v, %d hand-overs", tc.reaped, v.unexplained, v.handovers)
		}
	}
}

func TestFencedHolderHoldsUntilItsHandlerReturns(t *testing.T) {
	for _, tc := range []struct {
		ended    int64
		overlaps int
	}{{ended: 15, overlaps: 0}, {ended: 25, overlaps: 1}} {
		l := newLedger()
		start(l, "w1.1", "conn-0", "1", 10)
		fence(l, "w1.1", 14, lostProc{Q: "q", PID: "1", Task: "conn-0"})
		end(l, "w1.1", "1", tc.ended, false, fencedCause)
		start(l, "w2.1", "conn-0", "2", 20)
		end(l, "w2.1", "2", 30, false, "worqr: worker shutting down")
		v := l.judge(conn(), 0)
		if len(v.overlaps) != tc.overlaps {
			t.Errorf("ended at %d: overlaps = %v, want %d", tc.ended, v.overlaps, tc.overlaps)
		}
		if len(v.strangeEnds) != 0 {
			t.Errorf("fence and shutdown are expected ends: %v", v.strangeEnds)
		}
	}
}

func TestPersistentHoldEndingForNoFaultIsCaught(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "conn-0", "1", 10)
	end(l, "w1.1", "1", 15, false, "worqr: process lost")
	if v := l.judge(conn(), 0); len(v.strangeEnds) != 1 {
		t.Errorf("strange ends = %v, want one", v.strangeEnds)
	}
}

func TestDuplicates(t *testing.T) {
	for _, tc := range []struct {
		name        string
		copies      []int64
		between     func(l *ledger) // after the first run started at 10
		explained   int
		unexplained int
	}{
		{name: "finished, then ran again", copies: []int64{1},
			between: func(l *ledger) {
				end(l, "w1.1", "1", 11, true, "")
				settled(l, "w1.1", "1", outFinished)
			},
			unexplained: 1},
		{name: "holder killed before finishing", copies: []int64{1},
			between: func(l *ledger) {
				end(l, "w1.1", "1", 11, true, "")
				l.killed("w1.1", 12, 13)
			},
			explained: 1},
		{name: "holder killed after finishing", copies: []int64{1},
			between: func(l *ledger) {
				end(l, "w1.1", "1", 11, true, "")
				settled(l, "w1.1", "1", outFinished)
				l.killed("w1.1", 12, 13)
			},
			unexplained: 1},
		{name: "holder fenced", copies: []int64{1},
			between: func(l *ledger) {
				fence(l, "w1.1", 12, lostProc{Q: "q", PID: "1", Task: "job-1"})
				end(l, "w1.1", "1", 13, false, fencedCause)
			},
			explained: 1},
		{name: "holder fenced only after the second run began", copies: []int64{1},
			between: func(l *ledger) {
				end(l, "w1.1", "1", 11, true, "") // its Finish had not gone through
				fence(l, "w1.1", 25, lostProc{Q: "q", PID: "1", Task: "job-1"})
			},
			unexplained: 1},
		{name: "enqueue retried after an unknown outcome", copies: []int64{1, 2},
			between: func(l *ledger) {
				end(l, "w1.1", "1", 11, true, "")
				settled(l, "w1.1", "1", outFinished)
			},
			explained: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			start(l, "w1.1", "job-1", "1", 10)
			tc.between(l)
			start(l, "w2.1", "job-1", "2", 20)
			end(l, "w2.1", "2", 21, true, "")
			settled(l, "w2.1", "2", outFinished)
			v := l.judge(job(tc.copies...), 0)
			if v.duplicates != 1 || v.explained != tc.explained || len(v.unexplained) != tc.unexplained {
				t.Errorf("duplicates %d, explained %d, unexplained %v; want 1, %d, %d",
					v.duplicates, v.explained, v.unexplained, tc.explained, tc.unexplained)
			}
			if len(v.lost) != 0 || len(v.overlaps) != 0 {
				t.Errorf("lost %v, overlaps %v", v.lost, v.overlaps)
			}
		})
	}
}

func TestJobThatNeverCompletedIsLost(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "job-1", "1", 10)
	fence(l, "w1.1", 12, lostProc{Q: "q", PID: "1", Task: "job-1"})
	end(l, "w1.1", "1", 13, false, fencedCause)
	v := l.judge(job(1), 0)
	if len(v.lost) != 1 || !strings.Contains(l.history("job-1"), "fenced@") {
		t.Errorf("lost = %v, history %s", v.lost, l.history("job-1"))
	}
	l = newLedger()
	if v := l.judge(job(1), 0); len(v.lost) != 1 || v.tasks != 1 {
		t.Errorf("a job that never ran: lost = %v, tasks %d", v.lost, v.tasks)
	}
}

func TestHandlerThatNeverEndedIsReported(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "job-1", "1", 10)
	if v := l.judge(job(1), 0); len(v.neverEnded) != 1 {
		t.Errorf("never ended = %v", v.neverEnded)
	}
	l.killed("w1.1", 11, 12)
	if v := l.judge(job(1), 0); len(v.neverEnded) != 0 {
		t.Errorf("a killed process's handlers end with it: %v", v.neverEnded)
	}
}

func TestReportsThatMakeNoSenseAreProblems(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "job-1", "1", 10)
	start(l, "w2.1", "job-1", "1", 11)          // same process started twice
	end(l, "w3.1", "9", 12, true, "")           // unknown process
	l.apply("w1.1", report{Ev: "bogus", T: 13}) // unknown report
	if v := l.judge(job(1), 0); len(v.problems) != 3 {
		t.Errorf("problems = %v", v.problems)
	}
}

func TestLatencyRunsFromFirstEnqueueToFirstCompletion(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "job-1", "1", 10)
	end(l, "w1.1", "1", 30, true, "")
	start(l, "w2.1", "job-1", "2", 12)
	end(l, "w2.1", "2", 25, true, "")
	v := l.judge(job(5, 8), 0)
	if got := v.latency(1); got != 20 {
		t.Errorf("latency = %v, want 20ns", got)
	}
}

func TestCopiesOfARetriedEnqueueMayRunAtOnce(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "job-1", "1", 10)
	start(l, "w2.1", "job-1", "2", 11)
	end(l, "w2.1", "2", 12, true, "")
	end(l, "w1.1", "1", 13, true, "")
	if v := l.judge(job(1, 2), 0); len(v.overlaps) != 0 || len(v.unexplained) != 0 || v.explained != 1 {
		t.Errorf("two copies: overlaps %v, unexplained %v, explained %d", v.overlaps, v.unexplained, v.explained)
	}
	if v := l.judge(job(1), 0); len(v.overlaps) != 1 {
		t.Errorf("one copy run twice at once: overlaps %v", v.overlaps)
	}
}
