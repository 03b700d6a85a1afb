package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// inspected is the state TestInspect sets up and reads back.
type inspected struct {
	emails  []string // ids of the waiting emails, in dequeue order
	delayed []string // ids of the delayed emails, in due order
	holder  *worqr.Worker
	held    []*worqr.Process
	handler *worqr.Worker
}

// seedInspect fills three queues: emails with waiting and delayed tasks,
// reports with tasks held by a worker by hand, imports with dead letters
// left by a handler.
func seedInspect(t *testing.T, c *worqr.Client) inspected {
	ctx := ctxT(t)
	var s inspected
	ids, err := c.EnqueueBatch(ctx, "emails", [][]byte{[]byte("to:ada"), []byte("to:grace"), []byte("a\nb\x00\xff")})
	require.NoError(t, err)
	first, err := c.Enqueue(ctx, "emails", []byte("urgent"), worqr.AtFront(), worqr.MaxAttempts(3))
	require.NoError(t, err)
	s.emails = append([]string{first}, ids...)
	for _, d := range []time.Duration{time.Hour, 2 * time.Hour} {
		id, err := c.Enqueue(ctx, "emails", []byte("later "+d.String()), worqr.In(d))
		require.NoError(t, err)
		s.delayed = append(s.delayed, id)
	}

	s.holder = newWorker(t, c)
	require.NoError(t, s.holder.StartWork(ctx, "reports", worqr.Events{}))
	_, err = c.EnqueueBatch(ctx, "reports", [][]byte{[]byte("r1"), []byte("r2"), []byte("r3")})
	require.NoError(t, err)
	for range 2 {
		p, err := s.holder.Dequeue(ctx, "reports")
		require.NoError(t, err)
		s.held = append(s.held, p)
	}
	require.NoError(t, s.held[1].ReportProgress(ctx, 60, "page 3"))

	s.handler = newWorker(t, c)
	require.NoError(t, s.handler.Handle(ctx, "imports", func(_ context.Context, p *worqr.Process) error {
		if strings.HasPrefix(string(p.Task()), "bad") {
			return worqr.Permanent(errors.New("cannot parse " + string(p.Task())))
		}
		return nil
	}, worqr.HandleOptions{}))
	_, err = c.EnqueueBatch(ctx, "imports", [][]byte{[]byte("ok"), []byte("bad1"), []byte("bad2")})
	require.NoError(t, err)
	eventually(t, "two dead letters and nothing else in imports", func() bool {
		dead, _ := c.DeadLetterCount(ctx, "imports")
		waiting, _ := c.QueueLen(ctx, "imports")
		procs, _ := c.Processes(ctx, "imports")
		return dead == 2 && waiting == 0 && len(procs) == 0
	})
	return s
}

