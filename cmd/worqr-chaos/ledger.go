package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/worqr/worqr"
)

// now reads CLOCK_MONOTONIC, in nanoseconds: one clock shared by every
// process on the machine that no wall-clock step moves, so the harness can
// order the worker processes' reports and its own kills on one time line.
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // cannot happen on Linux
	}
	return ts.Nano()
}

// report is one line a worker process writes on its standard output.
type report struct {
	Ev string `json:"ev"` // ready, start, end, settled, fence, exit
	T  int64  `json:"t"`  // now() when it happened
	// W is the wall clock when it happened, Unix µs: the clock Redis
	// reads (TIME), for the workers run on Redis's host.
	W       int64      `json:"w,omitempty"`
	Q       string     `json:"q,omitempty"`       // queue
	PID     string     `json:"pid,omitempty"`     // process id (unique per queue, ever)
	Task    string     `json:"task,omitempty"`    // payload
	Owner   string     `json:"owner,omitempty"`   // worker id
	Attempt int        `json:"attempt,omitempty"` // start: Process.Attempt
	OK      bool       `json:"ok,omitempty"`      // end: the handler did its work
	Cause   string     `json:"cause,omitempty"`   // end: the handler's error; settled: outcome
	Fail    string     `json:"fail,omitempty"`    // end: failPlanned, failPermanent, failTimeout, or "" (none, or its context ended)
	Lost    []lostProc `json:"lost,omitempty"`    // fence: the processes it held
}

type lostProc struct {
	Q    string `json:"q"`
	PID  string `json:"pid"`
	Task string `json:"task"`
}

// Outcomes in settled reports: the process was finished in Redis, its
// task retried or dead-lettered, or the process lost (fenced, given back
// at shutdown, or an outcome written twice after a lost reply), cancelled
// or deleted.
const (
	outFinished = "finished"
	outRetried  = "retried"
	outDead     = "dead"
	outLost     = "lost"
)

// runKey names one run of a handler: process ids are unique per queue.
type runKey struct{ q, pid string }

// run is one handler run, from its worker's reports.
type run struct {
	inst    string // worker process, e.g. w2.3
	q, pid  string
	task    string
	owner   string // worker id that dequeued it
	attempt int    // Process.Attempt
	start   int64
	end     int64 // 0 while no end report came
	// wStart and wEnd are start and end by the wall clock (Unix µs).
	wStart, wEnd int64
	ok           bool // the handler did its work (an ordinary task completed)
	cause        string
	fail         string // the handler failed: failPlanned, failPermanent, failTimeout
	settled      string // outcome once the process ended, "" before
	settledAt    int64  // when the settled report came, 0 before
}

// failed reports whether the handler returned a failure of its own (not
// the cause of a context a fault ended): the runtime then retries the
// task after a backoff or dead-letters it.
func (ru *run) failed() bool { return ru.end != 0 && !ru.ok && ru.fail != "" }

// inst is one worker process as the ledger knows it.
type inst struct {
	name     string
	ready    bool
	killSent int64 // when SIGKILL was sent, 0 unless killed
	killDone int64 // when the process was reaped: its holds end here
	exited   bool  // it said goodbye after a graceful shutdown
	fences   int
}

// ledger collects every worker process's reports and the harness's kills,
// and judges them.
type ledger struct {
	mu       sync.Mutex
	runs     map[runKey]*run
	byTask   map[string][]*run
	fencedAt map[runKey]int64 // run -> when its worker reported the fence
	insts    map[string]*inst
	fences   int
	problems []string // reports that make no sense: a harness or worker bug
	// ttl is the workers' lease TTL: the poison-pill guard's window is
	// twice that.
	ttl time.Duration
}

func newLedger() *ledger {
	return &ledger{
		runs:     make(map[runKey]*run),
		byTask:   make(map[string][]*run),
		fencedAt: make(map[runKey]int64),
		insts:    make(map[string]*inst),
		ttl:      2 * time.Second,
	}
}

func (l *ledger) instLocked(name string) *inst {
	in := l.insts[name]
	if in == nil {
		in = &inst{name: name}
		l.insts[name] = in
	}
	return in
}

