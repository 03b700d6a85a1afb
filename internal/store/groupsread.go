package store

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// GroupState is one group of a queue as GroupsRead found it.
type GroupState struct {
	Key     string
	Waiting int64 // tasks waiting in the group
	Running int64 // slots its processes hold
	Limit   int   // its own concurrency limit, 0 if none
	Ready   bool  // its turn may come: not held back at its limit or rate
	// Rate and Per are its own rate limit, 0 if none.
	Rate int
	Per  time.Duration
	// RateUntil is, when it is held back by its rate, when its next start
	// is allowed (Unix µs, Redis clock), else 0.
	RateUntil int64
	// DeadTask is the id of the dead task its sequence is held on, "" if
	// none.
	DeadTask string
	// Turns is its own turns, 0 if none, and Hold its own sequence-hold
	// setting.
	Turns int
	Hold  GroupHold
}

// GroupsState is what GroupsRead read of a queue's groups.
type GroupsState struct {
	// Groups are those with processes in flight and the first scan
	// ready ones, each once.
	Groups []GroupState
	// Ready and Running count the groups ready and those with processes
	// in flight, all of them.
	Ready, Running int64
	// DefaultLimit is every group's default limit, 0 if none, and
	// DefaultRate and DefaultPer their default rate, 0 if none.
	DefaultLimit int
	DefaultRate  int
	DefaultPer   time.Duration
	// DefaultTurns is every group's default turns, 0 if none.
	DefaultTurns int
	// TurnSize is the most tasks a group's turn starts, 0 if not set.
	TurnSize int
	// Partial says a set held more groups than scan: some were not read.
	Partial bool
}

// GroupsRead reads a queue's groups for operators, in one script call
// (groups_list.lua): the groups with processes in flight and the first
// scan groups whose turn may come, at most scan of each, with their
// waiting tasks, running slots, own limits and readiness. This is the one
// place that reads the group keys for inspection.
func (s *Store) GroupsRead(ctx context.Context, queue string, scan int) (GroupsState, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRead, queue, s.scripts.GroupsList, []string{k.GroupWait, k.GroupReady, k.GroupRunning, k.GroupLimits, k.Meta},
		[]string{strconv.Itoa(scan)})
	if err != nil {
		return GroupsState{}, err
	}
	vals, err := res.ToArray()
	if err == nil && (len(vals) < 8 || (len(vals)-8)%11 != 0) {
		err = fmt.Errorf("groups_list.lua answered %d values", len(vals))
	}
	if err != nil {
		return GroupsState{}, err
	}
	var head [8]int64
	for i := range head {
		if head[i], err = vals[i].AsInt64(); err != nil {
			return GroupsState{}, err
		}
	}
	st := GroupsState{Partial: head[0] == 1, Ready: head[1], Running: head[2], DefaultLimit: int(head[3]),
		DefaultRate: int(head[4]), DefaultPer: time.Duration(head[5]) * time.Millisecond, DefaultTurns: int(head[6]), TurnSize: int(head[7])}
	for i := 8; i < len(vals); i += 11 {
		raw, err := vals[i].ToString()
		if err != nil {
			return GroupsState{}, err
		}
		key, err := UnescapeGroup(raw)
		if err != nil {
			key = raw // not written by worqr: shown as stored (Client.Check reports the keys it cannot read)
		}
		var n [7]int64
		for j := range n {
			if n[j], err = vals[i+1+j].AsInt64(); err != nil {
				return GroupsState{}, err
			}
		}
		dead, err := vals[i+8].ToString()
		if err != nil {
			return GroupsState{}, err
		}
		turns, err := vals[i+9].AsInt64()
		if err != nil {
			return GroupsState{}, err
		}
		hold, err := vals[i+10].ToString()
		if err != nil {
			return GroupsState{}, err
		}
		g := GroupState{Key: key, Waiting: n[0], Running: n[1], Limit: int(n[2]), Ready: n[3] == 1,
			Rate: int(n[4]), Per: time.Duration(n[5]) * time.Millisecond, RateUntil: n[6], DeadTask: dead, Turns: int(turns)}
		switch hold {
		case "1":
			g.Hold = GroupHoldOn
		case "0":
			g.Hold = GroupHoldOff
		}
		st.Groups = append(st.Groups, g)
	}
	return st, nil
}

// Gathering is one open gathering of tasks under an aggregation key, for
// operators (see gather_list.lua).
type Gathering struct {
	Key string
	// Deadline is when its MaxDelay flushes it (µs, Redis clock).
	Deadline int64
	// Tasks counts the tasks it holds.
	Tasks int64
	// Bytes is what they take in an aggregated task's payload; -1 when not
	// kept (a gathering from before sizes were).
	Bytes int64
}

// Gatherings reads a queue's open gatherings in deadline order: up to
// limit from position start (both checked by the caller: start >= 0,
// limit >= 1), and how many are open. It reads no payload.
func (s *Store) Gatherings(ctx context.Context, queue string, start int64, limit int) ([]Gathering, int64, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRead, queue, s.scripts.GatherList, []string{k.Gather, k.GatherDue, k.GatherSize},
		[]string{strconv.FormatInt(start, 10), strconv.Itoa(limit)})
	if err != nil {
		return nil, 0, err
	}
	vals, err := res.ToArray()
	if err == nil && (len(vals) < 1 || (len(vals)-1)%4 != 0) {
		err = fmt.Errorf("gather_list.lua answered %d values", len(vals))
	}
	if err != nil {
		return nil, 0, err
	}
	open, err := vals[0].AsInt64()
	if err != nil {
		return nil, 0, err
	}
	out := make([]Gathering, 0, (len(vals)-1)/4)
	for i := 1; i < len(vals); i += 4 {
		var g Gathering
		var due float64
		if g.Key, err = vals[i].ToString(); err == nil {
			if due, err = vals[i+1].AsFloat64(); err == nil {
				if g.Tasks, err = vals[i+2].AsInt64(); err == nil {
					g.Bytes, err = vals[i+3].AsInt64()
				}
			}
		}
		if err != nil {
			return nil, 0, fmt.Errorf("gather_list.lua: %w", err)
		}
		g.Deadline = int64(due)
		out = append(out, g)
	}
	return out, open, nil
}
