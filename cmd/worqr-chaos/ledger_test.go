package main

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The ledger's judgement on made-up reports: a checker that cannot fail
// proves nothing, so each violation it must catch is caught here, next to
// the look-alike it must let pass.

// start reports a run's start; its attempt counts the task's runs, and
// the wall clock reads t µs.
func start(l *ledger, inst, task, pid string, t int64) {
	l.apply(inst, report{Ev: "start", T: t, W: t, Q: "q", PID: pid, Task: task, Owner: inst + "-id", Attempt: len(l.byTask[task]) + 1})
}

func end(l *ledger, inst, pid string, t int64, ok bool, cause string) {
	l.apply(inst, report{Ev: "end", T: t, W: t, Q: "q", PID: pid, OK: ok, Cause: cause})
}

func settled(l *ledger, inst, pid, out string) {
	l.apply(inst, report{Ev: "settled", Q: "q", PID: pid, Cause: out})
}

// fence reports that the worker id start gives inst's runs fenced itself.
func fence(l *ledger, inst string, t int64, lost ...lostProc) {
	l.apply(inst, report{Ev: "fence", T: t, Owner: inst + "-id", Lost: lost})
}

func job(copies ...int64) map[string]*taskInfo {
	return map[string]*taskInfo{"job-1": {queue: "q", kind: "job", copies: copies}}
}

func conn() map[string]*taskInfo {
	return map[string]*taskInfo{"conn-0": {queue: "q", kind: "conn", copies: []int64{1}}}
}

const fencedCause = "process lost: worker fenced (lease lost)"

func TestPersistentHoldsThatOverlapAreCaught(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "conn-0", "1", 10)
	start(l, "w2.1", "conn-0", "2", 20) // w1.1 still holds it
	v := l.judge(conn(), nil, 0)
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
		v := l.judge(conn(), nil, 0)
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
		end(l, "w2.1", "2", 30, false, "worker shutting down")
		v := l.judge(conn(), nil, 0)
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
	end(l, "w1.1", "1", 15, false, "process lost")
	if v := l.judge(conn(), nil, 0); len(v.strangeEnds) != 1 {
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
			v := l.judge(job(tc.copies...), nil, 0)
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
	v := l.judge(job(1), nil, 0)
	if len(v.lost) != 1 || !strings.Contains(l.history("job-1", 0), "fenced@") {
		t.Errorf("lost = %v, history %s", v.lost, l.history("job-1", 0))
	}
	l = newLedger()
	if v := l.judge(job(1), nil, 0); len(v.lost) != 1 || v.tasks != 1 {
		t.Errorf("a job that never ran: lost = %v, tasks %d", v.lost, v.tasks)
	}
}

func TestHandlerThatNeverEndedIsReported(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "job-1", "1", 10)
	if v := l.judge(job(1), nil, 0); len(v.neverEnded) != 1 {
		t.Errorf("never ended = %v", v.neverEnded)
	}
	l.killed("w1.1", 11, 12)
	if v := l.judge(job(1), nil, 0); len(v.neverEnded) != 0 {
		t.Errorf("a killed process's handlers end with it: %v", v.neverEnded)
	}
}

func TestReportsThatMakeNoSenseAreProblems(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "job-1", "1", 10)
	start(l, "w2.1", "job-1", "1", 11)          // same process started twice
	end(l, "w3.1", "9", 12, true, "")           // unknown process
	l.apply("w1.1", report{Ev: "bogus", T: 13}) // unknown report
	if v := l.judge(job(1), nil, 0); len(v.problems) != 3 {
		t.Errorf("problems = %v", v.problems)
	}
}

func TestLatencyRunsFromFirstEnqueueToFirstCompletion(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "job-1", "1", 10)
	end(l, "w1.1", "1", 30, true, "")
	start(l, "w2.1", "job-1", "2", 12)
	end(l, "w2.1", "2", 25, true, "")
	v := l.judge(job(5, 8), nil, 0)
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
	if v := l.judge(job(1, 2), nil, 0); len(v.overlaps) != 0 || len(v.unexplained) != 0 || v.explained != 1 {
		t.Errorf("two copies: overlaps %v, unexplained %v, explained %d", v.overlaps, v.unexplained, v.explained)
	}
	if v := l.judge(job(1), nil, 0); len(v.overlaps) != 1 {
		t.Errorf("one copy run twice at once: overlaps %v", v.overlaps)
	}
}

