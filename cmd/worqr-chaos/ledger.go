package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
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
	// taken is when the process was dequeued, on the same clock as start
	// (see begunLocked); 0 if unknown.
	taken int64
	end   int64 // 0 while no end report came
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
	// fencedBy are the times of its fence reports, by the worker id
	// fenced.
	fencedBy map[string][]int64
	freezes  []freeze
}

// freeze is one SIGSTOP of a worker process and the SIGCONT that ended it.
// The process may run on between sent and stopped (the signal is on its
// way), and not at all from stopped until cont.
type freeze struct {
	sent    int64 // SIGSTOP sent
	stopped int64 // the process seen stopped
	cont    int64 // SIGCONT sent; 0 while it is frozen
}

// span is a stretch of time [from, to) on the shared monotonic clock.
type span struct{ from, to int64 }

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
		// A process id is the Redis clock at the dequeue, in µs: the
		// start report's two clocks put it on the monotonic one.
		if us, err := strconv.ParseInt(r.PID, 16, 64); err == nil && r.W != 0 {
			ru.taken = r.T - (r.W-us)*int64(time.Microsecond)
		}
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
		if in.fencedBy == nil {
			in.fencedBy = make(map[string][]int64)
		}
		in.fencedBy[r.Owner] = append(in.fencedBy[r.Owner], r.T)
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

// froze records that worker process name was sent SIGSTOP at sent and
// seen stopped at stopped.
func (l *ledger) froze(name string, sent, stopped int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := l.instLocked(name)
	in.freezes = append(in.freezes, freeze{sent: sent, stopped: stopped})
}

