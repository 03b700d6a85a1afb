package main

import (
	"time"

	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// enqueue --group puts the task in its group: it waits there, under the
// group's limit.
func TestEnqueueGroup(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, worqr.CreateQueue()))
	b.ok("enqueue", "--group", "tenant-42", "q", "one")
	b.ok("enqueue", "--group", "tenant-42", "q", "two")
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.EqualValues(t, 2, info.Waiting)
	assert.EqualValues(t, 1, info.Groups)

	w := newWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	ps, err := w.DequeueN(ctx, "q", 2)
	require.NoError(t, err)
	require.Len(t, ps, 1, "the group's limit of 1")
	assert.Equal(t, "one", string(ps[0].Task()))
}

// groups ranks a queue's groups by waiting and running and names those
// held back at their limit, as a table and as JSON.
func TestGroupsCommand(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	require.NoError(t, c.SetGroupConcurrency(ctx, "q", "", 1, worqr.CreateQueue()))
	b.ok("enqueue", "--group", "held", "q", "h1")
	b.ok("enqueue", "--group", "held", "q", "h2")
	w := newWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	ps, err := w.DequeueN(ctx, "q", 1)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	for _, p := range []string{"b1", "b2", "b3"} {
		b.ok("enqueue", "--group", "big", "q", p)
	}

	r := b.ok("groups", "q")
	assert.Contains(t, r.stderr, "1 groups ready, 1 with tasks in flight, default group limit 1, rate -, turns 1")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 5, "%s", r.stdout)
	assert.Regexp(t, `^SECTION\s+GROUP\s+WAITING\s+RUNNING\s+LIMIT\s+RATE\s+TURNS\s+HOLD\s+NEXT\s+DEADTASK$`, lines[0])
	assert.Regexp(t, `^WAITING\s+big\s+3\s+0\s+1\s+-\s+1\s+-\s+-\s+-$`, lines[1])
	assert.Regexp(t, `^WAITING\s+held\s+1\s+1\s+1\s+-\s+1\s+-\s+-\s+-$`, lines[2])
	assert.Regexp(t, `^RUNNING\s+held\s+1\s+1\s+1\s+-\s+1\s+-\s+-\s+-$`, lines[3])
	assert.Regexp(t, `^HELD\s+held\s+1\s+1\s+1\s+-\s+1\s+-\s+-\s+-$`, lines[4])

	got := jsonOf[groupsJSON](b, "groups", "q", "--top", "1")
	assert.Equal(t, groupsJSON{Queue: "q", Ready: 1, Running: 1, DefaultLimit: 1, DefaultTurns: 1, TurnSize: 1,
		TopWaiting: []groupRow{{Key: "big", Waiting: 3, Limit: 1, Turns: 1, Hold: "queue"}},
		TopRunning: []groupRow{{Key: "held", Waiting: 1, Running: 1, Limit: 1, Turns: 1, Hold: "queue", HeldBack: true}},
		HeldBack:   []groupRow{{Key: "held", Waiting: 1, Running: 1, Limit: 1, Turns: 1, Hold: "queue", HeldBack: true}}, HeldOnDead: []groupRow{}}, got)
	b.fails(2, "--top must be in 1..1000", "groups", "q", "--top", "0")
}

// group-limit sets one group's limit, or with no --group every group's
// default, and prints the groups; a queue that does not exist is refused
// unless --create is given.
func TestGroupLimitCommand(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	b.fails(1, `no queue "q"`, "group-limit", "q", "2")
	b.ok("group-limit", "q", "2", "--create")
	b.ok("enqueue", "--group", "tenant-42", "q", "one")
	r := b.ok("group-limit", "q", "5", "--group", "tenant-42")
	assert.Regexp(t, `WAITING\s+tenant-42\s+1\s+0\s+5`, r.stdout)
	got, err := c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 2, got.DefaultLimit)
	require.Len(t, got.TopWaiting, 1)
	assert.Equal(t, 5, got.TopWaiting[0].Limit)
	b.fails(2, "not a count", "group-limit", "q", "-1")
	b.fails(2, "--group takes a key", "group-limit", "q", "1", "--group", "")
}