func (l *ledger) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

// apply records one report of worker process name.
func (l *ledger) apply(name string, r report) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := l.instLocked(name)
	key := runKey{r.Q, r.PID}
	switch r.Ev {
	case "ready":
		in.ready = true
	case "start":
		if l.runs[key] != nil {
			l.problems = append(l.problems, fmt.Sprintf("%s: process %s/%s started twice", name, r.Q, r.PID))
			return
		}
		ru := &run{inst: name, q: r.Q, pid: r.PID, task: r.Task, owner: r.Owner, attempt: r.Attempt, start: r.T, wStart: r.W}
		l.runs[key] = ru
		l.byTask[r.Task] = append(l.byTask[r.Task], ru)
	case "end", "settled":
		ru := l.runs[key]
		if ru == nil || ru.inst != name {
			l.problems = append(l.problems, fmt.Sprintf("%s: %s for unknown process %s/%s", name, r.Ev, r.Q, r.PID))
			return
		}
		if r.Ev == "end" {
			ru.end, ru.wEnd, ru.ok, ru.cause, ru.fail = r.T, r.W, r.OK, r.Cause, r.Fail
			break
		}
		switch r.Cause {
		case outFinished, outRetried, outDead, outLost, "cancelled", "deleted":
			ru.settled, ru.settledAt = r.Cause, r.T
		default:
			l.problems = append(l.problems, fmt.Sprintf("%s: process %s/%s settled %q", name, r.Q, r.PID, r.Cause))
		}
	case "fence":
		l.fences++
		in.fences++
		for _, p := range r.Lost {
			l.fencedAt[runKey{p.Q, p.PID}] = r.T
		}
	case "exit":
		in.exited = true
	default:
		l.problems = append(l.problems, fmt.Sprintf("%s: unknown report %q", name, r.Ev))
	}
}

// killed records that worker process name was sent SIGKILL at sent and
// reaped at done: every handler it ran has stopped by done.
func (l *ledger) killed(name string, sent, done int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := l.instLocked(name)
	in.killSent, in.killDone = sent, done
}

func (l *ledger) isReady(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := l.insts[name]
	return in != nil && in.ready
}

// openLocked reports whether a run's handler may still be running.
func (l *ledger) openLocked(ru *run) bool {
	return ru.end == 0 && l.insts[ru.inst].killDone == 0
}

// holding counts, per worker process and queue, the handlers running now.
func (l *ledger) holding() map[string]map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]map[string]int)
	for _, ru := range l.runs {
		if !l.openLocked(ru) {
			continue
		}
		if out[ru.inst] == nil {
			out[ru.inst] = make(map[string]int)
		}
		out[ru.inst][ru.q]++
	}
	return out
}

// openRuns counts the running handlers of each task.
func (l *ledger) openRuns(tasks []string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(tasks))
	for _, t := range tasks {
		for _, ru := range l.byTask[t] {
			if l.openLocked(ru) {
				out[t]++
			}
		}
	}
	return out
}

// undone lists the tasks that neither had a handler complete its work nor
// were dead-lettered by one, and counts handlers still running for any of
// the tasks. (A poison verdict dead-letters a task no handler settled: the
// checker looks for those in the dead letters.)
func (l *ledger) undone(tasks []string) (missing []string, running int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range tasks {
		done := false
		for _, ru := range l.byTask[t] {
			done = done || ru.ok || ru.settled == outDead
			if l.openLocked(ru) {
				running++
			}
		}
		if !done {
			missing = append(missing, t)
		}
	}
	return missing, running
}

// history describes a task's runs, for messages, with times from t0.
func (l *ledger) history(task string, t0 int64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.historyLocked(task, t0)
}

