package main

import (
	"strconv"
	"time"

	"github.com/worqr/worqr"
)

func gatheringsCommands() []*command {
	return []*command{
		{name: "gatherings", synopsis: "<queue> [start] [--limit n]", group: "Inspect", summary: "a queue's open gatherings of aggregated tasks, next to flush first", run: cmdGatherings, help: `
Lists a queue's open gatherings (see worqr.Aggregate), the next to be
flushed by its deadline first, from position start (0 by default), at most
--limit of them (100 by default, 1,000 at most; see Client.Gatherings).
Each row: the aggregation key, the tasks it holds, the bytes they take in
the aggregated task ("-" when not known) and its deadline by the Redis
clock. It reads no task's payload.`},
	}
}

// gatheringRow is one gathering in a gatherings listing.
type gatheringRow struct {
	Key   string `json:"key"`
	Tasks int64  `json:"tasks"`
	Bytes int64  `json:"bytes"` // -1: not known
	// Deadline is when MaxDelay flushes it (RFC 3339, Redis clock).
	Deadline string `json:"deadline"`
}

// gatheringsJSON is the gatherings command's --json output.
type gatheringsJSON struct {
	Queue      string         `json:"queue"`
	Open       int64          `json:"open"`
	Start      int64          `json:"start"`
	Gatherings []gatheringRow `json:"gatherings"`
}

func cmdGatherings(e *env, args []string) error {
	fs := e.flags()
	limit := fs.Int("limit", pageSize, "list at most this many gatherings")
	pos, err := e.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > worqr.MaxGatheringsRead {
		return usagef("--limit must be in 1..%d", worqr.MaxGatheringsRead)
	}
	var start int64
	if len(pos) > 1 {
		if start, err = strconv.ParseInt(pos[1], 10, 64); err != nil || start < 0 {
			return usagef("start %q is not a whole number from 0", pos[1])
		}
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	gs, open, err := c.Gatherings(e.ctx, queue, start, *limit)
	if err != nil {
		return err
	}
	if e.g.json {
		rows := make([]gatheringRow, len(gs))
		for i, g := range gs {
			rows[i] = gatheringRow{Key: g.Key, Tasks: g.Tasks, Bytes: g.Bytes, Deadline: g.Deadline.UTC().Format(time.RFC3339Nano)}
		}
		return e.printJSON(gatheringsJSON{Queue: queue, Open: open, Start: start, Gatherings: rows})
	}
	e.note("%q: %d open gatherings", escape(queue), open)
	if len(gs) == 0 {
		return nil
	}
	t := e.table("KEY", "TASKS", "BYTES", "DEADLINE")
	for _, g := range gs {
		bytes := "-"
		if g.Bytes >= 0 {
			bytes = itoa(g.Bytes)
		}
		t.row(escape(g.Key), itoa(g.Tasks), bytes, g.Deadline.UTC().Format(time.RFC3339))
	}
	return t.flush()
}