// group-rate sets one group's rate, or with no --group every group's
// default, and prints the groups with their rates; bad counts and windows
// are refused.
func TestGroupRateCommand(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	b.fails(1, `no queue "q"`, "group-rate", "q", "2", "1m")
	b.ok("group-rate", "q", "10", "1m", "--create")
	b.ok("enqueue", "--group", "key-7", "q", "one")
	r := b.ok("group-rate", "q", "3", "1s", "--group", "key-7")
	assert.Regexp(t, `WAITING\s+key-7\s+1\s+0\s+-\s+3/1s`, r.stdout)
	got, err := c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 10, got.DefaultRate)
	assert.Equal(t, time.Minute, got.DefaultPer)
	require.Len(t, got.TopWaiting, 1)
	assert.Equal(t, 3, got.TopWaiting[0].Rate)
	b.fails(2, "not a count", "group-rate", "q", "-1", "1m")
	b.fails(2, "not a window", "group-rate", "q", "1", "0s")
	b.fails(2, "not a window", "group-rate", "q", "1", "1.5ms") // Redis keeps whole ms: 1ms would be set
	b.fails(2, "--group takes a key", "group-rate", "q", "1", "1m", "--group", "")
}

// sequence-hold on holds a sequence whose task died, shown in the DEAD
// section with its dead task's id; off lets it go on.
func TestSequenceHoldCommand(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	b.fails(1, `no queue "q"`, "sequence-hold", "q", "on")
	b.fails(2, "neither on nor off", "sequence-hold", "q", "maybe", "--create")
	b.ok("sequence-hold", "q", "on", "--create")
	b.ok("group-limit", "q", "1", "--group", "s")
	b.ok("enqueue", "--group", "s", "q", "s0")
	b.ok("enqueue", "--group", "s", "q", "s1")
	w := newWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, p.DeadLetter(ctx, errors.New("for good")))
	r := b.ok("groups", "q")
	assert.Regexp(t, `(?m)^DEAD\s+s\s+1\s+0\s+1\s+-\s+1\s+-\s+-\s+`+regexp.QuoteMeta(p.TaskID())+`$`, r.stdout)
	got := jsonOf[groupsJSON](b, "groups", "q")
	require.Len(t, got.HeldOnDead, 1)
	assert.Equal(t, p.TaskID(), got.HeldOnDead[0].DeadTask)
	r = b.ok("sequence-hold", "q", "off")
	assert.NotContains(t, r.stdout, "DEAD ")
	p, err = w.Dequeue(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, "s1", string(p.Task()))
}

// group-turns sets one group's turns, or with no --group every group's
// default, shown in the TURNS column; sequence-hold --group sets a
// group's own setting, shown in the HOLD column; bad values are refused.
func TestGroupTurnsAndHoldCommands(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	b.fails(1, `no queue "q"`, "group-turns", "q", "2")
	b.ok("group-turns", "q", "2", "--create")
	b.ok("enqueue", "--group", "premium", "q", "one")
	r := b.ok("group-turns", "q", "3", "--group", "premium")
	assert.Contains(t, r.stderr, "turns 2")
	assert.Regexp(t, `WAITING\s+premium\s+1\s+0\s+-\s+-\s+3\s+-\s`, r.stdout)
	got, err := c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 2, got.DefaultTurns)
	require.Len(t, got.TopWaiting, 1)
	assert.Equal(t, 3, got.TopWaiting[0].Turns)
	b.fails(2, "not a count", "group-turns", "q", "-1")
	b.fails(2, "--group takes a key", "group-turns", "q", "1", "--group", "")

	r = b.ok("sequence-hold", "q", "on", "--group", "premium")
	assert.Regexp(t, `WAITING\s+premium\s+1\s+0\s+-\s+-\s+3\s+on\s`, r.stdout)
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.False(t, info.SequenceHold, "the queue's setting is untouched")
	r = b.ok("sequence-hold", "q", "queue", "--group", "premium")
	assert.Regexp(t, `WAITING\s+premium\s+1\s+0\s+-\s+-\s+3\s+-\s`, r.stdout)
	b.fails(2, "a group's setting", "sequence-hold", "q", "queue")
	b.fails(2, "--group takes a key", "sequence-hold", "q", "on", "--group", "")
}

// group-turn-size sets the queue's turn size, shown in the groups note
// and --json; a size out of 1..64 is refused.
func TestGroupTurnSizeCommand(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)
	b.fails(1, `no queue "q"`, "group-turn-size", "q", "8")
	r := b.ok("group-turn-size", "q", "8", "--create")
	assert.Contains(t, r.stderr, "turn size 8")
	info, err := c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, 8, info.GroupTurnSize)
	b.fails(2, "not a turn size", "group-turn-size", "q", "0")
	b.fails(2, "not a turn size", "group-turn-size", "q", "65")
	b.ok("group-turn-size", "q", "1")
	info, err = c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.Equal(t, 1, info.GroupTurnSize)
}