func (l *ledger) historyLocked(task string, t0 int64) string {
	var parts []string
	for _, ru := range l.byTask[task] {
		in := l.insts[ru.inst]
		s := fmt.Sprintf("%s pid %s owner %.8s attempt %d %s..%s ok=%v cause=%q settled=%q", ru.inst, ru.pid, ru.owner,
			ru.attempt, rel(ru.start, t0), rel(ru.end, t0), ru.ok, ru.cause, ru.settled)
		if ru.fail != "" {
			s += " fail=" + ru.fail
		}
		if at, ok := l.fencedAt[runKey{ru.q, ru.pid}]; ok {
			s += " fenced@" + rel(at, t0)
		}
		if in.killSent != 0 {
			s += " inst-killed@" + rel(in.killSent, t0)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "never ran"
	}
	return strings.Join(parts, "; ")
}

func rel(t, t0 int64) string {
	if t == 0 {
		return "-"
	}
	return time.Duration(t - t0).Round(time.Millisecond).String()
}

// taskInfo is what the harness knows of a task it enqueued.
type taskInfo struct {
	queue string
	// copies are the times of each enqueue attempt that may have queued
	// the task: the one that succeeded, and any whose outcome was unknown
	// (a retry after those may queue it twice, as documented).
	copies []int64
	kind   string // job, conn or probe
	// plan is a job's plan, read from its payload (see plan.go).
	plan plan
	// enqueuedUs is the Redis clock (Unix µs) at the enqueue that
	// succeeded, read from the task id it returned; 0 if unknown.
	enqueuedUs int64
	// redisBefore is the Redis clock (Unix µs, TIME) read before the
	// first enqueue attempt of a delayed task: no copy was enqueued
	// earlier.
	redisBefore int64
}

// dueUs is when a delayed task may start at the earliest, by the Redis
// clock (Unix µs), or 0 if it is not delayed: its enqueue time plus its
// delay. With one copy the enqueue time is read from the task's id; when
// an enqueue was retried after an unknown outcome, a copy may have been
// queued by an earlier attempt, and the TIME read before the first
// attempt bounds them all.
func (info *taskInfo) dueUs() int64 {
	if info.plan.delay == 0 {
		return 0
	}
	at := info.redisBefore
	if len(info.copies) == 1 && info.enqueuedUs != 0 {
		at = info.enqueuedUs
	}
	return at + info.plan.delay.Microseconds()
}

// deadLetter is a dead letter as the checker read it from Redis.
type deadLetter struct {
	id       string
	kind     string
	err      string // the error recorded with it
	attempts int    // the task's starts
}

// earlyTolerance is how much earlier than its due time a handler may
// report its start, by the wall clock, without counting as early. The
// worker processes run on Redis's host and read the clock that Redis's
// TIME reads, so no offset between clocks enters. What remains is that
// Redis keeps due times in whole milliseconds: a delayed task is due at
// its enqueue's millisecond, rounded down, plus the delay, and a retried
// one at its retry's millisecond, rounded down, plus the backoff; and a
// task id, from which the enqueue time is read, may be bumped a few µs
// past the clock to stay unique. Either makes a start on time look up to
// 1 ms early. 2 ms covers both, and is far below the backoffs (20 ms and
// more) and most delays, so a start that ignored them is still caught.
const earlyTolerance = 2 * time.Millisecond

// timeoutSlack is how much shorter than jobTimeout a run that timed out
// may look: the timeout's clock starts before the handler reports its
// start, and a report can wait for the reporter's lock.
const timeoutSlack = 100 * time.Millisecond

// settleWithin is the longest a job's process may stay unsettled after
// its handler returned, while its worker lives: the runtime writes the
// outcome at once and retries while Redis is away (here for at most 2.4 s
// plus loading, or a 3.2 s pause), and a worker that cannot renew its
// lease for a TTL fences itself, which settles the process as lost. A
// process still unsettled after that is held in Redis by a live worker
// that will neither finish it nor let peers reclaim it.
const settleWithin = 15 * time.Second

// poisonSlack widens the poison-pill guard's window (twice the TTL from
// the start to the reclaim) for the check that a poison verdict had as
// many holders die soon after starting the task: the ledger times a death
// at the kill or the fence report, which come before the reclaim, but a
// stalled worker can report its fence a little late.
const poisonSlack = 500 * time.Millisecond

// verdict is what the ledger shows.
type verdict struct {
	tasks, runs int
	// For ordinary tasks: lost ones, runs beyond the first that no
	// planned failure explains, and how many of those a release (a
	// holder killed or fenced before finishing), or an enqueue retried
	// after an unknown outcome, explains.
	lost                  []string
	duplicates, explained int
	byRelease, byRetry    int
	unexplained           []string
	// Persistent tasks: hand-overs from one holder to the next, those
	// without a release before them, and the longest time a task was
	// held by nobody between two holders.
	handovers int
	maxRehold time.Duration
	// latencies are, for ordinary tasks that completed (neither delayed
	// nor planned to fail), the times from the first enqueue attempt to
	// the first completed run, sorted.
	latencies   []time.Duration
	overlaps    []string // a task run by two handlers at once
	strangeEnds []string // persistent holds that ended for no fault
	neverEnded  []string // handlers with no end report whose process was not killed
	fences      int
	problems    []string
	// The lifecycle: runs whose handler failed, and of those the ones
	// retried; runs that timed out, and those no plan called for; the
	// delayed tasks; starts before their due time (a delay or a retry's
	// backoff); the jobs' dead letters by kind, and the poison verdicts
	// the ledger explains; failed runs whose outcome write may have gone
	// through though the worker heard "lost" (its reply was lost and the
	// write sent again); and tasks that did not end as planned.
	failedRuns, retried int
	timeouts, unplanned int
	delayed             int
	early               []string
	deadByKind          map[string]int
	poisonExplained     int
	ambiguous           int
	endings             []string
	unsettled           []string // handlers that returned, their outcome never written
	// The smallest margins by which delayed tasks and retries started
	// after they were due (negative: early); valid when the counts are
	// not zero.
	delaySlack, retrySlack   time.Duration
	delayStarts, retryStarts int
}

// judge checks every task's runs, and how each job ended against its plan
// and its dead letters (by payload). t0 is the start of the run, for
// messages.
func (l *ledger) judge(tasks map[string]*taskInfo, dead map[string][]deadLetter, t0 int64) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := verdict{fences: l.fences, problems: slices.Clone(l.problems), deadByKind: make(map[string]int)}
	names := make([]string, 0, len(tasks))
	for t := range tasks {
		names = append(names, t)
	}
	sort.Strings(names)
	for t := range dead {
		if tasks[t] == nil {
			v.endings = append(v.endings, fmt.Sprintf("dead letter of a task never enqueued: %q", t))
		}
	}
	for _, t := range names {
		info := tasks[t]
		runs := slices.Clone(l.byTask[t])
		slices.SortFunc(runs, func(a, b *run) int { return cmp.Compare(a.start, b.start) })
		if info.kind == "job" {
			v.tasks++
		}
		v.runs += len(runs)

		// Overlaps: a run's hold ends at its end report, or when its
		// process was reaped after SIGKILL; one still open runs on. A
		// task enqueued twice (a retry after an unknown outcome) is two
		// tasks to worqr, which may well run at once.
		var prev *run
		var prevEnd int64
		for _, ru := range runs {
			if prev != nil && ru.start < prevEnd && len(info.copies) == 1 {
				how := "while the run on %s (pid %s) never ended"
				if prevEnd != math.MaxInt64 {
					how = fmt.Sprintf("%v before the run on %%s (pid %%s) ended", time.Duration(prevEnd-ru.start))
				}
				v.overlaps = append(v.overlaps, fmt.Sprintf("%s: run on %s (pid %s) began "+how+": %s",
					t, ru.inst, ru.pid, prev.inst, prev.pid, l.historyLocked(t, t0)))
			}
			if e := l.holdEndLocked(ru); prev == nil || e > prevEnd {
				prev, prevEnd = ru, e
			}
			if ru.end == 0 && l.insts[ru.inst].killDone == 0 {
				v.neverEnded = append(v.neverEnded, fmt.Sprintf("%s on %s (pid %s)", t, ru.inst, ru.pid))
			}
		}

		// Runs beyond the copies enqueued must each follow a release: a
		// failed attempt's retry, or a holder that died or fenced itself.
		type mark struct {
			at      int64
			release bool
			retry   bool
			run     *run
		}
		var marks []mark
		for i, at := range info.copies {
			marks = append(marks, mark{at: at, release: true, retry: i > 0})
		}
		for _, ru := range runs {
			marks = append(marks, mark{at: ru.start, run: ru})
			if at, ok := l.releaseLocked(ru); ok {
				marks = append(marks, mark{at: at, release: true})
			}
		}
		// Releases before runs at the same instant.
		slices.SortStableFunc(marks, func(a, b mark) int {
			if c := cmp.Compare(a.at, b.at); c != 0 {
				return c
			}
			if a.release != b.release {
				if a.release {
					return -1
				}
				return 1
			}
			return 0
		})
		avail, retries, releases, failReleases := 0, 0, 0, 0
		unexplained := 0
		for _, m := range marks {
			switch {
			case m.release && m.retry:
				retries++
				avail++
			case m.release:
				avail++
			case avail > 0:
				avail--
			default:
				unexplained++
			}
		}
		for _, ru := range runs {
			if _, ok := l.releaseLocked(ru); ok {
				releases++
				if ru.failed() {
					failReleases++
				}
			}
		}
		switch info.kind {
		case "job":
			// Re-runs a planned failure explains are not duplicates.
			if n := len(runs) - 1 - failReleases; n > 0 {
				expl := max(n-unexplained, 0)
				v.duplicates += n
				v.explained += expl
				v.byRetry += min(retries, expl)
				v.byRelease += expl - min(retries, expl)
			}
			if unexplained > 0 {
				v.unexplained = append(v.unexplained, fmt.Sprintf("%s ran %d times, enqueued %d, %d releases: %s",
					t, len(runs), len(info.copies), releases, l.historyLocked(t, t0)))
			}
			l.judgeJobLocked(&v, t, info, runs, dead[t], t0)
		case "conn":
			v.handovers += max(0, len(runs)-1)
			if unexplained > 0 {
				v.unexplained = append(v.unexplained, fmt.Sprintf("persistent %s re-held %d times without a release: %s",
					t, unexplained, l.historyLocked(t, t0)))
			}
			for i := 1; i < len(runs); i++ {
				if gap := time.Duration(runs[i].start - l.holdEndLocked(runs[i-1])); gap > v.maxRehold {
					v.maxRehold = gap
				}
			}
			for _, ru := range runs {
				if ru.end == 0 {
					continue
				}
				_, fenced := l.fencedAt[runKey{ru.q, ru.pid}]
				if !fenced && !strings.Contains(ru.cause, "shutting down") {
					v.strangeEnds = append(v.strangeEnds, fmt.Sprintf("%s on %s (pid %s) ended: %s", t, ru.inst, ru.pid, ru.cause))
				}
			}
			for _, dl := range dead[t] {
				v.endings = append(v.endings, fmt.Sprintf("persistent task %s dead-lettered, kind %s (%s): %s",
					t, dl.kind, dl.err, l.historyLocked(t, t0)))
			}
		case "probe":
			l.unsettledLocked(&v, t, runs, t0)
			if unexplained > 0 {
				v.unexplained = append(v.unexplained, fmt.Sprintf("probe %s ran twice: %s", t, l.historyLocked(t, t0)))
			}
			for _, dl := range dead[t] {
				v.endings = append(v.endings, fmt.Sprintf("probe %s dead-lettered, kind %s (%s)", t, dl.kind, dl.err))
			}
		}
	}
	slices.Sort(v.latencies)
	return v
}