// The lifecycle: plans, failures and their retries, dead letters, due
// times.

func TestPlanPayloadRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := make(map[string]bool)
	for i := range 2000 {
		p := randomPlan(rng)
		payload := p.payload(i)
		got, err := parsePlan(payload)
		if err != nil || got != p {
			t.Fatalf("%q parsed as %+v, %v; want %+v", payload, got, err, p)
		}
		seen[p.behave] = true
		if p.delay < 0 || p.delay > maxDelay || p.delay%time.Millisecond != 0 {
			t.Fatalf("%q: delay %v", payload, p.delay)
		}
	}
	if len(seen) != 6 {
		t.Errorf("behaviours drawn: %v", seen)
	}
	for _, bad := range []string{"conn-1", "job-1.f", "job-1.f0", "job-1.d0", "job-1.q"} {
		if _, err := parsePlan(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if n := failuresBefore(plannedFailure + "2"); n != 2 {
		t.Errorf("failuresBefore = %d", n)
	}
	if n := failuresBefore("task timed out"); n != 0 {
		t.Errorf("failuresBefore a timeout = %d", n)
	}
}

// planned is one job with a plan, enqueued once at 1 (the Redis clock
// then reads 1 µs) unless copies say otherwise.
func planned(payload string, copies ...int64) map[string]*taskInfo {
	p, err := parsePlan(payload)
	if err != nil {
		panic(err)
	}
	if len(copies) == 0 {
		copies = []int64{1}
	}
	return map[string]*taskInfo{payload: {queue: "q", kind: "job", plan: p, copies: copies, enqueuedUs: 1, redisBefore: 1}}
}

// failRun is a run that fails: it starts at t, ends at t+1 with failure
// class fail, and settles as out ("" for no settled report).
func failRun(l *ledger, inst, task, pid string, t int64, fail, out string) {
	start(l, inst, task, pid, t)
	l.apply(inst, report{Ev: "end", T: t + 1, W: t + 1, Q: "q", PID: pid, Cause: "planned failure", Fail: fail})
	if out != "" {
		settled(l, inst, pid, out)
	}
}

// okRun is a run that completes and is finished.
func okRun(l *ledger, inst, task, pid string, t int64) {
	start(l, inst, task, pid, t)
	end(l, inst, pid, t+1, true, "")
	settled(l, inst, pid, outFinished)
}

// gap is more than any retry's backoff, in µs (the wall clock of the
// test reports) and ns (their monotonic clock).
const gap = int64(time.Second / time.Microsecond)

func exhausted(attempts int) map[string][]deadLetter {
	return map[string][]deadLetter{"job-1.x": {{id: "1", reason: "exhausted", err: plannedFailure + "3", attempts: attempts}}}
}

func clean(t *testing.T, v verdict) {
	t.Helper()
	if len(v.lost)+len(v.unexplained)+len(v.overlaps)+len(v.early)+len(v.endings)+len(v.problems)+len(v.unsettled) > 0 {
		t.Errorf("lost %v, unexplained %v, overlaps %v, early %v, endings %v, problems %v, unsettled %v",
			v.lost, v.unexplained, v.overlaps, v.early, v.endings, v.problems, v.unsettled)
	}
}

func TestExhaustedTaskRetriedThenDead(t *testing.T) {
	l := newLedger()
	failRun(l, "w1.1", "job-1.x", "1", 10, failPlanned, outRetried)
	failRun(l, "w2.1", "job-1.x", "2", 10+gap, failPlanned, outRetried)
	failRun(l, "w1.1", "job-1.x", "3", 10+2*gap, failPlanned, outDead)
	v := l.judge(planned("job-1.x"), exhausted(3), 0)
	clean(t, v)
	if v.failedRuns != 3 || v.retried != 2 || v.duplicates != 0 || v.deadByReason["exhausted"] != 1 {
		t.Errorf("failed %d, retried %d, duplicates %d, dead %v", v.failedRuns, v.retried, v.duplicates, v.deadByReason)
	}
	// A reclaim in between does not use the budget up, and is a release.
	l = newLedger()
	failRun(l, "w1.1", "job-1.x", "1", 10, failPlanned, outRetried)
	start(l, "w2.1", "job-1.x", "2", 10+gap)
	l.killed("w2.1", 20+gap, 30+gap)
	failRun(l, "w1.1", "job-1.x", "3", 10+2*gap, failPlanned, outRetried)
	failRun(l, "w1.1", "job-1.x", "4", 10+3*gap, failPlanned, outDead)
	v = l.judge(planned("job-1.x"), exhausted(4), 0)
	clean(t, v)
	if v.duplicates != 1 || v.explained != 1 {
		t.Errorf("duplicates %d, explained %d; want the reclaim's run", v.duplicates, v.explained)
	}
}

func TestMoreFailuresThanPlannedAreCaught(t *testing.T) {
	l := newLedger()
	for i := range 4 {
		out := outRetried
		if i == 3 {
			out = outDead
		}
		failRun(l, "w1.1", "job-1.x", string(rune('1'+i)), 10+int64(i)*gap, failPlanned, out)
	}
	if v := l.judge(planned("job-1.x"), exhausted(4), 0); len(v.endings) != 1 || !strings.Contains(v.endings[0], "4 failed attempts") {
		t.Errorf("endings %v", v.endings)
	}
	// A task planned to fail once that fails twice.
	l = newLedger()
	failRun(l, "w1.1", "job-1.f1", "1", 10, failPlanned, outRetried)
	failRun(l, "w1.1", "job-1.f1", "2", 10+gap, failPlanned, outRetried)
	okRun(l, "w1.1", "job-1.f1", "3", 10+2*gap)
	if v := l.judge(planned("job-1.f1"), nil, 0); len(v.endings) != 1 {
		t.Errorf("endings %v", v.endings)
	}
}

func TestRetryBeforeItsBackoffIsEarly(t *testing.T) {
	backoff := retryBackoff(1, nil).Microseconds()
	for _, tc := range []struct {
		after int64 // µs after the failed run's end
		early int
	}{{after: backoff, early: 0}, {after: backoff - 1000, early: 0}, {after: backoff - 3000, early: 1}, {after: 0, early: 1}} {
		l := newLedger()
		failRun(l, "w1.1", "job-1.f1", "1", 10, failPlanned, outRetried) // ends at 11
		okRun(l, "w2.1", "job-1.f1", "2", 11+tc.after)
		v := l.judge(planned("job-1.f1"), nil, 0)
		if len(v.early) != tc.early || len(v.unexplained) != 0 {
			t.Errorf("retry %d µs after the failure: early %v, unexplained %v", tc.after, v.early, v.unexplained)
		}
	}
}

func TestDelayedStartBeforeItsDueTimeIsEarly(t *testing.T) {
	const due = 1 + 100_000 // enqueued at 1 µs, delayed 100 ms
	for _, tc := range []struct {
		start  int64
		copies []int64
		early  int
	}{
		{start: due, early: 0},
		{start: due - 1500, early: 0}, // within the tolerance
		{start: due - 2500, early: 1},
		{start: 50_000, early: 1},
	} {
		l := newLedger()
		okRun(l, "w1.1", "job-1.d100", "1", tc.start)
		if v := l.judge(planned("job-1.d100"), nil, 0); len(v.early) != tc.early || v.delayed != 1 {
			t.Errorf("start at %d: early %v, delayed %d", tc.start, v.early, v.delayed)
		}
	}
	// With two copies the TIME read before the first attempt counts, not
	// the id.
	tasks := planned("job-1.d100", 1, 2)
	tasks["job-1.d100"].enqueuedUs = 50_000
	l := newLedger()
	okRun(l, "w1.1", "job-1.d100", "1", due)
	if v := l.judge(tasks, nil, 0); len(v.early) != 0 {
		t.Errorf("two copies: early %v", v.early)
	}
}

func TestDeadLettersMustMatchThePlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload string
		dl      deadLetter
		bad     bool
	}{
		{"permanent", "job-1.p", deadLetter{reason: "permanent", err: plannedPermanent, attempts: 1}, false},
		{"permanent as exhausted", "job-1.p", deadLetter{reason: "exhausted", err: plannedPermanent, attempts: 1}, true},
		{"exhausted too soon", "job-1.x", deadLetter{reason: "exhausted", err: plannedFailure + "2", attempts: 1}, true},
		{"timeouts", "job-1.T", deadLetter{reason: "timeout", err: "task timed out: context deadline exceeded", attempts: 1}, false},
		{"ordinary job dead", "job-1", deadLetter{reason: "permanent", err: "x", attempts: 1}, true},
		{"too few attempts", "job-1.p", deadLetter{reason: "permanent", err: plannedPermanent, attempts: 0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			fail := failPlanned
			switch tc.payload {
			case "job-1.p":
				fail = failPermanent
			case "job-1.T":
				fail = failTimeout
			}
			start(l, "w1.1", tc.payload, "1", 10)
			if tc.payload == "job-1" {
				end(l, "w1.1", "1", 11, false, "worker fenced") // a fault ended it: no failure
			} else {
				l.apply("w1.1", report{Ev: "end", T: 10 + int64(jobTimeout), W: 11, Q: "q", PID: "1", Cause: "x", Fail: fail})
			}
			settled(l, "w1.1", "1", outDead)
			v := l.judge(planned(tc.payload), map[string][]deadLetter{tc.payload: {tc.dl}}, 0)
			if got := len(v.endings) > 0; got != tc.bad {
				t.Errorf("endings %v", v.endings)
			}
			if len(v.lost) != 0 {
				t.Errorf("lost %v", v.lost)
			}
		})
	}
}

