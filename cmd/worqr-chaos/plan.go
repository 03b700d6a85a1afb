package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/worqr/worqr"
)

// A job's plan says how its handler behaves and how the task must end. It
// is written in the payload, so that the worker processes (which behave by
// it) and the verifier (which judges by it) read the same plan:
//
//	job-17            ordinary work, then nil: finished
//	job-17.f2         fails its first 2 attempts, then succeeds: finished
//	job-17.x          always fails; MaxAttempts(3): dead, reason exhausted
//	job-17.p          returns worqr.Permanent: dead at once, reason permanent
//	job-17.t          outlives HandleOptions.Timeout once, then succeeds
//	job-17.T          always outlives it; MaxAttempts(2): dead, reason timeout
//	job-17.f1.d850    ... and enqueued with worqr.In(850ms)
//	job-17.f1.gs0     ... and enqueued with worqr.Group("s0") (groupQueue)
//
// A handler counts the failures before it from Process.LastError (each
// planned failure says its number), not from Process.Attempt, which also
// counts the starts whose holder died: a task planned to fail twice fails
// twice as worqr counts failures, however often it is reclaimed.

// Behaviours.
const (
	behavePlain     = ""
	behaveFail      = "f" // fail the first n attempts, then succeed
	behaveExhaust   = "x" // always fail
	behavePermanent = "p" // fail permanently
	behaveTimeout   = "t" // time out once, then succeed
	behaveTimeouts  = "T" // always time out
)

// The job queues' lifecycle settings, shared by the workers and the
// verifier.
const (
	// jobTimeout is the job queues' HandleOptions.Timeout: above the
	// slowest ordinary work (600 ms) with room to spare, so that only the
	// planned timeouts time out.
	jobTimeout = time.Second
	// jobMaxAttempts is the job queues' RetryPolicy.MaxAttempts: above
	// every planned number of failures of a task meant to succeed.
	jobMaxAttempts = 5
	// exhaustBudget and timeoutBudget are the MaxAttempts enqueue options
	// of the tasks planned to die of failures.
	exhaustBudget = 3
	timeoutBudget = 2
	// maxDelay bounds the delays of delayed tasks.
	maxDelay = 2 * time.Second
)

// retryBackoff is the job queues' RetryPolicy.Backoff: short (20 to 50
// ms) so that retries happen many times during the run, and a function of
// the attempt alone so that the verifier knows each retry's due time.
// Whole milliseconds: Redis counts delays in them.
func retryBackoff(attempt int, _ error) time.Duration {
	return 10*time.Millisecond + 10*time.Millisecond*time.Duration(min(max(attempt, 1), 4))
}

// Planned failures' errors.
const (
	plannedFailure   = "planned failure " // followed by its number, 1 for the first
	plannedPermanent = "planned permanent failure"
)

// Failure classes of a handler's run, as end reports give them.
const (
	failPlanned   = "planned"   // a planned failure (an ordinary error)
	failPermanent = "permanent" // a worqr.Permanent error
	failTimeout   = "timeout"   // its context ended with worqr.ErrTaskTimeout
)

type plan struct {
	behave string
	fails  int           // behaveFail: how many attempts fail
	delay  time.Duration // enqueued with worqr.In(delay); 0: not delayed
	group  string        // enqueued with worqr.Group(group) to groupQueue; "": none
}

// groupQueue is the job queue whose tasks are grouped: each in one of
// groups, whose concurrency limits (groupLimit) the harness sets before
// the run. The groups named s… are sequences (limit 1, their own), l…
// have a limit of 2 of their own, and u… the queue's default, 3.
const groupQueue = "jobs-g"

var groups = []string{"s0", "s1", "s2", "l0", "l1", "u0"}

// defaultGroupLimit is groupQueue's default group limit.
const defaultGroupLimit = 3

// groupLimit is a group's concurrency limit in groupQueue, as the harness
// sets it; own says it is the group's own (else the default).
func groupLimit(g string) (n int, own bool) {
	switch g[0] {
	case 's':
		return 1, true
	case 'l':
		return 2, true
	}
	return defaultGroupLimit, false
}

// randomPlan draws a job's plan: most are ordinary; 6% fail once or twice
// before succeeding, 4% exhaust their budget, 4% fail permanently, 3% time
// out once, 1% always time out; independently, 15% are delayed by 1 ms to
// 2 s.
func randomPlan(rng *rand.Rand) plan {
	var p plan
	switch n := rng.IntN(100); {
	case n < 6:
		p.behave, p.fails = behaveFail, 1+rng.IntN(2)
	case n < 10:
		p.behave = behaveExhaust
	case n < 14:
		p.behave = behavePermanent
	case n < 17:
		p.behave = behaveTimeout
	case n < 18:
		p.behave = behaveTimeouts
	}
	if rng.IntN(100) < 15 {
		p.delay = time.Millisecond * time.Duration(1+rng.IntN(int(maxDelay/time.Millisecond)))
	}
	return p
}