// judgeJobLocked checks how a job ended against its plan: exactly one of
// finished (a handler completed it) and dead-lettered, with the kind and
// error the plan calls for, or of kind poison when as many of its holders
// died soon after starting it; no more failed attempts than planned; no
// start before its due time or its retry's backoff; attempts counted up.
func (l *ledger) judgeJobLocked(v *verdict, t string, info *taskInfo, runs []*run, dls []deadLetter, t0 int64) {
	pl := info.plan
	copies := max(len(info.copies), 1)
	single := len(info.copies) == 1
	bad := func(format string, args ...any) {
		v.endings = append(v.endings, t+": "+fmt.Sprintf(format, args...)+": "+l.historyLocked(t, t0))
	}
	l.unsettledLocked(v, t, runs, t0)

	var done int64
	finished := false
	for _, ru := range runs {
		if ru.ok && (done == 0 || ru.end < done) {
			done = ru.end
		}
		finished = finished || ru.settled == outFinished
	}
	switch {
	case done == 0 && len(dls) == 0:
		v.lost = append(v.lost, t)
	case done != 0 && pl.behave == behavePlain && pl.delay == 0 && len(info.copies) > 0:
		v.latencies = append(v.latencies, time.Duration(done-info.copies[0]))
	}

	// Failed attempts: those worqr counted (the worker heard the retry or
	// the dead letter go through) must not exceed the plan's; timeouts
	// must have taken the whole timeout.
	failures, timeouts := 0, 0
	for _, ru := range runs {
		if !ru.failed() {
			continue
		}
		v.failedRuns++
		counted := ru.settled == outRetried || ru.settled == outDead
		if ru.settled == outRetried {
			v.retried++
		}
		if counted {
			failures++
		} else if _, died := l.deathLocked(ru); !died && ru.settled == outLost {
			v.ambiguous++
		}
		if ru.fail == failTimeout {
			v.timeouts++
			if counted {
				timeouts++
			}
			if d := time.Duration(ru.end - ru.start); d < jobTimeout-timeoutSlack {
				bad("timed out after %v, its timeout is %v", d.Round(time.Millisecond), jobTimeout)
			}
		}
	}
	unplanned := max(0, timeouts-pl.plannedTimeouts()*copies)
	v.unplanned += unplanned
	if failures-unplanned > pl.budget()*copies {
		bad("%d failed attempts counted (%d unplanned timeouts), at most %d planned for %d copies", failures, unplanned, pl.budget(), copies)
	}

	// How it ended.
	want := pl.deadKind()
	if len(dls) > copies {
		bad("dead-lettered %d times, enqueued %d", len(dls), copies)
	}
	for _, dl := range dls {
		v.deadByKind[dl.kind]++
		switch {
		case dl.kind == worqr.KindPoison:
			if why := l.poisonLocked(runs); why != "" {
				bad("dead-lettered as poison (%s), but %s", dl.err, why)
			} else {
				v.poisonExplained++
			}
		case want == "":
			bad("planned to finish, dead-lettered: kind %s (%s)", dl.kind, dl.err)
		case dl.kind != want:
			bad("planned to die %s, dead-lettered %s (%s)", want, dl.kind, dl.err)
		case !pl.deadError(dl.err):
			bad("dead-lettered %s with the error %q", dl.kind, dl.err)
		}
		if single && dl.attempts < len(runs) {
			bad("its dead letter counts %d attempts, %d runs started", dl.attempts, len(runs))
		}
	}
	if single && finished && len(dls) > 0 {
		bad("finished, and dead-lettered")
	}
	if want != "" && done != 0 {
		bad("planned to die %s, a handler completed it", want)
	}

	// Due times: a delayed task's, and each retry's after a failed run.
	tol := earlyTolerance.Microseconds()
	if due := info.dueUs(); due != 0 {
		v.delayed++
		for _, ru := range runs {
			slack := time.Duration(ru.wStart-due) * time.Microsecond
			if v.delayStarts == 0 || slack < v.delaySlack {
				v.delaySlack = slack
			}
			v.delayStarts++
			if ru.wStart < due-tol {
				v.early = append(v.early, fmt.Sprintf("%s (pid %s) started %v before it was due: %s",
					t, ru.pid, time.Duration(due-ru.wStart)*time.Microsecond, l.historyLocked(t, t0)))
			}
		}
	}
	if !single {
		return // the copies' runs interleave
	}
	for i := 1; i < len(runs); i++ {
		a, b := runs[i-1], runs[i]
		if a.failed() {
			due := a.wEnd + retryBackoff(a.attempt, nil).Microseconds()
			slack := time.Duration(b.wStart-due) * time.Microsecond
			if v.retryStarts == 0 || slack < v.retrySlack {
				v.retrySlack = slack
			}
			v.retryStarts++
			if b.wStart < due-tol {
				v.early = append(v.early, fmt.Sprintf("%s (pid %s) started %v before the backoff after attempt %d ended: %s",
					t, b.pid, time.Duration(due-b.wStart)*time.Microsecond, a.attempt, l.historyLocked(t, t0)))
			}
		}
		if b.attempt <= a.attempt {
			bad("attempt %d started after attempt %d", b.attempt, a.attempt)
		}
	}
	if len(runs) > 0 && runs[0].attempt < 1 {
		bad("first run is attempt %d", runs[0].attempt)
	}
}