func TestEndingsThatContradictThePlan(t *testing.T) {
	// Finished, and dead too.
	l := newLedger()
	okRun(l, "w1.1", "job-1", "1", 10)
	dead := map[string][]deadLetter{"job-1": {{reason: "poison", err: "x", attempts: 5}}}
	if v := l.judge(planned("job-1"), dead, 0); !strings.Contains(strings.Join(v.endings, "\n"), "finished, and dead-lettered") {
		t.Errorf("finished and dead: endings %v", v.endings)
	}
	// Planned to die, yet completed.
	l = newLedger()
	okRun(l, "w1.1", "job-1.p", "1", 10)
	if v := l.judge(planned("job-1.p"), nil, 0); len(v.endings) != 1 {
		t.Errorf("completed a permanent failure: endings %v", v.endings)
	}
	// Failed for good, yet not among the dead letters: lost.
	l = newLedger()
	failRun(l, "w1.1", "job-1.p", "1", 10, failPermanent, outDead)
	if v := l.judge(planned("job-1.p"), nil, 0); len(v.lost) != 1 {
		t.Errorf("lost %v", v.lost)
	}
	// Dead twice though enqueued once; and a dead letter no one enqueued.
	l = newLedger()
	failRun(l, "w1.1", "job-1.p", "1", 10, failPermanent, outDead)
	dl := deadLetter{reason: "permanent", err: plannedPermanent, attempts: 1}
	dead = map[string][]deadLetter{"job-1.p": {dl, dl}, "job-9": {dl}}
	if v := l.judge(planned("job-1.p"), dead, 0); len(v.endings) != 2 {
		t.Errorf("endings %v", v.endings)
	}
	// A persistent task must never die.
	l = newLedger()
	start(l, "w1.1", "conn-0", "1", 10)
	if v := l.judge(conn(), map[string][]deadLetter{"conn-0": {{reason: "poison"}}}, 0); len(v.endings) != 1 {
		t.Errorf("dead persistent task: endings %v", v.endings)
	}
}

