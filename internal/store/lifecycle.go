package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

func outcome(res rueidis.RedisResult, err error) (Outcome, error) {
	if err != nil {
		return 0, err
	}
	code, err := res.AsInt64()
	return Outcome(code), err
}

// RetryRef names a process to retry, and how.
type RetryRef struct {
	ProcRef
	Delay time.Duration // 0: at once, at the back of the queue
	Err   string        // the error recorded for the task; "" for none
	// Plain says the task has no weight, group or priority (Proc.Plain):
	// retried at once, it goes to retry_plain.lua, which checks so again.
	Plain bool
}

// Retry records each process's error (none if empty) and puts its task at
// the back of the queue, or, with a delay, in the delayed set until then (a
// sequence's task in its group: see retry.lua);
// each only if the process still belongs to its worker and that worker's
// lease is live. A cancelled task, or one of a deleted queue, is dropped.
// One outcome per process. A batch of plain tasks retried at once goes to
// retry_plain.lua, which carries only what their retry needs; any other
// batch, or one that script leaves whole (see retryLeft), to retry.lua.
// Only one of the calls writes, so the batch is retried whole or not at
// all, and its tasks go back in its order.
func (s *Store) Retry(ctx context.Context, queue string, procs []RetryRef) ([]Outcome, error) {
	plain := true
	for _, p := range procs {
		plain = plain && p.Delay == 0 && p.Plain
	}
	if plain {
		out, err := s.retryCall(ctx, queue, procs, true)
		if err != nil || len(out) == 0 || out[0] != retryLeft {
			return out, err
		}
	}
	return s.retryCall(ctx, queue, procs, false)
}

// retryLeft is retry_plain.lua's answer for every process of a batch it
// left as it was, for retry.lua: one of them not active, or of a task
// with a weight, a group or a priority. It is internal to the store: no
// caller of Retry sees it.
const retryLeft Outcome = 5

// retryCall is one retry script call for procs: retry_plain.lua's (plain,
// every delay 0) or retry.lua's.
func (s *Store) retryCall(ctx context.Context, queue string, procs []RetryRef, plain bool) ([]Outcome, error) {
	k := s.queueKeys(queue)
	carry := s.stats.take(queue)
	args := make([]string, 0, 2+4*len(procs))
	pids := make([]string, len(procs))
	args = append(args, k.Channel, carry.counts())
	script, name := s.scripts.Retry, "retry.lua"
	var keys []string
	if plain {
		script, name = s.scripts.RetryPlain, "retry_plain.lua"
		keys = []string{k.Procs, k.Leases, k.Waiting, k.Meta, k.Errors, k.Idle, k.Progress, k.Stats}
		for i, p := range procs {
			args = append(args, p.Worker, p.PID, p.Err)
			pids[i] = p.PID
		}
	} else {
		keys = append([]string{k.Procs, k.Leases, k.Waiting, k.Meta, k.Delayed, k.Errors, k.Idle, k.Unique, k.High, k.Low, k.Progress, k.Stats}, k.groups()...)
		for i, p := range procs {
			args = append(args, p.Worker, p.PID, strconv.FormatInt(p.Delay.Microseconds(), 10), p.Err)
			pids[i] = p.PID
		}
	}
	res, err := s.run(ctx, OpRequeue, queue, script, keys, args)
	s.stats.sent(carry, err, res)
	if err != nil {
		return nil, err
	}
	out, clock, err := outcomesAt(name, res, len(procs))
	if err != nil {
		return nil, err
	}
	s.stats.ended(queue, true, clock, pids, refKinds(len(procs), func(i int) string { return procs[i].Kind }), out)
	return out, nil
}

// outcomesAt reads a script's one code per process and then the Redis
// clock when it ran (µs).
func outcomesAt(script string, res rueidis.RedisResult, n int) (out []Outcome, clock int64, err error) {
	codes, err := res.AsIntSlice()
	if err != nil {
		return nil, 0, err
	}
	if len(codes) != n+1 {
		return nil, 0, fmt.Errorf("%s answered %d values for %d processes", script, len(codes), n)
	}
	out = make([]Outcome, n)
	for i, c := range codes[:n] {
		out[i] = Outcome(c)
	}
	return out, codes[n], nil
}

// DeadBounds bound a queue's dead letters.
type DeadBounds struct {
	MaxCount int
	MaxAge   time.Duration
}