// payload is the job's payload: its name, then its plan.
func (p plan) payload(seq int) string {
	s := "job-" + strconv.Itoa(seq)
	switch p.behave {
	case behavePlain:
	case behaveFail:
		s += "." + behaveFail + strconv.Itoa(p.fails)
	default:
		s += "." + p.behave
	}
	if p.delay > 0 {
		s += ".d" + strconv.FormatInt(p.delay.Milliseconds(), 10)
	}
	if p.group != "" {
		s += ".g" + p.group
	}
	return s
}

// parsePlan reads a job's plan from its payload.
func parsePlan(payload string) (plan, error) {
	parts := strings.Split(payload, ".")
	if !strings.HasPrefix(parts[0], "job-") {
		return plan{}, fmt.Errorf("not a job: %q", payload)
	}
	var p plan
	for _, f := range parts[1:] {
		switch {
		case f == behaveExhaust, f == behavePermanent, f == behaveTimeout, f == behaveTimeouts:
			p.behave = f
		case strings.HasPrefix(f, behaveFail):
			n, err := strconv.Atoi(f[1:])
			if err != nil || n < 1 {
				return plan{}, fmt.Errorf("bad failure count in %q", payload)
			}
			p.behave, p.fails = behaveFail, n
		case strings.HasPrefix(f, "g") && len(f) > 1:
			p.group = f[1:]
		case strings.HasPrefix(f, "d"):
			ms, err := strconv.Atoi(f[1:])
			if err != nil || ms < 1 {
				return plan{}, fmt.Errorf("bad delay in %q", payload)
			}
			p.delay = time.Duration(ms) * time.Millisecond
		default:
			return plan{}, fmt.Errorf("unknown plan field %q in %q", f, payload)
		}
	}
	return p, nil
}

// options are the enqueue options the plan needs.
func (p plan) options() []worqr.EnqueueOption {
	var opts []worqr.EnqueueOption
	switch p.behave {
	case behaveExhaust:
		opts = append(opts, worqr.MaxAttempts(exhaustBudget))
	case behaveTimeouts:
		opts = append(opts, worqr.MaxAttempts(timeoutBudget))
	}
	if p.group != "" {
		opts = append(opts, worqr.Group(p.group))
	}
	if p.delay > 0 {
		opts = append(opts, worqr.In(p.delay)) // last: see producer.noDelay
	}
	return opts
}

// budget is the most failed attempts a copy of the task may have: those
// planned. (Ordinary work never fails; a timeout it did not plan is
// counted apart.)
func (p plan) budget() int {
	switch p.behave {
	case behaveFail:
		return p.fails
	case behaveExhaust:
		return exhaustBudget
	case behavePermanent, behaveTimeout:
		return 1
	case behaveTimeouts:
		return timeoutBudget
	}
	return 0
}

// plannedTimeouts is how many of a copy's failures are planned timeouts.
func (p plan) plannedTimeouts() int {
	switch p.behave {
	case behaveTimeout:
		return 1
	case behaveTimeouts:
		return timeoutBudget
	}
	return 0
}

// deadReason is the reason of the dead letter the task must end as, or ""
// if it must finish.
func (p plan) deadReason() string {
	switch p.behave {
	case behaveExhaust:
		return worqr.ReasonExhausted
	case behavePermanent:
		return worqr.ReasonPermanent
	case behaveTimeouts:
		return worqr.ReasonTimeout
	}
	return ""
}

// deadError says whether a dead letter's recorded error is the one the
// plan ends with: the last allowed planned failure, the permanent one, or
// a timeout.
func (p plan) deadError(text string) bool {
	switch p.behave {
	case behaveExhaust:
		return text == plannedFailure+strconv.Itoa(exhaustBudget)
	case behavePermanent:
		return strings.Contains(text, plannedPermanent)
	case behaveTimeouts:
		return strings.Contains(text, worqr.ErrTaskTimeout.Error())
	}
	return false
}

// failuresBefore reads how many planned failures a task had from its
// previous attempt's error: the number of the last one, 0 if none.
func failuresBefore(lastError string) int {
	rest, ok := strings.CutPrefix(lastError, plannedFailure)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return 0
	}
	return n
}