func TestPoisonVerdictNeedsHoldersThatDiedSoonAfterStarting(t *testing.T) {
	second := int64(time.Second)
	for _, tc := range []struct {
		name   string
		deaths []int64 // how long after its start each holder died
		ok     bool
	}{
		{"three quick deaths", []int64{second / 10, second, 3 * second}, true},
		{"two", []int64{second / 10, second}, false},
		{"one too late", []int64{second / 10, second, 5 * second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			at := int64(10)
			for i, d := range tc.deaths {
				inst := "w" + string(rune('1'+i)) + ".1"
				pid := string(rune('1' + i))
				start(l, inst, "job-1", pid, at)
				if i%2 == 0 {
					l.killed(inst, at+d, at+d+1)
				} else {
					fence(l, inst, at+d, lostProc{Q: "q", PID: pid, Task: "job-1"})
					end(l, inst, pid, at+d+1, false, fencedCause)
				}
				at += d + 10*second
			}
			dead := map[string][]deadLetter{"job-1": {{reason: "poison", err: "its holder died soon after starting it, 3 times", attempts: 3}}}
			v := l.judge(planned("job-1"), dead, 0)
			if got := len(v.endings) == 0 && v.poisonExplained == 1; got != tc.ok {
				t.Errorf("endings %v, explained %d", v.endings, v.poisonExplained)
			}
			if len(v.lost) != 0 || len(v.unexplained) != 0 {
				t.Errorf("lost %v, unexplained %v", v.lost, v.unexplained)
			}
		})
	}
}

