package main

import (
	"fmt"
	"time"

	"github.com/worqr/worqr"
)

func deadCommands() []*command {
	return []*command{
		{name: "dead", synopsis: "<queue>", group: "Dead letters", summary: "list dead letters, newest first", run: cmdDead, help: `
Lists a queue's dead letters, newest first, a page at a time: task id,
attempts, when it died, the reason (why it died: see worqr.WithReason),
the error's text and a preview of the payload, and a KIND column after
the id once any task listed has a kind ("-" for a task without) (--json
adds the worker that held it, and whole payloads). "worqr dead list <queue>" is the same, for a queue named like
a subcommand.`},
		{name: "dead requeue", synopsis: "<queue> <id>|--all", group: "Dead letters", summary: "put dead letters back at the back of the queue", run: cmdDeadRequeue, help: `
Puts the dead letter of a task back at the back of its queue, or every dead
letter with --all (oldest nearest the front), as if it had never run: same
id and payload, no attempts, no last error. Exits 1 when the queue has no
dead letter of that id.`},
		{name: "dead delete", synopsis: "<queue> <id>", group: "Dead letters", summary: "delete one dead letter", run: cmdDeadDelete, help: `
Deletes the dead letter of a task and its recorded error. Exits 1 when the
queue has no dead letter of that id.`},
		{name: "dead purge", synopsis: "<queue> --yes", group: "Dead letters", summary: "delete every dead letter of a queue", run: cmdDeadPurge, help: `
Deletes every dead letter of a queue and their recorded errors. Without
--yes it changes nothing, prints how many it would delete, and exits 2.`},
	}
}

// deadRow is one dead letter.
type deadRow struct {
	ID          string     `json:"id"`
	Queue       string     `json:"queue"`
	Attempts    int        `json:"attempts"`
	MaxAttempts int        `json:"maxAttempts,omitempty"`
	EnqueuedAt  *time.Time `json:"enqueuedAt"`
	DiedAt      *time.Time `json:"diedAt"`
	Worker      string     `json:"worker"`
	Kind        string     `json:"kind,omitempty"`
	Reason      string     `json:"reason"`
	Error       string     `json:"error"`
	payloadJSON
}

func cmdDead(e *env, args []string) error {
	fs := e.flags()
	offset := fs.Int("offset", 0, "skip this many of the newest")
	limit := fs.Int("limit", 20, "show at most this many")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	queue, err := queueArg(pos[0])
	if err != nil {
		return err
	}
	if *offset < 0 || *limit <= 0 {
		return usagef("--offset must not be negative and --limit must be positive")
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	ds, err := c.DeadLetters(e.ctx, queue, *offset, *limit)
	if err != nil {
		return err
	}
	if e.g.json {
		rows := make([]deadRow, len(ds))
		for i, d := range ds {
			rows[i] = deadRow{ID: d.ID, Queue: d.Queue, Attempts: d.Attempts, MaxAttempts: d.MaxAttempts,
				EnqueuedAt: jsonTime(d.EnqueuedAt), DiedAt: jsonTime(d.DiedAt), Worker: d.Worker, Kind: d.Kind, Reason: d.Reason, Error: d.Error,
				payloadJSON: payloadOf(d.Payload)}
		}
		return e.printJSON(rows)
	}
	total, err := c.DeadLetterCount(e.ctx, queue)
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		if total == 0 {
			e.note("no dead letters in %q", escape(queue))
		} else {
			e.note("no dead letters in %q after the %d newest (%d in all)", escape(queue), *offset, total)
		}
		return nil
	}
	now := time.Now()
	kinds := anyKind(ds, func(d worqr.DeadLetter) string { return d.Kind })
	t := e.table(withKind([]string{"ID", "ATTEMPTS", "DIED", "REASON", "ERROR", "SIZE", "PAYLOAD"}, 1, kinds, "KIND")...)
	for _, d := range ds {
		t.row(withKind([]string{d.ID, itoa(d.Attempts), ago(now, d.DiedAt), escape(d.Reason), preview([]byte(d.Error), previewLen),
			itoa(len(d.Payload)), preview(d.Payload, previewLen)}, 1, kinds, d.Kind)...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if last := int64(*offset + len(ds)); *offset > 0 || last < total {
		e.note("dead letters %d to %d of %d, newest first (--offset %d for the next page)", *offset, last-1, total, last)
	}
	return nil
}

func cmdDeadRequeue(e *env, args []string) error {
	fs := e.flags()
	all := fs.Bool("all", false, "requeue every dead letter of the queue")
	pos, err := e.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	switch {
	case *all && len(pos) == 2:
		return usagef("give a task id or --all, not both")
	case !*all && len(pos) == 1:
		return usagef("give a task id, or --all")
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	if *all {
		n, err := c.RequeueDeadLetters(e.ctx, queue)
		if err != nil {
			return err
		}
		if e.g.json {
			return e.printJSON(struct {
				Queue    string `json:"queue"`
				Requeued int64  `json:"requeued"`
			}{queue, n})
		}
		_, err = fmt.Fprintf(e.stdout, "requeued %d dead letters in %q\n", n, escape(queue))
		return err
	}
	id := pos[1]
	ok, err := c.RequeueDeadLetter(e.ctx, queue, id)
	if err != nil {
		return err
	}
	if !ok {
		return noDeadLetter(queue, id)
	}
	return e.printDone(queue, id, "requeued", "requeued dead letter %s in %q\n")
}

func noDeadLetter(queue, id string) error {
	return notFoundf("no dead letter %s in %q", escape(id), escape(queue))
}

// printDone prints that something was done to one task.
func (e *env) printDone(queue, id, what, format string) error {
	if e.g.json {
		return e.printJSON(map[string]any{"queue": queue, "id": id, what: true})
	}
	_, err := fmt.Fprintf(e.stdout, format, escape(id), escape(queue))
	return err
}

func cmdDeadDelete(e *env, args []string) error {
	pos, err := e.parse(e.flags(), args, 2, 2)
	if err != nil {
		return err
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	ok, err := c.DeleteDeadLetter(e.ctx, queue, pos[1])
	if err != nil {
		return err
	}
	if !ok {
		return noDeadLetter(queue, pos[1])
	}
	return e.printDone(queue, pos[1], "deleted", "deleted dead letter %s in %q\n")
}

func cmdDeadPurge(e *env, args []string) error {
	fs := e.flags()
	yes := fs.Bool("yes", false, "really delete")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, queue, err := e.queueClient(pos[0])
	if err != nil {
		return err
	}
	if !*yes {
		n, err := c.DeadLetterCount(e.ctx, queue)
		if err != nil {
			return err
		}
		e.note("would delete %d dead letters in %q", n, escape(queue))
		return usagef("purge needs --yes; nothing was changed")
	}
	n, err := c.PurgeDeadLetters(e.ctx, queue)
	if err != nil {
		return err
	}
	if e.g.json {
		return e.printJSON(struct {
			Queue   string `json:"queue"`
			Deleted int64  `json:"deleted"`
		}{queue, n})
	}
	_, err = fmt.Fprintf(e.stdout, "deleted %d dead letters in %q\n", n, escape(queue))
	return err
}