// unsettledLocked reports the runs whose handler returned but whose
// process was not settled (finished, retried, dead-lettered or lost)
// within settleWithin, while their worker lived.
func (l *ledger) unsettledLocked(v *verdict, t string, runs []*run, t0 int64) {
	for _, ru := range runs {
		if ru.end == 0 {
			continue // never ended: neverEnded says so, unless it was killed
		}
		deadline := ru.end + int64(settleWithin)
		switch in := l.insts[ru.inst]; {
		case ru.settled != "" && ru.settledAt <= deadline:
		case ru.settled == "" && in.killSent != 0 && in.killSent <= deadline:
		default:
			how := "never"
			if ru.settled != "" {
				how = fmt.Sprintf("only %v later", time.Duration(ru.settledAt-ru.end).Round(time.Millisecond))
			}
			v.unsettled = append(v.unsettled, fmt.Sprintf("%s (pid %s on %s): the handler returned, its outcome written %s: %s",
				t, ru.pid, ru.inst, how, l.historyLocked(t, t0)))
		}
	}
}

// poisonLocked explains a poison verdict, or says why it cannot: worqr
// counts a death when a reclaim finds a task's holder died within twice
// the TTL of starting it, and buries the task at DefaultPoisonLimit
// deaths, so the ledger must show as many runs of the task whose holder
// was killed or fenced that soon after starting it.
func (l *ledger) poisonLocked(runs []*run) string {
	window := 2*l.ttl + poisonSlack
	n := 0
	for _, ru := range runs {
		if at, ok := l.deathLocked(ru); ok && time.Duration(at-ru.start) < window {
			n++
		}
	}
	if n < worqr.DefaultPoisonLimit {
		return fmt.Sprintf("only %d of its holders were killed or fenced within %v of starting it", n, window)
	}
	return ""
}