func TestFailedRunReleasesItsTaskWhateverTheWorkerHeard(t *testing.T) {
	for _, tc := range []struct {
		name      string
		between   func(l *ledger) // after run 1 failed at 10..11
		ambiguous int
	}{
		// The retry went through but its reply was lost: sent again, it
		// found the process gone.
		{"settled lost", func(l *ledger) { settled(l, "w1.1", "1", outLost) }, 1},
		// Killed after the retry went through, before saying so: the
		// retry may start before the kill.
		{"killed late", func(l *ledger) { l.killed("w1.1", 30+gap, 31+gap) }, 0},
		// Fenced with the retry in flight.
		{"fenced late", func(l *ledger) {
			fence(l, "w1.1", 30+gap, lostProc{Q: "q", PID: "1", Task: "job-1.f1"})
			settled(l, "w1.1", "1", outLost)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			failRun(l, "w1.1", "job-1.f1", "1", 10, failPlanned, "")
			tc.between(l)
			okRun(l, "w2.1", "job-1.f1", "2", 10+gap)
			v := l.judge(planned("job-1.f1"), nil, 0)
			clean(t, v)
			if v.ambiguous != tc.ambiguous || v.duplicates != 0 {
				t.Errorf("ambiguous %d, duplicates %d", v.ambiguous, v.duplicates)
			}
		})
	}
	// A run that the worker reported dead-lettered releases nothing.
	l := newLedger()
	failRun(l, "w1.1", "job-1.p", "1", 10, failPermanent, outDead)
	okRun(l, "w2.1", "job-1.p", "2", 10+gap)
	if v := l.judge(planned("job-1.p"), nil, 0); len(v.unexplained) != 1 {
		t.Errorf("a dead task ran again: unexplained %v", v.unexplained)
	}
}

func TestTimeoutsMustTakeTheirTime(t *testing.T) {
	for _, tc := range []struct {
		took  time.Duration
		early bool
	}{{jobTimeout, false}, {jobTimeout - timeoutSlack/2, false}, {jobTimeout / 2, true}} {
		l := newLedger()
		start(l, "w1.1", "job-1.t", "1", 10)
		l.apply("w1.1", report{Ev: "end", T: 10 + int64(tc.took), W: 11, Q: "q", PID: "1", Cause: "task timed out", Fail: failTimeout})
		settled(l, "w1.1", "1", outRetried)
		okRun(l, "w1.1", "job-1.t", "2", 10+int64(tc.took)+gap)
		v := l.judge(planned("job-1.t"), nil, 0)
		if got := len(v.endings) > 0; got != tc.early || v.timeouts != 1 || v.unplanned != 0 {
			t.Errorf("took %v: endings %v, timeouts %d, unplanned %d", tc.took, v.endings, v.timeouts, v.unplanned)
		}
	}
	// An ordinary job that timed out is unplanned, not a violation.
	l := newLedger()
	start(l, "w1.1", "job-1", "1", 10)
	l.apply("w1.1", report{Ev: "end", T: 10 + int64(jobTimeout), W: 11, Q: "q", PID: "1", Cause: "task timed out", Fail: failTimeout})
	settled(l, "w1.1", "1", outRetried)
	okRun(l, "w1.1", "job-1", "2", 10+int64(jobTimeout)+gap)
	v := l.judge(planned("job-1"), nil, 0)
	clean(t, v)
	if v.unplanned != 1 {
		t.Errorf("unplanned %d", v.unplanned)
	}
}

