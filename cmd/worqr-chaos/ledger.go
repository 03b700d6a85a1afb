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
	Ev    string     `json:"ev"`              // ready, start, end, settled, fence, exit
	T     int64      `json:"t"`               // now() when it happened
	Q     string     `json:"q,omitempty"`     // queue
	PID   string     `json:"pid,omitempty"`   // process id (unique per queue, ever)
	Task  string     `json:"task,omitempty"`  // payload
	Owner string     `json:"owner,omitempty"` // worker id
	OK    bool       `json:"ok,omitempty"`    // end: the handler did its work
	Cause string     `json:"cause,omitempty"` // end: why the context ended; settled: outcome
	Lost  []lostProc `json:"lost,omitempty"`  // fence: the processes it held
}

type lostProc struct {
	Q    string `json:"q"`
	PID  string `json:"pid"`
	Task string `json:"task"`
}

// Outcomes in settled reports: the process was finished in Redis, lost
// (fenced, or given back at shutdown), cancelled or deleted.
const (
	outFinished = "finished"
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
	start   int64
	end     int64 // 0 while no end report came
	ok      bool  // the handler did its work (an ordinary task completed)
	cause   string
	settled string // outcome once the process ended, "" before
}

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
}

func newLedger() *ledger {
	return &ledger{
		runs:     make(map[runKey]*run),
		byTask:   make(map[string][]*run),
		fencedAt: make(map[runKey]int64),
		insts:    make(map[string]*inst),
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
		ru := &run{inst: name, q: r.Q, pid: r.PID, task: r.Task, owner: r.Owner, start: r.T}
		l.runs[key] = ru
		l.byTask[r.Task] = append(l.byTask[r.Task], ru)
	case "end", "settled":
		ru := l.runs[key]
		if ru == nil || ru.inst != name {
			l.problems = append(l.problems, fmt.Sprintf("%s: %s for unknown process %s/%s", name, r.Ev, r.Q, r.PID))
			return
		}
		if r.Ev == "end" {
			ru.end, ru.ok, ru.cause = r.T, r.OK, r.Cause
		} else {
			ru.settled = r.Cause
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

// undone lists the tasks whose handler never completed its work, and
// counts handlers still running for any of the tasks.
func (l *ledger) undone(tasks []string) (missing []string, running int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range tasks {
		done := false
		for _, ru := range l.byTask[t] {
			done = done || ru.ok
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

// history describes a task's runs, for messages.
func (l *ledger) history(task string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.historyLocked(task, 0)
}

func (l *ledger) historyLocked(task string, t0 int64) string {
	var parts []string
	for _, ru := range l.byTask[task] {
		in := l.insts[ru.inst]
		s := fmt.Sprintf("%s pid %s owner %.8s %s..%s ok=%v cause=%q settled=%q", ru.inst, ru.pid, ru.owner,
			rel(ru.start, t0), rel(ru.end, t0), ru.ok, ru.cause, ru.settled)
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
}

// verdict is what the ledger shows.
type verdict struct {
	tasks, runs int
	// For ordinary tasks: lost ones, runs beyond the first, and how many
	// of those a release (a holder killed or fenced before finishing), or
	// an enqueue retried after an unknown outcome, explains.
	lost                  []string
	duplicates, explained int
	byRelease, byRetry    int
	unexplained           []string
	// Persistent tasks: hand-overs from one holder to the next, those
	// without a release before them, and the longest time a task was
	// held by nobody between two holders.
	handovers int
	maxRehold time.Duration
	// latencies are, for ordinary tasks that completed, the times from
	// the first enqueue attempt to the first completed run, sorted.
	latencies   []time.Duration
	overlaps    []string // a task run by two handlers at once
	strangeEnds []string // persistent holds that ended for no fault
	neverEnded  []string // handlers with no end report whose process was not killed
	fences      int
	problems    []string
}

// judge checks every task's runs. t0 is the start of the run, for
// messages.
func (l *ledger) judge(tasks map[string]*taskInfo, t0 int64) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := verdict{fences: l.fences, problems: slices.Clone(l.problems)}
	names := make([]string, 0, len(tasks))
	for t := range tasks {
		names = append(names, t)
	}
	sort.Strings(names)
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

		// Runs beyond the copies enqueued must each follow a release.
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
		avail, retries, releases := 0, 0, 0
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
			}
		}
		switch info.kind {
		case "job":
			var done int64
			for _, ru := range runs {
				if ru.ok && (done == 0 || ru.end < done) {
					done = ru.end
				}
			}
			if done == 0 {
				v.lost = append(v.lost, t)
			} else if len(info.copies) > 0 {
				v.latencies = append(v.latencies, time.Duration(done-info.copies[0]))
			}
			if n := len(runs) - 1; n > 0 {
				v.duplicates += n
				v.explained += n - unexplained
				v.byRetry += min(retries, n-unexplained)
				v.byRelease += n - unexplained - min(retries, n-unexplained)
			}
			if unexplained > 0 {
				v.unexplained = append(v.unexplained, fmt.Sprintf("%s ran %d times, enqueued %d, %d releases: %s",
					t, len(runs), len(info.copies), releases, l.historyLocked(t, t0)))
			}
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
		case "probe":
			if unexplained > 0 {
				v.unexplained = append(v.unexplained, fmt.Sprintf("probe %s ran twice: %s", t, l.historyLocked(t, t0)))
			}
		}
	}
	slices.Sort(v.latencies)
	return v
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

// releaseLocked says whether, and when, a run's holder let its task go
// without finishing it because it died or fenced itself: it reported a
// fence listing the process, or it was killed before reporting the
// process finished.
func (l *ledger) releaseLocked(ru *run) (int64, bool) {
	if at, ok := l.fencedAt[runKey{ru.q, ru.pid}]; ok {
		return at, true
	}
	if in := l.insts[ru.inst]; in.killSent != 0 && ru.settled != outFinished {
		return in.killSent, true
	}
	return 0, false
}

// randDur is a random duration in [0, d).
func randDur(rng interface{ Int64N(int64) int64 }, d time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(d)))
}