// thawed records that worker process name, frozen, was sent SIGCONT at
// cont.
func (l *ledger) thawed(name string, cont int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := l.instLocked(name)
	if n := len(in.freezes); n > 0 && in.freezes[n-1].cont == 0 {
		in.freezes[n-1].cont = cont
		return
	}
	l.problems = append(l.problems, fmt.Sprintf("%s: SIGCONT without a SIGSTOP before it", name))
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
		if b := l.begunLocked(ru); b != ru.start {
			s += " dequeued@" + rel(b, t0)
		}
		if ru.fail != "" {
			s += " fail=" + ru.fail
		}
		if at, ok := l.fencedAt[runKey{ru.q, ru.pid}]; ok {
			s += " fenced@" + rel(at, t0)
		}
		if in.killSent != 0 {
			s += " inst-killed@" + rel(in.killSent, t0)
		}
		for _, fz := range in.freezes {
			if fz.stopped > l.begunLocked(ru) && (ru.end == 0 || fz.sent < ru.end) {
				s += " inst-frozen@" + rel(fz.sent, t0) + ".." + rel(fz.cont, t0)
			}
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
	kind   string // job, conn, probe or step
	// plan is a job's plan, read from its payload (see plan.go).
	plan plan
	// enqueuedUs is the Redis clock (Unix µs) at the enqueue that
	// succeeded, read from the task id it returned; 0 if unknown.
	enqueuedUs int64
	// redisBefore is the Redis clock (Unix µs, TIME) read before the
	// first enqueue attempt of a delayed task: no copy was enqueued
	// earlier.
	redisBefore int64
	// atEnd is, for a persistent task, how many times it was waiting or
	// in flight once every worker shut down, if checkedAtEnd.
	atEnd        int
	checkedAtEnd bool
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
	reason   string
	err      string // the error recorded with it
	attempts int    // the task's starts
	died     int64  // when it went to the dead letters: Redis clock, µs, cut to the ms
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

// thawGrace is how long after its SIGCONT a worker process that was
// frozen past its TTL may take to fence itself and end its handlers: its
// fencing timer is overdue when it wakes, so the fence comes at once, and
// what remains is the time for the stopped process to be scheduled again
// and for its handlers to return and report on a loaded machine. Within
// it, a frozen holder's handler that runs on while a peer holds its task
// is no overlap, and a fence reported within it dates from the freeze.
const thawGrace = time.Second

// copySkew is how much earlier than an enqueue attempt's start a run may
// seem to begin. A run on a worker just thawed begins, for the ledger,
// when it was dequeued (begunLocked), read from its process id (the
// Redis clock) through the worker's clocks, while the attempt's start is
// read on the harness's: the two agree to within about a millisecond,
// and a task handed to an idle worker is dequeued by its enqueue script,
// within that of the attempt's start.
const copySkew = int64(5 * time.Millisecond)

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
	// persistentDead counts the persistent tasks' dead letters (each a
	// violation).
	persistentDead int
	// thawEnds counts the handlers running when their process was
	// frozen that ended after its SIGCONT; maxThawEnd is the longest
	// they ran on after it.
	thawEnds   int
	maxThawEnd time.Duration
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
	// backoff); the jobs' dead letters by reason, and the poison verdicts
	// the ledger explains; failed runs whose outcome write may have gone
	// through though the worker heard "lost" (its reply was lost and the
	// write sent again); and tasks that did not end as planned.
	failedRuns, retried int
	timeouts, unplanned int
	delayed             int
	early               []string
	deadByReason        map[string]int
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
	v := verdict{fences: l.fences, problems: slices.Clone(l.problems), deadByReason: make(map[string]int)}
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
		slices.SortFunc(runs, func(a, b *run) int { return cmp.Compare(l.begunLocked(a), l.begunLocked(b)) })
		if info.kind == "job" {
			v.tasks++
		}
		v.runs += len(runs)

		// Overlaps: two runs that held the task at the same time (see
		// heldLocked). A task enqueued twice (a retry after an unknown
		// outcome) is two tasks to worqr, which may well run at once.
		held := make([][]span, len(runs))
		for i, ru := range runs {
			held[i] = l.heldLocked(ru)
		}
		for i, ru := range runs {
			if ru.end == 0 && l.insts[ru.inst].killDone == 0 {
				v.neverEnded = append(v.neverEnded, fmt.Sprintf("%s on %s (pid %s)", t, ru.inst, ru.pid))
			}
			if len(info.copies) != 1 {
				continue
			}
			for j, prev := range runs[:i] {
				if both, ok := overlap(held[j], held[i]); ok {
					how := "ever after"
					if both.to != math.MaxInt64 {
						how = "for " + time.Duration(both.to-both.from).Round(time.Millisecond).String()
					}
					v.overlaps = append(v.overlaps, fmt.Sprintf("%s: runs on %s (pid %s) and %s (pid %s) held it at once from %s %s: %s",
						t, prev.inst, prev.pid, ru.inst, ru.pid, rel(both.from, t0), how, l.historyLocked(t, t0)))
					break
				}
			}
		}
		for _, ru := range runs {
			if d, ok := l.thawEndLocked(ru); ok {
				v.thawEnds++
				v.maxThawEnd = max(v.maxThawEnd, d)
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
			marks = append(marks, mark{at: at - copySkew, release: true, retry: i > 0})
		}
		for _, ru := range runs {
			marks = append(marks, mark{at: l.begunLocked(ru), run: ru})
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
			if at, ok := l.releaseLocked(ru); ok {
				releases++
				if ru.failed() && at == ru.end { // not frozen out before it failed
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
				// From the end of the previous run's last stretch of
				// holding before this run began.
				var last int64
				begun := l.begunLocked(runs[i])
				for _, h := range held[i-1] {
					if h.from < begun {
						last = h.to
					}
				}
				if gap := time.Duration(begun - last); last != 0 && gap > v.maxRehold {
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
			v.persistentDead += len(dead[t])
			for _, dl := range dead[t] {
				v.endings = append(v.endings, fmt.Sprintf("persistent task %s dead-lettered, reason %s (%s): %s",
					t, dl.reason, dl.err, l.historyLocked(t, t0)))
			}
			// Once the workers shut down, every persistent task waits in
			// its queue (shutdown gives it back), once.
			switch {
			case !info.checkedAtEnd:
			case info.atEnd == 0 && len(dead[t]) == 0:
				v.lost = append(v.lost, t)
			case info.atEnd > 1:
				v.endings = append(v.endings, fmt.Sprintf("persistent task %s is in its queue %d times at the end: %s",
					t, info.atEnd, l.historyLocked(t, t0)))
			}
		case "step":
			// A workflow's step: judged against its workflow apart
			// (judgeWorkflows); here, that it ran again only after a
			// release.
			l.unsettledLocked(&v, t, runs, t0)
			if unexplained > 0 {
				v.unexplained = append(v.unexplained, fmt.Sprintf("workflow step %s ran %d times, %d releases: %s",
					t, len(runs), releases, l.historyLocked(t, t0)))
			}
		case "probe":
			l.unsettledLocked(&v, t, runs, t0)
			if unexplained > 0 {
				v.unexplained = append(v.unexplained, fmt.Sprintf("probe %s ran twice: %s", t, l.historyLocked(t, t0)))
			}
			for _, dl := range dead[t] {
				v.endings = append(v.endings, fmt.Sprintf("probe %s dead-lettered, reason %s (%s)", t, dl.reason, dl.err))
			}
		}
	}
	slices.Sort(v.latencies)
	return v
}

// judgeJobLocked checks how a job ended against its plan: exactly one of
// finished (a handler completed it) and dead-lettered, with the reason
// and error the plan calls for, or with reason poison when as many of its
// holders died soon after starting it; no more failed attempts than planned; no
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
			if d := time.Duration(ru.end - l.begunLocked(ru)); d < jobTimeout-timeoutSlack {
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
	want := pl.deadReason()
	if len(dls) > copies {
		bad("dead-lettered %d times, enqueued %d", len(dls), copies)
	}
	for _, dl := range dls {
		v.deadByReason[dl.reason]++
		switch {
		case dl.reason == worqr.ReasonPoison:
			if why := l.poisonLocked(runs); why != "" {
				bad("dead-lettered as poison (%s), but %s", dl.err, why)
			} else {
				v.poisonExplained++
			}
		case want == "":
			bad("planned to finish, dead-lettered: reason %s (%s)", dl.reason, dl.err)
		case dl.reason != want:
			bad("planned to die %s, dead-lettered %s (%s)", want, dl.reason, dl.err)
		case !pl.deadError(dl.err):
			bad("dead-lettered %s with the error %q", dl.reason, dl.err)
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
		// A retry is due a backoff after the failure that released the
		// task; not so a run after a holder frozen out before it failed.
		if at, _ := l.releaseLocked(a); a.failed() && at == a.end {
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
		if at, ok := l.deathLocked(ru); ok && time.Duration(at-l.begunLocked(ru)) < window {
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

// heldLocked is when a run held its task as far as worqr's fencing
// answers for it: from when it began (see begunLocked) until its end
// report, or the reaping of
// its killed process, or for ever; less each freeze of its process, from
// when the process was seen stopped until thawGrace after its SIGCONT. A
// process frozen past its TTL loses its lease while it cannot notice, and
// peers may take its tasks; once it runs again, its handlers run on until
// its overdue fence ends their contexts. docs/persistent-tasks.md puts a
// frozen process outside what fencing promises; thawGrace bounds how long
// that may take.
func (l *ledger) heldLocked(ru *run) []span {
	held := []span{{l.begunLocked(ru), l.holdEndLocked(ru)}}
	for _, fz := range l.insts[ru.inst].freezes {
		to := int64(math.MaxInt64)
		if fz.cont != 0 {
			to = fz.cont + int64(thawGrace)
		}
		held = cut(held, span{fz.stopped, to})
	}
	return held
}

// cut removes gap from spans.
func cut(spans []span, gap span) []span {
	var out []span
	for _, s := range spans {
		if s.to <= gap.from || s.from >= gap.to {
			out = append(out, s)
			continue
		}
		if s.from < gap.from {
			out = append(out, span{s.from, gap.from})
		}
		if s.to > gap.to {
			out = append(out, span{gap.to, s.to})
		}
	}
	return out
}

// overlap finds the earliest stretch of time that a and b share.
func overlap(a, b []span) (span, bool) {
	var first span
	found := false
	for _, x := range a {
		for _, y := range b {
			from, to := max(x.from, y.from), min(x.to, y.to)
			if from < to && (!found || from < first.from) {
				first, found = span{from, to}, true
			}
		}
	}
	return first, found
}

// thawEndLocked says how long after a SIGCONT a run ended that was
// running when its process was frozen.
func (l *ledger) thawEndLocked(ru *run) (time.Duration, bool) {
	if ru.end == 0 {
		return 0, false
	}
	var cont int64 // the last freeze it ran through
	for _, fz := range l.insts[ru.inst].freezes {
		if l.begunLocked(ru) < fz.stopped && fz.cont != 0 && ru.end >= fz.cont {
			cont = fz.cont
		}
	}
	if cont == 0 {
		return 0, false
	}
	return time.Duration(ru.end - cont), true
}

// releaseLocked says whether, and when, a run let its task go to run
// again. A failed handler does, from its end on: the runtime retries the
// task after a backoff, even when the worker never heard the retry go
// through (a lost reply, or a fault right after). A holder that died or
// fenced itself does (see deathLocked), and when that came first (a
// holder frozen out before its handler, on waking, failed), from then
// on. A run that ended its task (finished, dead letter) does not.
func (l *ledger) releaseLocked(ru *run) (int64, bool) {
	at, died := l.deathLocked(ru)
	if ru.failed() && ru.settled != outDead && (!died || ru.end <= at) {
		return ru.end, true
	}
	return at, died
}

// deathLocked says whether, and when, a run's holder let its task go
// without settling it because it died or fenced itself: it reported a
// fence listing the process, or it was killed, or frozen until its lease
// ran out (see frozenOutLocked), before reporting the process finished,
// retried or dead-lettered.
func (l *ledger) deathLocked(ru *run) (int64, bool) {
	if at, ok := l.frozenOutLocked(ru); ok {
		return at, true
	}
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

// frozenOutLocked says whether, and when, a run's holder lost its lease
// to a freeze: the worker id that dequeued it reported a fence within
// thawGrace of a SIGCONT of its process, and the run had begun before that
// SIGCONT (a worker whose lease ran out cannot dequeue) and was not
// reported finished, retried or dead-lettered. The lease ran out while the
// process was stopped, and peers may take the task from then on, so the
// release dates from the SIGSTOP (or the dequeue, if Redis ran it after
// the signal was sent), not from the fence report after it.
func (l *ledger) frozenOutLocked(ru *run) (int64, bool) {
	switch ru.settled {
	case outFinished, outRetried, outDead:
		return 0, false
	}
	in := l.insts[ru.inst]
	begun := l.begunLocked(ru)
	for _, fz := range in.freezes {
		if begun >= fz.cont || fz.cont == 0 {
			continue
		}
		for _, at := range in.fencedBy[ru.owner] {
			if at >= fz.cont && at-fz.cont <= int64(thawGrace) {
				return max(fz.sent, begun), true
			}
		}
	}
	return 0, false
}

// begunLocked is when a run began: its start report, unless that report
// came while its process was frozen or within thawGrace of its SIGCONT.
// Then the process may have been dequeued before the freeze, its handler
// reporting only on waking, and it began at its dequeue (its process id
// tells when).
func (l *ledger) begunLocked(ru *run) int64 {
	if ru.taken == 0 || ru.taken >= ru.start {
		return ru.start
	}
	for _, fz := range l.insts[ru.inst].freezes {
		if ru.start > fz.stopped && (fz.cont == 0 || ru.start <= fz.cont+int64(thawGrace)) {
			return ru.taken
		}
	}
	return ru.start
}

// randDur is a random duration in [0, d).
func randDur(rng interface{ Int64N(int64) int64 }, d time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(d)))
}