func TestAttemptsMustCountUp(t *testing.T) {
	l := newLedger()
	l.apply("w1.1", report{Ev: "start", T: 10, W: 10, Q: "q", PID: "1", Task: "job-1", Attempt: 2})
	l.killed("w1.1", 11, 12)
	l.apply("w2.1", report{Ev: "start", T: 20, W: 20, Q: "q", PID: "2", Task: "job-1", Attempt: 2})
	end(l, "w2.1", "2", 21, true, "")
	settled(l, "w2.1", "2", outFinished)
	if v := l.judge(planned("job-1"), nil, 0); len(v.endings) != 1 {
		t.Errorf("endings %v", v.endings)
	}
}

func TestSettledOutcomesAreKnown(t *testing.T) {
	l := newLedger()
	start(l, "w1.1", "job-1", "1", 10)
	settled(l, "w1.1", "1", "unobserved")
	if v := l.judge(planned("job-1"), nil, 0); len(v.problems) != 1 {
		t.Errorf("problems %v", v.problems)
	}
}

func TestOutcomeNeverWrittenIsCaught(t *testing.T) {
	second := int64(time.Second)
	for _, tc := range []struct {
		name      string
		after     func(l *ledger) // the run ended at 11
		unsettled int
	}{
		{"settled at once", func(l *ledger) {
			l.apply("w1.1", report{Ev: "settled", T: 12, Q: "q", PID: "1", Cause: outFinished})
		}, 0},
		// The write failed for good (say, on a LOADING reply) and the
		// process stayed held until the worker shut down.
		{"settled only at shutdown", func(l *ledger) {
			l.apply("w1.1", report{Ev: "settled", T: 11 + 20*second, Q: "q", PID: "1", Cause: outLost})
		}, 1},
		{"never settled", func(l *ledger) {}, 1},
		{"killed before settling", func(l *ledger) { l.killed("w1.1", 11+second, 12+second) }, 0},
		{"killed long after", func(l *ledger) { l.killed("w1.1", 11+20*second, 12+20*second) }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			start(l, "w1.1", "job-1", "1", 10)
			end(l, "w1.1", "1", 11, true, "")
			tc.after(l)
			if v := l.judge(planned("job-1"), nil, 0); len(v.unsettled) != tc.unsettled {
				t.Errorf("unsettled %v", v.unsettled)
			}
		})
	}
}

// Freezes: a worker process stopped by SIGSTOP past its TTL, then SIGCONT.
// Times in these tests are whole microseconds on the monotonic clock, and
// the wall clock reads the same in µs, so that a process id (the Redis
// clock in µs at the dequeue) dates a run on both.

const ms = int64(time.Millisecond)

// startAt reports the start of a run dequeued at dequeued, its start
// reported at reported, and returns its process id.
func startAt(l *ledger, inst, task string, dequeued, reported int64) string {
	pid := strconv.FormatInt(dequeued/1000, 16)
	l.apply(inst, report{Ev: "start", T: reported, W: reported / 1000, Q: "q", PID: pid, Task: task,
		Owner: inst + "-id", Attempt: len(l.byTask[task]) + 1})
	return pid
}

// freezeAt freezes inst from at (seen stopped 1 ms later) until cont.
func freezeAt(l *ledger, inst string, at, cont int64) {
	l.froze(inst, at, at+ms)
	l.thawed(inst, cont)
}

func endAt(l *ledger, inst, pid string, t int64, cause, fail string) {
	l.apply(inst, report{Ev: "end", T: t, W: t / 1000, Q: "q", PID: pid, Cause: cause, Fail: fail})
}