// Bury moves a process's task to the queue's dead letters, with reason and
// error, and trims them to bounds; if the process still belongs to the
// worker and its lease is live. A cancelled task, or one of a deleted
// queue, is dropped.
func (s *Store) Bury(ctx context.Context, queue string, p ProcRef, reason, errText string, bounds DeadBounds) (Outcome, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpBury, queue, s.scripts.Bury, append([]string{k.Procs, k.Leases, k.Meta, k.Dead, k.Errors, k.Results, k.Retained, k.Waiting, k.Idle, k.Unique, k.High, k.Low, k.Progress, k.Stats}, append(k.groups(), k.Flows)...),
		[]string{p.Worker, p.PID, reason, errText, strconv.Itoa(bounds.MaxCount), strconv.FormatInt(bounds.MaxAge.Milliseconds(), 10), k.Channel})
	return outcome(res, err)
}

// Promoted is what a promotion did and found.
type Promoted struct {
	Moved int64 // tasks that were due and are now waiting
	// Next is when the next delayed task is due (Unix µs, Redis clock),
	// or -1 when none is.
	Next int64
	// Now is the Redis clock when the script ran (Unix µs).
	Now int64
}

// PromoteCap is the most tasks one promotion moves: 10,000 take Redis
// about 10 ms; more due at once take more calls, so that Redis serves
// others in between.
const PromoteCap = 10_000

// Promote moves up to PromoteCap due delayed tasks of a queue to its
// back, in due order, and says when the next is due.
func (s *Store) Promote(ctx context.Context, queue string) (Promoted, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpPromote, queue, s.scripts.Promote, []string{k.Waiting, k.Delayed, k.Idle, k.High, k.Low, k.GroupWait, k.GroupReady, k.Meta, k.Gather, k.GatherDue, k.GatherSize}, []string{k.Channel, strconv.Itoa(PromoteCap), strconv.Itoa(s.aggLimit)})
	if err != nil {
		return Promoted{}, err
	}
	n, err := res.AsIntSlice()
	if err == nil && len(n) != 3 {
		err = fmt.Errorf("promote.lua answered %d values", len(n))
	}
	if err != nil {
		return Promoted{}, err
	}
	return Promoted{Moved: n[0], Next: n[1], Now: n[2]}, nil
}

// KeptOutcome is a kept outcome in a listing: its record, its body cut
// as asked, and the body's whole size.
type KeptOutcome struct {
	Result
	Size int
}

// Outcomes lists a queue's kept outcomes, latest to expire first, from
// offset, up to limit of them, each body cut to cut bytes (< 0: whole):
// see outcome_list.lua.
func (s *Store) Outcomes(ctx context.Context, queue string, offset, limit, cut int) ([]KeptOutcome, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRead, queue, s.scripts.OutcomeList, []string{k.Results, k.Retained},
		[]string{strconv.Itoa(offset), strconv.Itoa(limit), strconv.Itoa(cut)})
	if err != nil {
		return nil, err
	}
	vals, err := res.AsStrSlice()
	if err != nil {
		return nil, err
	}
	out := make([]KeptOutcome, 0, len(vals)/3)
	for i := 0; i+2 < len(vals); i += 3 {
		r, ok := ParseResult(vals[i+2])
		exp, err1 := strconv.ParseFloat(vals[i], 64)
		size, err2 := strconv.Atoi(vals[i+1])
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("outcome_list.lua: record %q unreadable", vals[i+2])
		}
		r.Expires = int64(exp)
		out = append(out, KeptOutcome{Result: r, Size: size})
	}
	return out, nil
}

// OutcomeCut reads one task's kept outcome, its body cut to cut bytes
// (< 0: whole): see outcome_cut.lua. ok is false when none is kept.
func (s *Store) OutcomeCut(ctx context.Context, queue, id string, cut int) (o KeptOutcome, ok bool, err error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRead, queue, s.scripts.OutcomeCut, []string{k.Results, k.Retained}, []string{id, strconv.Itoa(cut)})
	if err != nil {
		return KeptOutcome{}, false, err
	}
	vals, err := res.AsStrSlice()
	switch {
	case err != nil:
		return KeptOutcome{}, false, err
	case len(vals) == 0:
		return KeptOutcome{}, false, nil
	case len(vals) != 3:
		return KeptOutcome{}, false, fmt.Errorf("outcome_cut.lua answered %d values", len(vals))
	}
	r, ok := ParseResult(vals[2])
	exp, err1 := strconv.ParseFloat(vals[0], 64)
	size, err2 := strconv.Atoi(vals[1])
	if !ok || err1 != nil || err2 != nil {
		return KeptOutcome{}, false, fmt.Errorf("outcome_cut.lua: record of %q unreadable", id)
	}
	r.Expires = int64(exp)
	return KeptOutcome{Result: r, Size: size}, true, nil
}

// RunNow moves one delayed task, by id, to the back of its queue now (see
// run_now.lua). It reports false when the queue has no delayed task of
// that id.
func (s *Store) RunNow(ctx context.Context, queue, id string) (bool, error) {
	k := s.queueKeys(queue)
	n, err := s.run(ctx, OpPromote, queue, s.scripts.RunNow, []string{k.Delayed, k.Waiting, k.Idle, k.High, k.Low, k.GroupWait, k.GroupReady}, []string{k.Channel, id, deadPattern(id)})
	if err != nil {
		return false, err
	}
	moved, err := n.AsInt64()
	return moved == 1, err
}

