package worqr

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/inspect"
	"github.com/worqr/worqr/internal/store"
)

// MaxGroupsRead bounds the groups one Groups call reads: that many of the
// groups whose turn may come (the next served first), and that many of
// those with tasks in flight.
const MaxGroupsRead = 1000

// GroupInfo is one group of a queue (see Group), for operators.
type GroupInfo struct {
	// Key is the group's key, as given to Group.
	Key string
	// Turns is its turns in a row (SetGroupTurns): its own, else the
	// queue's default for groups, else 1.
	Turns int
	// Hold is its own sequence-hold setting (SetGroupSequenceHold).
	Hold GroupHold
	// Waiting counts its tasks waiting.
	Waiting int64
	// Running is the slots its tasks in flight hold (a task enqueued with
	// Weight holds its weight), a dead worker's until they are reclaimed.
	Running int64
	// Limit is its concurrency limit: its own (SetGroupConcurrency), else
	// the queue's default for groups; 0 for none.
	Limit int
	// Rate and Per are its rate limit, Rate starts in any window of Per:
	// its own (SetGroupRate), else the queue's default for groups; 0 for
	// none.
	Rate int
	Per  time.Duration
	// HeldBack is set when tasks wait in the group but it is at its limit,
	// has used up its rate, or is a sequence held on its dead task:
	// dequeues pass it over until one of its processes ends, until
	// RateHeldUntil, or until DeadTask's dead letter is requeued or
	// deleted.
	HeldBack bool
	// RateHeldUntil is, for a group held back by its rate, when its next
	// start is allowed (by the Redis clock); zero otherwise.
	RateHeldUntil time.Time
	// DeadTask is, for a sequence held on its dead task (see
	// SetSequenceHold), the id of that task, whose dead letter requeued
	// or deleted lets the group go on; "" otherwise. Such a group starts
	// nothing, with tasks waiting (HeldBack) or not.
	DeadTask string
}

// GroupsReport is what Groups read of a queue's groups.
type GroupsReport struct {
	Queue string
	// Ready counts the groups whose turn may come and Running those with
	// tasks in flight: all of them, not only those read.
	Ready, Running int64
	// DefaultLimit is every group's default concurrency limit
	// (SetGroupConcurrency with group ""), 0 for none, and DefaultRate and
	// DefaultPer their default rate limit (SetGroupRate), 0 for none.
	DefaultLimit int
	DefaultRate  int
	DefaultPer   time.Duration
	// DefaultTurns is every group's default turns (SetGroupTurns with
	// group ""), 1 when none was set.
	DefaultTurns int
	// TurnSize is the most tasks one turn of a group starts
	// (SetGroupTurnSize), 1 when none was set.
	TurnSize int
	// TopWaiting are the groups with the most tasks waiting, most first
	// (then by key), TopRunning those whose tasks in flight hold the most
	// slots, and HeldBack those held back at their limit or by their rate
	// (not those in HeldOnDead),
	// the most tasks waiting first, and HeldOnDead the sequences held on
	// their dead task (see SetSequenceHold), with tasks waiting or not,
	// the most tasks waiting first: up to n of each.
	TopWaiting, TopRunning, HeldBack, HeldOnDead []GroupInfo
	// Partial is set when the queue had more groups than one call reads
	// (MaxGroupsRead of each kind): a group not read is not ranked.
	Partial bool
}

// Groups reads a queue's groups for operators, in one script call: the
// top n groups by tasks waiting and by slots running, and the groups held
// back by their concurrency limit or rate limit, with the counts of groups ready and
// running (QueueInfo counts them too). It reads the groups with tasks in
// flight and the next MaxGroupsRead groups to be served, MaxGroupsRead of
// each at most, counting each one's waiting tasks in O(log N): its cost
// does not grow with the number of groups past that bound
// (GroupsReport.Partial says when it was reached). n must be in
// 1..MaxGroupsRead (ErrInvalidOptions).
func (c *Client) Groups(ctx context.Context, queue string, n int) (GroupsReport, error) {
	const op = "groups"
	if err := c.validate(ctx, op, queue); err != nil {
		return GroupsReport{}, err
	}
	if n < 1 || n > MaxGroupsRead {
		return GroupsReport{}, fmt.Errorf("worqr: %s %q: n %d not in 1..%d: %w", op, queue, n, MaxGroupsRead, ErrInvalidOptions)
	}
	st, err := c.store.GroupsRead(ctx, queue, MaxGroupsRead)
	if err != nil {
		return GroupsReport{}, c.fail(op, queue, err)
	}
	r := GroupsReport{Queue: queue, Ready: st.Ready, Running: st.Running, DefaultLimit: st.DefaultLimit,
		DefaultRate: st.DefaultRate, DefaultPer: st.DefaultPer, DefaultTurns: cmp.Or(st.DefaultTurns, 1), TurnSize: cmp.Or(st.TurnSize, 1), Partial: st.Partial}
	infos := func(gs []store.GroupState) []GroupInfo {
		var out []GroupInfo
		for _, g := range gs {
			out = append(out, groupInfo(g, st))
		}
		return out
	}
	t := inspect.TopGroups(st.Groups, n)
	r.TopWaiting, r.TopRunning, r.HeldBack, r.HeldOnDead = infos(t.Waiting), infos(t.Running), infos(t.HeldBack), infos(t.HeldOnDead)
	return r, nil
}

func groupInfo(g store.GroupState, st store.GroupsState) GroupInfo {
	gi := GroupInfo{Key: g.Key, Waiting: g.Waiting, Running: g.Running, Limit: cmp.Or(g.Limit, st.DefaultLimit),
		Rate: g.Rate, Per: g.Per, HeldBack: inspect.HeldBack(g), DeadTask: g.DeadTask,
		Turns: cmp.Or(g.Turns, st.DefaultTurns, 1), Hold: GroupHold(g.Hold)}
	if gi.Rate == 0 {
		gi.Rate, gi.Per = st.DefaultRate, st.DefaultPer
	}
	if g.RateUntil > 0 {
		gi.RateHeldUntil = time.UnixMicro(g.RateUntil)
	}
	return gi
}