func TestFrozenHolderMayRunOnBrieflyAfterSIGCONT(t *testing.T) {
	const frozeAt, cont = 1000 * ms, 5000 * ms
	for _, tc := range []struct {
		name        string
		fenced, end int64 // after SIGCONT
		overlaps    int
		unexplained int
	}{
		{name: "fenced and ended at once", fenced: 2 * ms, end: 3 * ms},
		// Its handler ran on while the peer held the task.
		{name: "ended late", fenced: 2 * ms, end: thawGrace.Nanoseconds() + 100*ms, overlaps: 1},
		// Not fenced on waking: the peer took a task whose holder's lease
		// never ran out.
		{name: "fenced late", fenced: thawGrace.Nanoseconds() + 100*ms, end: thawGrace.Nanoseconds() + 101*ms, overlaps: 1, unexplained: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			pid := startAt(l, "w1.1", "conn-0", 10*ms, 10*ms)
			freezeAt(l, "w1.1", frozeAt, cont)
			peer := startAt(l, "w2.1", "conn-0", 3500*ms, 3500*ms) // the lease ran out meanwhile
			fence(l, "w1.1", cont+tc.fenced, lostProc{Q: "q", PID: pid, Task: "conn-0"})
			endAt(l, "w1.1", pid, cont+tc.end, fencedCause, "")
			endAt(l, "w2.1", peer, 9000*ms, "worqr: worker shutting down", "")
			v := l.judge(conn(), nil, 0)
			if len(v.overlaps) != tc.overlaps || len(v.unexplained) != tc.unexplained {
				t.Errorf("overlaps %v, unexplained %v; want %d, %d", v.overlaps, v.unexplained, tc.overlaps, tc.unexplained)
			}
			if len(v.strangeEnds) != 0 || len(v.problems) != 0 {
				t.Errorf("strange ends %v, problems %v", v.strangeEnds, v.problems)
			}
			if v.thawEnds != 1 || v.maxThawEnd != time.Duration(tc.end) {
				t.Errorf("woken handlers %d, ended %v after SIGCONT", v.thawEnds, v.maxThawEnd)
			}
			if tc.overlaps == 0 && v.maxRehold != 2500*time.Millisecond-time.Millisecond {
				t.Errorf("re-held %v after the process stopped", v.maxRehold)
			}
		})
	}
	// A freeze excuses nothing before the process stopped.
	l := newLedger()
	startAt(l, "w1.1", "conn-0", 10*ms, 10*ms)
	startAt(l, "w2.1", "conn-0", 500*ms, 500*ms)
	freezeAt(l, "w1.1", frozeAt, cont)
	if v := l.judge(conn(), nil, 0); len(v.overlaps) != 1 {
		t.Errorf("held twice before the freeze: overlaps %v", v.overlaps)
	}
}

func TestFrozenHolderReleasedItsJobAtTheFreeze(t *testing.T) {
	const frozeAt, cont = 1000 * ms, 5000 * ms
	for _, tc := range []struct {
		name string
		// when the frozen run was dequeued and reported its start
		dequeued, reported int64
	}{
		{name: "started before the freeze", dequeued: 900 * ms, reported: 901 * ms},
		// Dequeued just before the SIGSTOP, its handler reported on waking.
		{name: "start reported on waking", dequeued: 999 * ms, reported: cont + ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			// Timed out on waking, its failure never written: its
			// worker was fenced.
			pid := startAt(l, "w1.1", "job-1.t", tc.dequeued, tc.reported)
			freezeAt(l, "w1.1", frozeAt, cont)
			fence(l, "w1.1", cont+2*ms, lostProc{Q: "q", PID: pid, Task: "job-1.t"})
			endAt(l, "w1.1", pid, cont+3*ms, "worqr: task timed out", failTimeout)
			settled(l, "w1.1", pid, outLost)
			// A peer reclaimed it during the freeze: it timed out, and the
			// retry finished it.
			peer := startAt(l, "w2.1", "job-1.t", 3500*ms, 3500*ms)
			endAt(l, "w2.1", peer, 3500*ms+jobTimeout.Nanoseconds(), "worqr: task timed out", failTimeout)
			settled(l, "w2.1", peer, outRetried)
			retry := startAt(l, "w2.1", "job-1.t", 5000*ms, 5000*ms)
			l.apply("w2.1", report{Ev: "end", T: 5001 * ms, W: 5001 * ms / 1000, Q: "q", PID: retry, OK: true})
			settled(l, "w2.1", retry, outFinished)

			tasks := planned("job-1.t")
			tasks["job-1.t"].enqueuedUs = 0
			v := l.judge(tasks, nil, 0)
			clean(t, v)
			if v.duplicates != 1 || v.explained != 1 {
				t.Errorf("duplicates %d, explained %d; want the reclaim's run explained", v.duplicates, v.explained)
			}
		})
	}
	// The look-alike: no freeze, and the worker reported its fence only
	// after the peer took the task.
	l := newLedger()
	pid := startAt(l, "w1.1", "job-1", 900*ms, 901*ms)
	peer := startAt(l, "w2.1", "job-1", 3500*ms, 3500*ms)
	fence(l, "w1.1", cont+2*ms, lostProc{Q: "q", PID: pid, Task: "job-1"})
	endAt(l, "w1.1", pid, cont+3*ms, fencedCause, "")
	l.apply("w2.1", report{Ev: "end", T: 3501 * ms, W: 3501 * ms / 1000, Q: "q", PID: peer, OK: true})
	settled(l, "w2.1", peer, outFinished)
	if v := l.judge(planned("job-1"), nil, 0); len(v.unexplained) != 1 || len(v.overlaps) != 1 {
		t.Errorf("re-run before its holder let go: unexplained %v, overlaps %v", v.unexplained, v.overlaps)
	}
}

