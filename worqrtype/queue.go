package worqrtype

import (
	"fmt"
	"time"
)

// WorkerInfo describes a live worker.
type WorkerInfo struct {
	ID string
	// LeaseLeftMillis is how long its lease has left, by the Redis clock.
	LeaseLeftMillis int64
	// Host is the name of the machine the worker's program runs on, PID
	// the program's operating-system process id, and StartedAt when the
	// worker registered, by the Redis clock: as it registered them, so
	// empty or zero for a worker of a release that did not.
	Host      string
	PID       int
	StartedAt time.Time
	// Slots are its handler slots in each queue it handles, by queue
	// name: a Handle's Concurrency, or the size of the HandleQueues pool
	// that serves the queue (shared with the pool's other queues). The
	// worker records them as Handle or HandleQueues starts on a queue and
	// StopWork ends one, so they are known for the workers of every
	// process; none for a queue served with StartWork alone, or by a
	// worker of a release that did not record them.
	Slots []QueueSlots
}

// QueueSlots is how many handler slots a worker has in a queue (see
// WorkerInfo.Slots).
type QueueSlots struct {
	Queue string // the queue's name
	Slots int    // the handlers that may run at once there
}

// ScheduleInfo is what Redis keeps of one periodic schedule of a queue
// (see Worker.Periodic): the schedule itself lives in the workers that
// register it.
type ScheduleInfo struct {
	Name  string
	Queue string
	// LastTick is the last tick enqueued, by the Redis clock, or when the
	// schedule was first seen if none was yet.
	LastTick time.Time
	// TaskID is the id of the last tick's task, "" if none is known (no
	// tick yet, or one enqueued by a release that did not keep it).
	TaskID string
	// NextTick is the schedule's tick after LastTick, as the worker that
	// enqueued the last tick (or registered the schedule) computed it: the
	// schedule lives in the workers, so this is what the fleet last said.
	// Zero if unknown (a schedule with no more ticks, or one last ticked
	// by a release that did not keep it).
	NextTick time.Time
}

// QueueInfo is a queue's counts and controls.
type QueueInfo struct {
	Name string
	// Waiting, Delayed, InFlight and Dead count its tasks in each state.
	Waiting, Delayed, InFlight, Dead int64
	// InFlightWeight is the sum of the weights of its tasks in flight
	// (see Weight): the slots in use, which the concurrency limit counts.
	// It equals InFlight unless weighted tasks are in flight.
	InFlightWeight int64
	// Paused is set between Pause and Resume.
	Paused bool
	// Concurrency is its limit across the fleet (SetConcurrency); 0 for
	// none. A stored limit the scripts cannot read (not a whole number in
	// 0..MaxLimit: written by hand, or by an older worqr) is not enforced
	// and reads as 0; Client.Check reports it (UnreadableControls).
	Concurrency int
	// Rate starts (dequeues) per Per at most (SetRateLimit); 0 for no
	// limit. An unreadable stored value reads as 0, as for Concurrency.
	Rate int
	Per  time.Duration
	// WaitingSince is when the task that has waited longest became due
	// (its enqueue, or the end of its delay or backoff), by the Redis
	// clock; zero when none waits. Its age is what a backlog alert
	// watches: a queue that keeps up has a young oldest task however long
	// it is. Of a queue's groups, the next task of each of the first
	// MaxGroupsRead to be served counts.
	WaitingSince time.Time
	// Groups counts its groups (see Group) with tasks waiting or in
	// flight, and GroupsReady those of them not held back at their
	// limit. Waiting counts grouped tasks too.
	Groups, GroupsReady int64
	// GroupConcurrency is every group's default limit
	// (SetGroupConcurrency with group ""); 0 for none.
	GroupConcurrency int
	// SequenceHold says the queue holds its sequences on a dead task
	// (SetSequenceHold), and GroupsHeldOnDead counts the groups so held
	// until their dead letter is requeued or deleted.
	SequenceHold     bool
	GroupsHeldOnDead int64
	// Gatherings counts its open gatherings of tasks enqueued with an
	// aggregation key (see Aggregate), and Gathering the tasks they hold,
	// which Waiting does not count. Aggregation is the settings in force
	// (SetAggregation), defaults filled in.
	Gatherings, Gathering int64
	Aggregation           AggregateSettings
	// GroupTurns is every group's default turns in a row (SetGroupTurns
	// with group ""); 1 when none was set.
	GroupTurns int
	// GroupTurnSize is the most tasks one turn of a group starts
	// (SetGroupTurnSize); 1 when none was set.
	GroupTurnSize int
}

// AggregateSettings say when a queue's gatherings are flushed (see
// Aggregate).
type AggregateSettings struct {
	// MaxSize is the most tasks an aggregated task gathers: the enqueue
	// of the MaxSize-th flushes the gathering. 0 means
	// DefaultAggregateMaxSize.
	MaxSize int
	// MaxDelay is the longest a gathering waits from its first task
	// before it is flushed with the tasks it has, a whole number of
	// milliseconds. 0 means DefaultAggregateMaxDelay.
	MaxDelay time.Duration
}

// GatheringInfo is one open gathering of a queue (see Aggregate), for
// operators.
type GatheringInfo struct {
	// Key is its aggregation key.
	Key string
	// Tasks counts the tasks it holds.
	Tasks int64
	// Bytes is the size they take in the aggregated task's payload
	// (Process.Task), which the enqueuing client's MaxTaskSize bounds; -1
	// when the queue keeps no size for it (its next task measures it).
	Bytes int64
	// Deadline is when MaxDelay flushes it, by the Redis clock.
	Deadline time.Time
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

// GroupHold is a group's own sequence-hold setting (SetGroupSequenceHold).
type GroupHold int

// A group's own sequence-hold settings.
const (
	// GroupHoldAsQueue: the queue's setting (SetSequenceHold) applies to
	// the group, the default.
	GroupHoldAsQueue GroupHold = iota
	// GroupHoldOn holds the group's sequence on a dead task, whatever the
	// queue's setting.
	GroupHoldOn
	// GroupHoldOff never holds it.
	GroupHoldOff
)

// String is "queue", "on" or "off".
func (h GroupHold) String() string {
	switch h {
	case GroupHoldOn:
		return "on"
	case GroupHoldOff:
		return "off"
	case GroupHoldAsQueue:
		return "queue"
	}
	return fmt.Sprintf("GroupHold(%d)", int(h))
}

// PoolSlots is a snapshot of the handler slots of one Handle or
// HandleQueues call of a worker: a pool (Handle's is a pool of one
// queue). Busy + Free is at most Size: the slots of handlers that
// returned while their outcomes are still being written, past the bound
// on those writes, are neither.
type PoolSlots struct {
	// Worker is the id of the worker the pool is of.
	Worker string
	// Queues are the queues the pool serves, in the order given: one for
	// Handle.
	Queues []string
	// Size is the pool's slots (HandleOptions.Concurrency,
	// PoolOptions.Concurrency).
	Size int
	// Busy counts the handlers running.
	Busy int
	// Free counts the slots a handler could start in now.
	Free int
}

// AggregateMember is one task an aggregated task gathers.
type AggregateMember struct {
	// TaskID is the id its Enqueue returned.
	TaskID string
	// Task is its payload.
	Task []byte
}
