package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/worqr/worqr"
)

// errFirstAttempt is what the retry scenario's handler returns the first
// time it sees a task.
var errFirstAttempt = errors.New("first attempt fails")

// runRetry drains pre-loaded queues with one worker (-concurrency handlers
// per queue) whose handler fails every task's first attempt and finishes
// its second, with a RetryPolicy whose Backoff is 0 (a failed task goes
// straight back to the end of its queue), against the same worker and
// tasks with a handler that never fails, in the same run. Every task
// starts twice, so about half the plain rate is the most to expect.
func runRetry(ctx context.Context, b *bench) (*result, error) {
	perQueue := b.pick(20_000, 2_000) / len(b.queues)
	total := int64(perQueue * len(b.queues))
	conc := b.cfg.concurrency
	run := uuid.NewString()[:8]
	res := &result{}

	plain, _, err := drain(ctx, b, perQueue, run, nil, worqr.HandleOptions{Concurrency: conc})
	if err != nil {
		return nil, fmt.Errorf("plain: %w", err)
	}
	plainRate := float64(total) / plain.elapsed.Seconds()

	var failed, wrong atomic.Int64
	fail := func(p *worqr.Process) error {
		switch p.Attempt() {
		case 1:
			failed.Add(1)
			return errFirstAttempt
		case 2:
			return nil
		}
		wrong.Add(1)
		return nil
	}
	opts := worqr.HandleOptions{Concurrency: conc, Retry: worqr.RetryPolicy{
		MaxAttempts: 3,
		Backoff:     func(int, error) time.Duration { return 0 },
	}}
	got, _, err := drain(ctx, b, perQueue, run, fail, opts)
	if err != nil {
		return nil, err
	}
	rate := float64(total) / got.elapsed.Seconds()

	res.add("tasks_per_s", "tasks/s", rate)
	res.add("plain_tasks_per_s", "tasks/s", plainRate)
	res.add("ratio", "×", rate/plainRate)
	res.add("starts_per_task", "starts", float64(failed.Load()+total)/float64(total))
	if got.serverOK {
		n := float64(total)
		res.add("scripts_per_task", "calls", float64(got.calls["evalsha"]+got.calls["eval"])/n)
		res.add("plain_scripts_per_task", "calls", float64(plain.calls["evalsha"]+plain.calls["eval"])/n)
		res.add("commands_per_task", "calls", commandsPer(got, n))
		res.add("plain_commands_per_task", "calls", commandsPer(plain, n))
		res.note("commands per task, retried (plain): %s", commandsBreakdown(got, plain, n))
	}
	got.perTask(res, "", total, scripts...)
	plain.perTask(res, "plain_", total, scripts...)
	if n := wrong.Load(); n > 0 {
		res.note("%d start(s) were a third attempt or later, or reported attempt 0", n)
	}
	return res, nil
}

// commandsPer is the commands a span ran per task, those inside scripts
// counted, the script calls themselves not.
func commandsPer(sp span, n float64) float64 {
	var k int64
	for cmd, c := range sp.calls {
		if cmd != "evalsha" && cmd != "eval" {
			k += c
		}
	}
	return float64(k) / n
}

// commandsBreakdown names each command's calls per task in got, with
// plain's beside it, the most frequent first, those under 0.005 left out.
func commandsBreakdown(got, plain span, n float64) string {
	names := make([]string, 0, len(got.calls))
	for cmd, c := range got.calls {
		if float64(c)/n >= 0.005 || float64(plain.calls[cmd])/n >= 0.005 {
			names = append(names, cmd)
		}
	}
	for cmd, c := range plain.calls {
		if _, ok := got.calls[cmd]; !ok && float64(c)/n >= 0.005 {
			names = append(names, cmd)
		}
	}
	sort.Slice(names, func(i, j int) bool { return got.calls[names[i]] > got.calls[names[j]] })
	parts := make([]string, len(names))
	for i, cmd := range names {
		parts[i] = fmt.Sprintf("%s %.3f (%.3f)", cmd, float64(got.calls[cmd])/n, float64(plain.calls[cmd])/n)
	}
	return strings.Join(parts, ", ")
}