func TestFrozenHoldersCountForThePoisonVerdict(t *testing.T) {
	l := newLedger()
	at := int64(10 * ms)
	for i := range 3 {
		inst := "w" + strconv.Itoa(i+1) + ".1"
		pid := startAt(l, inst, "job-1", at, at)
		freezeAt(l, inst, at+500*ms, at+4500*ms) // its lease ran out during the freeze
		fence(l, inst, at+4502*ms, lostProc{Q: "q", PID: pid, Task: "job-1"})
		endAt(l, inst, pid, at+4503*ms, fencedCause, "")
		at += 3000 * ms // the next holder took it while this one was frozen
	}
	dead := map[string][]deadLetter{"job-1": {{reason: "poison", err: "its holder died soon after starting it, 3 times", attempts: 3}}}
	tasks := planned("job-1")
	v := l.judge(tasks, dead, 0)
	if len(v.endings) != 0 || v.poisonExplained != 1 || len(v.unexplained) != 0 {
		t.Errorf("endings %v, explained %d, unexplained %v", v.endings, v.poisonExplained, v.unexplained)
	}
}

func TestPersistentTaskMustBeInItsQueueAtTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name          string
		atEnd         int
		dead          bool
		lost, endings int
	}{
		{name: "waiting", atEnd: 1},
		{name: "missing", atEnd: 0, lost: 1},
		{name: "dead-lettered", atEnd: 0, dead: true, endings: 1},
		{name: "twice", atEnd: 2, endings: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			start(l, "w1.1", "conn-0", "1", 10)
			end(l, "w1.1", "1", 20, false, "worqr: worker shutting down")
			tasks := conn()
			tasks["conn-0"].atEnd, tasks["conn-0"].checkedAtEnd = tc.atEnd, true
			var dead map[string][]deadLetter
			if tc.dead {
				dead = map[string][]deadLetter{"conn-0": {{reason: "poison"}}}
			}
			v := l.judge(tasks, dead, 0)
			if len(v.lost) != tc.lost || len(v.endings) != tc.endings {
				t.Errorf("lost %v, endings %v; want %d, %d", v.lost, v.endings, tc.lost, tc.endings)
			}
			if tc.dead != (v.persistentDead == 1) {
				t.Errorf("persistent dead letters counted: %d", v.persistentDead)
			}
		})
	}
}

// A run on a worker just thawed begins when its process id says it was
// dequeued, on another clock than the enqueue attempt's start: a task
// handed over by its enqueue may seem to start a millisecond before the
// attempt did, which is no run without a copy; one that seems to start
// well before any attempt is.
func TestRunMaySeemToBeginJustBeforeItsEnqueue(t *testing.T) {
	const frozeAt, cont = 1000 * ms, 5000 * ms
	for _, tc := range []struct {
		name        string
		copyAt      int64
		unexplained int
	}{
		{name: "a millisecond before", copyAt: cont + 2*ms},
		{name: "50 ms before", copyAt: cont + 51*ms, unexplained: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			freezeAt(l, "w1.1", frozeAt, cont)
			pid := startAt(l, "w1.1", "job-1", cont+ms, cont+60*ms)
			l.apply("w1.1", report{Ev: "end", T: cont + 61*ms, W: (cont + 61*ms) / 1000, Q: "q", PID: pid, OK: true})
			settled(l, "w1.1", pid, outFinished)
			v := l.judge(planned("job-1", tc.copyAt), nil, 0)
			if len(v.unexplained) != tc.unexplained {
				t.Errorf("unexplained %v; want %d", v.unexplained, tc.unexplained)
			}
		})
	}
}