// latency is the q-quantile of the tasks' latencies.
func (v verdict) latency(q float64) time.Duration {
	if len(v.latencies) == 0 {
		return 0
	}
	return v.latencies[int(q*float64(len(v.latencies)-1))]
}

// holdEndLocked is when a run's handler stopped: its end report, or the
// reaping of its killed process, or never.
func (l *ledger) holdEndLocked(ru *run) int64 {
	if ru.end != 0 {
		return ru.end
	}
	if d := l.insts[ru.inst].killDone; d != 0 {
		return d
	}
	return math.MaxInt64
}

// releaseLocked says whether, and when, a run let its task go to run
// again. A failed handler does, from its end on: the runtime retries the
// task after a backoff, even when the worker never heard the retry go
// through (a lost reply, or a fault right after). A holder that died or
// fenced itself does (see deathLocked). A run that ended its task
// (finished, dead letter) does not.
func (l *ledger) releaseLocked(ru *run) (int64, bool) {
	if ru.failed() && ru.settled != outDead {
		return ru.end, true
	}
	return l.deathLocked(ru)
}

// deathLocked says whether, and when, a run's holder let its task go
// without settling it because it died or fenced itself: it reported a
// fence listing the process, or it was killed before reporting the
// process finished, retried or dead-lettered.
func (l *ledger) deathLocked(ru *run) (int64, bool) {
	if at, ok := l.fencedAt[runKey{ru.q, ru.pid}]; ok {
		return at, true
	}
	if in := l.insts[ru.inst]; in.killSent != 0 {
		switch ru.settled {
		case outFinished, outRetried, outDead:
		default:
			return in.killSent, true
		}
	}
	return 0, false
}

// randDur is a random duration in [0, d).
func randDur(rng interface{ Int64N(int64) int64 }, d time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(d)))
}
