package main

import (
	"strconv"
	"time"

	"github.com/worqr/worqr"
)

func groupsCommands() []*command {
	return []*command{
		{name: "groups", synopsis: "<queue> [--top n]", group: "Inspect", summary: "a queue's groups: the most waiting, the most running, those held back", run: cmdGroups, help: `
Shows a queue's groups (see worqr.Group): how many are ready and how many
have tasks in flight, the default group limit, then the top n groups (10 by
default) by tasks waiting, by slots running, the groups held back at
their concurrency limit or by their rate limit with tasks waiting, and the
sequences held on a dead task (see worqr sequence-hold). Each
row: the section (WAITING, RUNNING, HELD or DEAD), the group's key, its tasks
waiting, its slots running, its limit and its rate (its own, else the
default; "-" for none), its turns in a row (see worqr group-turns), its
own sequence-hold setting (HOLD: on, off, or "-" for the queue's), and,
for a group held back by its rate, when its
next start is allowed (NEXT, by the Redis clock), and, for a sequence held
on its dead task, that task's id (DEADTASK): requeue or delete its dead
letter to let the group go on. It reads the groups
with tasks in flight and the next 1,000 groups to be served, 1,000 of each
at most (see Client.Groups): past that a note says the ranking is partial.`},
		{name: "group-limit", synopsis: "<queue> <n> [--group key] [--create]", group: "Change", summary: "limit one group's tasks in flight across the fleet, or every group's by default (0: none)", run: cmdGroupLimit, help: `
Sets the concurrency limit of the group named by --group in a queue (see
Client.SetGroupConcurrency): at most n of its tasks in flight across the
fleet, 0 to fall back to the default. Without --group it sets the default
of every group without a limit of its own (0: no limit). A queue that does
not exist is an error (exit 1) unless --create is given. Prints the
queue's groups after, as worqr groups does.`},
		{name: "group-rate", synopsis: "<queue> <n> <per> [--group key] [--create]", group: "Change", summary: "limit one group's starts to n in any window of per, or every group's by default (0: none)", run: cmdGroupRate, help: `
Sets the rate limit of the group named by --group in a queue (see
Client.SetGroupRate): at most n of its tasks start in any window of per (a
duration: 1m, 500ms) across the fleet, 0 to fall back to the default.
Without --group it sets the default of every group without a rate of its
own (0: no rate). "10 calls a minute per API key": group-rate q 10 1m. A
queue that does not exist is an error (exit 1) unless --create is given.
Prints the queue's groups after, as worqr groups does.`},
		{name: "sequence-hold", synopsis: "<queue> on|off|queue [--group key] [--create]", group: "Change", summary: "hold a queue's sequences (or one group's) when their task dies, until its dead letter is requeued or deleted", run: cmdSequenceHold, help: `
Makes a queue hold each of its sequences (groups with a concurrency limit
of 1) whose task dies, until its dead letter is requeued or deleted (see
Client.SetSequenceHold): "on". "off" (the default) lets the later tasks go
on, and releases every sequence so held at once but those held by a
setting of their own. With --group it sets that group's own setting (see
Client.SetGroupSequenceHold), over the queue's: on, off, or "queue" to
follow the queue's again. A queue that does not exist is an error (exit
1) unless --create is given. Prints the queue's groups after, as worqr
groups does.`},
		{name: "group-turns", synopsis: "<queue> <n> [--group key] [--create]", group: "Change", summary: "give one group n turns in a row among the queue's groups, or every group by default (0: back to 1)", run: cmdGroupTurns, help: `
Gives the group named by --group in a queue n turns in a row among the
queue's groups (see Client.SetGroupTurns): while groups have tasks
waiting, a group of 3 turns starts 3 tasks for every one of a group of 1
(a premium tenant's share); 0 falls back to the default. Without --group
it sets the default of every group without turns of their own (0: one
turn). A queue that does not exist is an error (exit 1) unless --create
is given. Prints the queue's groups after, as worqr groups does.`},
		{name: "group-turn-size", synopsis: "<queue> <n> [--create]", group: "Change", summary: "let one turn of a queue's group start up to n of its tasks (1: one, strict alternation)", run: cmdGroupTurnSize, help: `
Sets how many of a group's waiting tasks one turn of it starts at most, for
every group of a queue (see Client.SetGroupTurnSize): up to n, bounded by
the group's free room under its limit and by what a dequeue asks for.
1, the default, alternates the groups task by task; a larger n makes a
dequeue of many groups cheaper in Redis, the groups alternating in runs
of up to n tasks. n is in 1..64. A queue that does not exist is an error
(exit 1) unless --create is given. Prints the queue's groups after, as
worqr groups does.`},
	}
}

