package main

import (
	"strconv"

	"github.com/worqr/worqr"
)

func groupsCommands() []*command {
	return []*command{
		{name: "groups", synopsis: "<queue> [--top n]", group: "Inspect", summary: "a queue's groups: the most waiting, the most running, those held back", run: cmdGroups, help: `
Shows a queue's groups (see worqr.Group): how many are ready and how many
have tasks in flight, the default group limit, then the top n groups (10 by
default) by tasks waiting, by slots running, and the groups held back at
their concurrency limit with tasks waiting. Each row: the section (WAITING,
RUNNING or HELD), the group's key, its tasks waiting, its slots running,
and its limit (its own, else the default; "-" for none). It reads the groups
with tasks in flight and the next 1,000 groups to be served, 1,000 of each
at most (see Client.Groups): past that a note says the ranking is partial.`},
	}
}

// groupRow is one group in a groups listing.
type groupRow struct {
	Key      string `json:"key"`
	Waiting  int64  `json:"waiting"`
	Running  int64  `json:"running"`
	Limit    int    `json:"limit"` // 0: none
	HeldBack bool   `json:"heldBack"`
}

// groupsJSON is the groups command's --json output.
type groupsJSON struct {
	Queue        string     `json:"queue"`
	Ready        int64      `json:"ready"`
	Running      int64      `json:"running"`
	DefaultLimit int        `json:"defaultLimit"` // 0: none
	TopWaiting   []groupRow `json:"topWaiting"`
	TopRunning   []groupRow `json:"topRunning"`
	HeldBack     []groupRow `json:"heldBack"`
	Partial      bool       `json:"partial"`
}

func groupRows(gs []worqr.GroupInfo) []groupRow {
	out := make([]groupRow, len(gs))
	for i, g := range gs {
		out[i] = groupRow{Key: g.Key, Waiting: g.Waiting, Running: g.Running, Limit: g.Limit, HeldBack: g.HeldBack}
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
	r, err := c.Groups(e.ctx, queue, *top)
	if err != nil {
		return err
	}
	if e.g.json {
		return e.printJSON(groupsJSON{Queue: queue, Ready: r.Ready, Running: r.Running, DefaultLimit: r.DefaultLimit,
			TopWaiting: groupRows(r.TopWaiting), TopRunning: groupRows(r.TopRunning), HeldBack: groupRows(r.HeldBack), Partial: r.Partial})
	}
	limit := func(n int) string {
		if n == 0 {
			return "-"
		}
		return strconv.Itoa(n)
	}
	e.note("%q: %d groups ready, %d with tasks in flight, default group limit %s", escape(queue), r.Ready, r.Running, limit(r.DefaultLimit))
	if r.Partial {
		e.note("more groups than one read takes (%d of each): the ranking is of those read", worqr.MaxGroupsRead)
	}
	if len(r.TopWaiting)+len(r.TopRunning) == 0 {
		e.note("no groups with tasks in %q", escape(queue))
		return nil
	}
	t := e.table("SECTION", "GROUP", "WAITING", "RUNNING", "LIMIT")
	for _, s := range []struct {
		name string
		gs   []worqr.GroupInfo
	}{{"WAITING", r.TopWaiting}, {"RUNNING", r.TopRunning}, {"HELD", r.HeldBack}} {
		for _, g := range s.gs {
			t.row(s.name, escape(g.Key), itoa(g.Waiting), itoa(g.Running), limit(g.Limit))
		}
	}
	return t.flush()
}