// DelayedTask is a delayed task and when it is due.
type DelayedTask struct {
	Task
	Due int64 // Unix µs, Redis clock
}

// Delayed returns a queue's delayed tasks in due order, from position
// start to stop inclusive (0 is the next due; negative counts from the
// last, as in ZRANGE). With cut >= 0 each payload is cut to its first cut
// bytes in Redis (delayed_list.lua; see Task.Size).
func (s *Store) Delayed(ctx context.Context, queue string, start, stop int64, cut int) ([]DelayedTask, error) {
	if err := s.enter(ctx, OpRead, queue); err != nil {
		return nil, err
	}
	if cut >= 0 {
		var dues []int64
		res := s.scripts.DelayedList.Exec(ctx, s.rdb, []string{s.queueKeys(queue).Delayed},
			[]string{strconv.FormatInt(start, 10), strconv.FormatInt(stop, 10), strconv.Itoa(cut)})
		ts, err := cutTasks("delayed_list.lua", res, 3, func(_ *Task, rest []rueidis.RedisMessage) error {
			due, err := rest[0].AsFloat64()
			dues = append(dues, int64(due))
			return err
		})
		if err != nil {
			return nil, err
		}
		out := make([]DelayedTask, len(ts))
		for i, t := range ts {
			out[i] = DelayedTask{Task: t, Due: dues[i]}
		}
		return out, nil
	}
	cmd := s.b().Zrange().Key(s.queueKeys(queue).Delayed).Min(strconv.FormatInt(start, 10)).Max(strconv.FormatInt(stop, 10)).Withscores().Build().Pin()
	vals, err := s.rdb.Do(ctx, cmd).AsZScores()
	if err != nil {
		return nil, err
	}
	out := make([]DelayedTask, 0, len(vals))
	for _, v := range vals {
		t := TaskOrRaw(v.Member)
		out = append(out, DelayedTask{Task: t, Due: int64(v.Score)})
	}
	return out, nil
}

// DelayedLen is the number of a queue's delayed tasks.
func (s *Store) DelayedLen(ctx context.Context, queue string) (int64, error) {
	if err := s.enter(ctx, OpRead, queue); err != nil {
		return 0, err
	}
	return s.rdb.Do(ctx, s.b().Zcard().Key(s.queueKeys(queue).Delayed).Build().Pin()).AsInt64()
}

// OutcomeState is what a queue says of a task's outcome.
type OutcomeState byte

// Outcome states, as outcome.lua answers them (see TaskOutcome).
const (
	OutcomeKept     OutcomeState = 'o' // kept: the Result is it
	OutcomeNone     OutcomeState = 'n' // none kept, and none known to come
	OutcomeComing   OutcomeState = 'w' // a retained task that has not ended
	OutcomeUnkept   OutcomeState = 'r' // a task in the queue, not retained
	OutcomeCanceled OutcomeState = 'c' // retained, in flight, cancelled
	OutcomeDeleted  OutcomeState = 'd' // retained, in flight, its queue deleted
)

// TaskOutcome reads a task's retained outcome in one script call
// (outcome.lua). Without one it answers OutcomeNone, unless look is set:
// then it says whether one will come (OutcomeComing) or why none will.
func (s *Store) TaskOutcome(ctx context.Context, queue, id string, look bool) (Result, OutcomeState, error) {
	k := s.queueKeys(queue)
	flag := "0"
	if look {
		flag = "1"
	}
	res, err := s.run(ctx, OpRead, queue, s.scripts.Outcome,
		[]string{k.Results, k.Retained, k.Procs, k.Delayed, k.Dead, k.Waiting, k.High, k.Low}, []string{id, flag, deadPattern(id)})
	if err != nil {
		return Result{}, 0, err
	}
	vals, err := res.AsStrSlice()
	if err != nil {
		return Result{}, 0, err
	}
	switch {
	case len(vals) == 1 && len(vals[0]) == 1 && strings.Contains("nwrcd", vals[0]):
		return Result{}, OutcomeState(vals[0][0]), nil
	case len(vals) != 3 || vals[0] != "o":
		return Result{}, 0, fmt.Errorf("outcome.lua answered %q", vals)
	}
	r, ok := ParseResult(vals[1])
	exp, err := strconv.ParseFloat(vals[2], 64)
	if !ok || err != nil {
		return Result{}, 0, fmt.Errorf("outcome record of %q unreadable", id)
	}
	r.Expires = int64(exp)
	return r, OutcomeKept, nil
}