func cmdGroupTurnSize(e *env, args []string) error {
	fs := e.flags()
	opts := createFlag(fs)
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	queue, err := queueArg(pos[0])
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(pos[1])
	if err != nil || n < 1 || n > worqr.MaxGroupTurnSize {
		return usagef("group-turn-size: %q is not a turn size from 1 to %d", pos[1], worqr.MaxGroupTurnSize)
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	if err := noQueue(c.SetGroupTurnSize(e.ctx, queue, n, opts()...), queue); err != nil {
		return err
	}
	return showGroups(e, c, queue, 10)
}

func cmdSequenceHold(e *env, args []string) error {
	fs := e.flags()
	opts := createFlag(fs)
	var group string
	groupSet := false
	fs.Func("group", "the group's key (else: the queue's setting)", func(s string) error {
		group, groupSet = s, true
		return nil
	})
	pos, err := e.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	queue, err := queueArg(pos[0])
	if err != nil {
		return err
	}
	if groupSet && (group == "" || len(group) > worqr.MaxGroupLen) {
		return usagef("sequence-hold: --group takes a key of 1 to %d bytes", worqr.MaxGroupLen)
	}
	var h worqr.GroupHold
	switch pos[1] {
	case "on":
		h = worqr.GroupHoldOn
	case "off":
		h = worqr.GroupHoldOff
	case "queue":
		if !groupSet {
			return usagef("sequence-hold: \"queue\" is a group's setting (--group)")
		}
		h = worqr.GroupHoldAsQueue
	default:
		return usagef("sequence-hold: %q is neither on nor off", pos[1])
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	if groupSet {
		err = c.SetGroupSequenceHold(e.ctx, queue, group, h, opts()...)
	} else {
		err = c.SetSequenceHold(e.ctx, queue, h == worqr.GroupHoldOn, opts()...)
	}
	if err := noQueue(err, queue); err != nil {
		return err
	}
	return showGroups(e, c, queue, 10)
}

// groupRow is one group in a groups listing.
type groupRow struct {
	Key      string `json:"key"`
	Waiting  int64  `json:"waiting"`
	Running  int64  `json:"running"`
	Limit    int    `json:"limit"` // 0: none
	Rate     int    `json:"rate"`  // 0: none
	PerMs    int64  `json:"perMs"`
	Turns    int    `json:"turns"`
	Hold     string `json:"hold"` // its own sequence-hold setting: queue, on or off
	HeldBack bool   `json:"heldBack"`
	// RateHeldUntil is, for a group held back by its rate, when its next
	// start is allowed (RFC 3339).
	RateHeldUntil string `json:"rateHeldUntil,omitempty"`
	// DeadTask is, for a sequence held on its dead task, that task's id.
	DeadTask string `json:"deadTask,omitempty"`
}

// groupsJSON is the groups command's --json output.
type groupsJSON struct {
	Queue        string     `json:"queue"`
	Ready        int64      `json:"ready"`
	Running      int64      `json:"running"`
	DefaultLimit int        `json:"defaultLimit"` // 0: none
	DefaultRate  int        `json:"defaultRate"`  // 0: none
	DefaultPerMs int64      `json:"defaultPerMs"`
	DefaultTurns int        `json:"defaultTurns"`
	TurnSize     int        `json:"turnSize"`
	TopWaiting   []groupRow `json:"topWaiting"`
	TopRunning   []groupRow `json:"topRunning"`
	HeldBack     []groupRow `json:"heldBack"`
	HeldOnDead   []groupRow `json:"heldOnDead"`
	Partial      bool       `json:"partial"`
}

func groupRows(gs []worqr.GroupInfo) []groupRow {
	out := make([]groupRow, len(gs))
	for i, g := range gs {
		out[i] = groupRow{Key: g.Key, Waiting: g.Waiting, Running: g.Running, Limit: g.Limit, Rate: g.Rate, PerMs: g.Per.Milliseconds(), Turns: g.Turns, Hold: g.Hold.String(), HeldBack: g.HeldBack, DeadTask: g.DeadTask}
		if !g.RateHeldUntil.IsZero() {
			out[i].RateHeldUntil = g.RateHeldUntil.UTC().Format(time.RFC3339Nano)
		}
	}
	return out
}

func cmdGroups(e *env, args []string) error {
	fs := e.flags()
	top := fs.Int("top", 10, "show at most this many groups in each section")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *top < 1 || *top > worqr.MaxGroupsRead {
		return usagef("--top must be in 1..%d", worqr.MaxGroupsRead)
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	return showGroups(e, c, queue, *top)
}

// showGroups prints a queue's groups, the top n of each section.
func showGroups(e *env, c *worqr.Client, queue string, n int) error {
	r, err := c.Groups(e.ctx, queue, n)
	if err != nil {
		return err
	}
	if e.g.json {
		return e.printJSON(groupsJSON{Queue: queue, Ready: r.Ready, Running: r.Running, DefaultLimit: r.DefaultLimit,
			DefaultRate: r.DefaultRate, DefaultPerMs: r.DefaultPer.Milliseconds(), DefaultTurns: r.DefaultTurns, TurnSize: r.TurnSize,
			TopWaiting: groupRows(r.TopWaiting), TopRunning: groupRows(r.TopRunning), HeldBack: groupRows(r.HeldBack),
			HeldOnDead: groupRows(r.HeldOnDead), Partial: r.Partial})
	}
	limit := func(n int) string {
		if n == 0 {
			return "-"
		}
		return strconv.Itoa(n)
	}
	rate := func(n int, per time.Duration) string {
		if n == 0 {
			return "-"
		}
		return strconv.Itoa(n) + "/" + per.String()
	}
	e.note("%q: %d groups ready, %d with tasks in flight, default group limit %s, rate %s, turns %d, turn size %d", escape(queue), r.Ready, r.Running,
		limit(r.DefaultLimit), rate(r.DefaultRate, r.DefaultPer), r.DefaultTurns, r.TurnSize)
	if r.Partial {
		e.note("more groups than one read takes (%d of each): the ranking is of those read", worqr.MaxGroupsRead)
	}
	if len(r.TopWaiting)+len(r.TopRunning)+len(r.HeldOnDead) == 0 {
		e.note("no groups with tasks in %q", escape(queue))
		return nil
	}
	t := e.table("SECTION", "GROUP", "WAITING", "RUNNING", "LIMIT", "RATE", "TURNS", "HOLD", "NEXT", "DEADTASK")
	for _, s := range []struct {
		name string
		gs   []worqr.GroupInfo
	}{{"WAITING", r.TopWaiting}, {"RUNNING", r.TopRunning}, {"HELD", r.HeldBack}, {"DEAD", r.HeldOnDead}} {
		for _, g := range s.gs {
			next := "-"
			if !g.RateHeldUntil.IsZero() {
				next = g.RateHeldUntil.UTC().Format(time.RFC3339)
			}
			dead := "-"
			if g.DeadTask != "" {
				dead = g.DeadTask
			}
			hold := "-"
			if g.Hold != worqr.GroupHoldAsQueue {
				hold = g.Hold.String()
			}
			t.row(s.name, escape(g.Key), itoa(g.Waiting), itoa(g.Running), limit(g.Limit), rate(g.Rate, g.Per), strconv.Itoa(g.Turns), hold, next, dead)
		}
	}
	return t.flush()
}

// groupControl parses the arguments of a command that sets a group
// control (name: the command; npos: its positional arguments, the queue
// and the count first), then runs set with the client, the queue, the
// group ("" for every group's default), the count and the rest of the
// arguments, and prints the queue's groups.
func groupControl(e *env, args []string, name string, npos int, set func(c *worqr.Client, queue, group string, n int, rest []string, opts []worqr.ControlOption) error) error {
	fs := e.flags()
	opts := createFlag(fs)
	var group string
	groupSet := false
	fs.Func("group", "the group's key (else: every group's default)", func(s string) error {
		group, groupSet = s, true
		return nil
	})
	pos, err := e.parse(fs, args, npos, npos)
	if err != nil {
		return err
	}
	queue, err := queueArg(pos[0])
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(pos[1], 10, 64)
	if err != nil || n < 0 || n > worqr.MaxLimit {
		return usagef("%s: %q is not a count from 0 (none) to %d", name, pos[1], int64(worqr.MaxLimit))
	}
	if groupSet && (group == "" || len(group) > worqr.MaxGroupLen) {
		return usagef("%s: --group takes a key of 1 to %d bytes", name, worqr.MaxGroupLen)
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	if err := set(c, queue, group, int(n), pos[2:], opts()); err != nil {
		return err
	}
	return showGroups(e, c, queue, 10)
}

func cmdGroupLimit(e *env, args []string) error {
	return groupControl(e, args, "group-limit", 2, func(c *worqr.Client, queue, group string, n int, _ []string, opts []worqr.ControlOption) error {
		return noQueue(c.SetGroupConcurrency(e.ctx, queue, group, n, opts...), queue)
	})
}

func cmdGroupTurns(e *env, args []string) error {
	return groupControl(e, args, "group-turns", 2, func(c *worqr.Client, queue, group string, n int, _ []string, opts []worqr.ControlOption) error {
		return noQueue(c.SetGroupTurns(e.ctx, queue, group, n, opts...), queue)
	})
}

func cmdGroupRate(e *env, args []string) error {
	return groupControl(e, args, "group-rate", 3, func(c *worqr.Client, queue, group string, n int, rest []string, opts []worqr.ControlOption) error {
		per, err := time.ParseDuration(rest[0])
		if err != nil || per < time.Millisecond || per%time.Millisecond != 0 {
			return usagef("group-rate: %q is not a window of 1ms or more, in whole milliseconds (1m, 500ms)", rest[0])
		}
		return noQueue(c.SetGroupRate(e.ctx, queue, group, n, per, opts...), queue)
	})
}