func TestInspect(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	s := seedInspect(t, b.client())

	t.Run("queues", func(t *testing.T) {
		out := b.ok("queues").stdout
		assert.Equal(t, []string{"QUEUE", "WAITING", "DELAYED", "IN-FLIGHT", "DEAD", "PAUSED", "LIMIT"}, rows(out)[0])
		assert.Equal(t, []string{"emails", "4", "2", "0", "0"}, row(t, out, "emails"))
		assert.Equal(t, []string{"imports", "0", "0", "0", "2"}, row(t, out, "imports"))
		assert.Equal(t, []string{"reports", "1", "0", "2", "0"}, row(t, out, "reports"))
		assert.Len(t, rows(out), 4)

		assert.Equal(t, []queueRow{
			{Queue: "emails", Waiting: 4, Delayed: 2},
			{Queue: "imports", Dead: 2},
			{Queue: "reports", Waiting: 1, InFlight: 2, InFlightWeight: 2},
		}, jsonOf[[]queueRow](b, "queues"))
		// Global flags go before the command too.
		assert.Len(t, jsonOf[[]queueRow](b, "--json", "queues"), 3)
	})

	t.Run("workers", func(t *testing.T) {
		ws := jsonOf[[]workerRow](b, "workers")
		require.Len(t, ws, 2)
		byID := map[string]workerRow{ws[0].ID: ws[0], ws[1].ID: ws[1]}
		holder, handler := byID[s.holder.ID()], byID[s.handler.ID()]
		assert.Equal(t, 2, holder.InFlight)
		assert.Equal(t, []string{"reports"}, holder.Queues)
		assert.Equal(t, 0, handler.InFlight)
		assert.Equal(t, []string{"imports"}, handler.Queues)
		assert.Nil(t, holder.Slots, "a worker that only dequeues has no handler slots")
		assert.Equal(t, map[string]int{"imports": worqr.DefaultConcurrency}, handler.Slots)
		for _, w := range ws {
			assert.Greater(t, w.LeaseLeftMs, int64(0))
			assert.LessOrEqual(t, w.LeaseLeftMs, int64(3000))
		}

		out := b.ok("workers").stdout
		assert.Equal(t, []string{"WORKER", "LEASE-LEFT", "IN-FLIGHT", "QUEUES", "SLOTS"}, rows(out)[0])
		r := row(t, out, s.holder.ID())
		assert.Equal(t, []string{"2", "reports", "-"}, r[2:])
		assert.Regexp(t, `^[0-9.]+m?s$`, r[1])
		assert.Equal(t, []string{"0", "imports", "imports:" + strconv.Itoa(worqr.DefaultConcurrency)}, row(t, out, s.handler.ID())[2:])
	})

	t.Run("processes", func(t *testing.T) {
		ps := jsonOf[[]processRow](b, "processes", "reports")
		require.Len(t, ps, 2)
		for i, p := range ps {
			held := s.held[i]
			assert.Equal(t, held.ID(), p.ID)
			assert.Equal(t, held.TaskID(), p.TaskID)
			assert.Equal(t, "reports", p.Queue)
			assert.Equal(t, 1, p.Attempt)
			assert.Equal(t, s.holder.ID(), p.Owner)
			assert.Equal(t, "active", p.State)
			assert.Equal(t, string(held.Task()), *p.Payload)
		}
		assert.Nil(t, ps[0].Progress)
		require.NotNil(t, ps[1].Progress)
		assert.Equal(t, 60, ps[1].Progress.Percent)
		assert.Equal(t, "page 3", ps[1].Progress.Note)
		assert.WithinDuration(t, time.Now(), ps[1].Progress.At, time.Minute)
		out := b.ok("processes", "reports").stdout
		assert.Equal(t, []string{"PROCESS", "TASK", "ATTEMPT", "OWNER", "STATE", "PROGRESS", "SIZE", "PAYLOAD"}, rows(out)[0])
		assert.Equal(t, []string{s.held[0].TaskID(), "1", s.holder.ID(), "active", "-", "2", "r1"}, row(t, out, s.held[0].ID())[1:])
		assert.Equal(t, []string{"60% page 3", "2", "r2"}, row(t, out, s.held[1].ID())[5:])

		r := b.ok("processes", "emails")
		assert.Empty(t, r.stdout)
		assert.Contains(t, r.stderr, `no tasks in flight in "emails"`)
		assert.Equal(t, "[]\n", b.ok("processes", "emails", "--json").stdout)
	})

	t.Run("peek", func(t *testing.T) {
		out := b.ok("peek", "emails").stdout
		rs := rows(out)
		require.Len(t, rs, 2, out)
		assert.Equal(t, []string{"POS", "ID", "ATTEMPTS", "ENQUEUED", "SIZE", "PAYLOAD"}, rs[0])
		assert.Equal(t, []string{"0", s.emails[0], "0/3"}, rs[1][:3])
		assert.Regexp(t, `ago$`, rs[1][3])
		assert.Equal(t, []string{"6", "urgent"}, rs[1][4:])

		ts := jsonOf[[]taskRow](b, "peek", "emails")
		require.Len(t, ts, 1)
		assert.Equal(t, s.emails[0], ts[0].ID)
		assert.Equal(t, 3, ts[0].MaxAttempts)
		assert.WithinDuration(t, time.Now(), *ts[0].EnqueuedAt, time.Minute)

		r := b.ok("peek", "nothing-here")
		assert.Empty(t, r.stdout)
		assert.Contains(t, r.stderr, `no waiting tasks in "nothing-here"`)
	})

	t.Run("range", func(t *testing.T) {
		ts := jsonOf[[]taskRow](b, "range", "emails")
		require.Len(t, ts, 4)
		for i, task := range ts {
			assert.Equal(t, int64(i), task.Position)
			assert.Equal(t, s.emails[i], task.ID)
			assert.Equal(t, "emails", task.Queue)
			assert.Nil(t, task.DueAt)
		}
		assert.Equal(t, "to:ada", *ts[1].Payload)
		// Bytes that are not UTF-8 come whole, in base64.
		assert.Nil(t, ts[3].Payload)
		assert.Equal(t, "YQpiAP8=", ts[3].PayloadBase64)
		assert.Equal(t, 5, ts[3].Size)

		// Tables escape them.
		out := b.ok("range", "emails").stdout
		assert.Equal(t, `a\nb\x00\xff`, row(t, out, "3")[5])
		assert.Len(t, rows(out), 5)

		r := b.ok("range", "emails", "1", "2")
		assert.Equal(t, []string{"1", "2"}, []string{rows(r.stdout)[1][0], rows(r.stdout)[2][0]})
		assert.Equal(t, s.emails[1], rows(r.stdout)[1][1])
		assert.Contains(t, r.stderr, "positions 1 to 2 of 4 waiting")

		last := jsonOf[[]taskRow](b, "range", "emails", "-1")
		require.Len(t, last, 1)
		assert.Equal(t, int64(3), last[0].Position)
		assert.Equal(t, s.emails[3], last[0].ID)

		b.fails(exitUsage, `start "x" is not a whole number`, "range", "emails", "x")
		b.fails(exitUsage, "too many arguments", "range", "emails", "0", "1", "2")
	})

	t.Run("delayed", func(t *testing.T) {
		ts := jsonOf[[]taskRow](b, "delayed", "emails")
		require.Len(t, ts, 2)
		for i, task := range ts {
			assert.Equal(t, s.delayed[i], task.ID)
			require.NotNil(t, task.DueAt)
			assert.WithinDuration(t, time.Now().Add(time.Duration(i+1)*time.Hour), *task.DueAt, time.Minute)
		}
		assert.Equal(t, "later 1h0m0s", *ts[0].Payload)

		out := b.ok("delayed", "emails").stdout
		assert.Equal(t, []string{"POS", "ID", "ATTEMPTS", "ENQUEUED", "DUE", "SIZE", "PAYLOAD"}, rows(out)[0])
		r := row(t, out, "1")
		assert.Equal(t, s.delayed[1], r[1])
		assert.Regexp(t, `^in (1h59m|2h0m)$`, r[4])
	})
}
