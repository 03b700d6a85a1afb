package store

import (
	"bytes"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/worqr/worqr/worqrtype"
)

// This file lays out worqr's values in Redis, for Go and Lua alike
// (keys.go names the keys and what each holds; stats.go lays out the stats
// hash): it is the one place in Go that knows the layout, and the common
// helpers (internal/scripts/common/) are the one place in Lua, which follows
// it. Each kind of value has letters of its own: within a kind a letter means
// one thing, and the same letter in another kind (a header field, an outcome
// record's field, a process state, an event's first byte, a stats value name)
// is unrelated to it.
//
// A task entry (an element of a waiting list, a member of the delayed set
// and of the dead letters, and the tail of a process record) is a header,
// ':', then the payload, byte-exact:
//
//	<id>[,<letter><value>]...:<payload>
//
// The id is the task's id in hex (see Task.ID); then fields, each a letter
// and a value free of ',' and ':', in any order, so the header ends at the
// first ':'. A reader skips the fields it does not know. The letters
// (HeaderFields), with the code that writes or reads them:
//
//	a  starts: the times the task was started (dequeued) and its process
//	   ended; absent before the first. In a process record the entry is
//	   kept as it waited, so the attempt that process runs is one more
//	   (ParseProc and Dequeue count it in); the count is raised when the
//	   task goes back to waiting, or to the dead letters (entry_ran).
//	f  failures: the starts that failed (a handler error, a retry), which
//	   the attempt budget counts; a start whose holder died, or gave the
//	   task back, is not one (retry.lua).
//	m  the task's own attempt budget; -1 for no limit (EnqueueArgs).
//	t  the task's own handler timeout, ms (EnqueueArgs).
//	w  the task's weight, 2 or more: the concurrency slots it holds in
//	   flight; absent, 1 (EnqueueArgs; entry_weight).
//	p  its priority, "h" high or "l" low: the list it waits in; absent,
//	   normal (Store.Enqueue; list_of).
//	R  how long its outcome is kept once it ends, ms (EnqueueArgs;
//	   retain).
//	u  the sha1, hex, of the unique key it holds while alive (enqueue.lua;
//	   release_unique). A key held for a time is not in the entry.
//	d  when it became due, if not at its enqueue: Unix µs by the Redis
//	   clock, hex; a delayed task, or one sent back to wait, for the wait
//	   stats (entry_due; Task.Since).
//	r  deaths: the times a holder died soon after starting it, counted by
//	   the poison-pill guard (return_to_front).
//	h  "1" once the task was held for the guard's window: its deaths are
//	   no longer counted (return_to_front).
//	D  a dead letter's: when it died, Unix ms by the Redis clock.
//	W  a dead letter's: the worker that held it.
//	K  a dead letter's: its reason, why it died (such as "poison").
//	k  the task's kind, a name a Router dispatches on (such as
//	   "email.welcome"; EnqueueArgs); absent, none. The scripts carry
//	   it as they carry the payload; cancel_waiting.lua matches it.
//	T  the trace context the task carries (a W3C traceparent, say) from
//	   the enqueue that made it (EnqueueArgs; worqr's Tracer); absent,
//	   none. Only Go reads it.
//	g  the task's group key, escaped (EscapeGroup): the task waits in its
//	   group and starts under its group's limit (group_lib().push,
//	   take_turns, groups_settle in the scripts); absent, none.
//	F  the workflow step the task runs, '<workflow id>.<step name>'
//	   (EnqueueArgs.Flow): its end leaves a notice for the workflow
//	   (flow_notice); absent, none.
//	e  the error the task's last failed attempt recorded (the last one
//	   that recorded any), escaped: '%', ',' and ':' as %XX
//	   (field_escape in common/failures.lua; Task.LastError). Absent,
//	   none; a dead letter's is in the errors hash (attempt_buried), and
//	   so is that of an entry of the earlier layout, with f but no H
//	   (see ATTEMPTS there), which Store.Dequeue reads there.
//	H  the last failed attempt in the task's attempt history,
//	   '<n>.<ended ms>.<how>.<worker>[.<error>]': n, the records the
//	   history holds, the errors hash holding the n - 1 before it
//	   ('<id>:a'); when it ended (Unix ms, Redis clock), how (see
//	   Attempt) and by which worker, escaped as e and '.' too; then its
//	   error, escaped as e, or, with no error part, e's (cut to 1,024
//	   bytes, as in ParseAttempts). Written with e after the fields an
//	   enqueue sets (attempt_added; finish.lua looks at no field after
//	   it). Absent, none; a dead letter's history is all in the errors
//	   hash.
//	A  an aggregated task's: the tasks it gathers (AGG.flush in
//	   common/aggregation.lua); its payload is each of them, in order, as
//	   '<id>,<payload length, decimal>:<payload>' (ParseAggregated).
//	   Absent for any other task.
//
// A dead letter requeued loses a, f, r, h, u, D, W, K, e and H (dead_revived),
// and keeps its kind and its trace context.
//
// A process record (a value of the procs hash, under its pid) is one state
// byte (State), the owner's id (OwnerLen bytes), then the task entry.
//
// A retained task's outcome record (a value of the results hash, under its
// id; see Result, and retain in common/outcomes.lua) is
//
//	<id>,s<status>,S<started ms>,E<ended ms>,a<attempts>[,K<reason>]:<body>
//
// its letters (ResultFields) being the status ("ok" or "dead"), when its
// last attempt started and ended (Unix ms, Redis clock), the attempts, and
// the reason (dead only); the body is the handler's result, or
// the error.
//
// A progress record (a value of the progress hash) is laid out at
// ProgressRecord, an event (a message on the queue's channel) at Event.
//
// A queue's meta hash holds these fields (MetaFields):
//
//	name        the queue's name, while the queue exists
//	registered  "1" once the queue registry is known to list the queue
//	tid         the last task id given out (µs, decimal; next_task_ids)
//	seq         the last process id given out (µs, decimal; start_procs)
//	paused      any value: the queue is paused
//	limit       the concurrency limit (a whole number; control_value)
//	rate, per   the rate limit: at most rate starts in any per ms
//	wx          the extra weight in flight: w - 1 summed over the
//	            processes (entry_weight); absent when 0
//	glimit      every group's concurrency limit but for those with
//	            their own (GroupLimits; control_value)
//	gp          the normal list's turn among the groups (µs, Redis
//	            clock; dequeue.lua's take_turns)
//	grate       every group's rate limit but for those with their own
//	            ('<n>/<per ms>'; group_rate in common/groups.lua)
//	grx         "1" once a group had a rate of its own (GroupLimits)
//	ghold       "1" while the queue holds its sequences on a dead task
//	            (sequence_died in common/groups.lua)
//	gdead       how many groups are so held ('<group>:d' in
//	            GroupLimits); absent when 0
//	amax        the most tasks an aggregated task gathers (AGG.settings
//	            in common/aggregation.lua); absent, 100
//	adelay      the longest a gathering waits from its first task, ms;
//	            absent, 60000
//	ghx         "1" once a group had a sequence-hold setting of its
//	            own ('<group>:h' in GroupLimits)
//	gturns      every group's turns in a row but for those with their
//	            own (dequeue.lua's group_turns)
//	gtx         "1" once a group had turns of its own ('<group>:t' in
//	            GroupLimits)
//	gsize       the most tasks one turn of a group starts (dequeue.lua's
//	            take_turns); absent, 1
//
// Deleting a queue removes its name, registration and controls; the rest
// of the hash stays while processes of the queue remain, then goes, or, if
// the counters run ahead of the clock, expires once it passes them
// (drop_meta_if_gone).
//
// A worker's info (a value of the winfo hash, under its id; register.lua)
// is what it said of itself when it registered, three lines:
//
//	<pid>\n<started, Unix ms, Redis clock>\n<host>
//
// its program's operating-system process id, its start, and its host,
// last since it may hold anything (WorkerLease).
//
// A worker's slots record (a value of the wslots hash, under its id;
// worker_slots.lua) is, for each queue it handles, one after the other,
//
//	<slots>,<name length, bytes>:<name>
//
// its handler slots there and the queue's name, prefixed by its length
// since it may hold anything (QueueSlots; decodeWorkerSlots).
//
// A schedule's tick record (a value of the ticks hash, under the
// schedule's name; tick.lua) is
//
//	<task id>[,<next tick, Unix ms>]
//
// the id of the task of its last tick enqueued ("" when not known) and,
// when known, the tick after it (ScheduleState).
//
// A workflow's flow hash holds these fields (WorkflowFields):
//
//	state      running, succeeded, failed or cancelled
//	created    when it was created (Unix ms, Redis clock)
//	ended      when it ended (Unix ms, Redis clock); absent while running
//	open       the count of its steps that have not ended
//	dead       the count of its steps that died and were not revived
//	cancelled  the count of its steps whose task was cancelled
//	revived    the count of its steps' deaths undone (absent: none), so
//	           that a read of its state in pages (WorkflowState) that a
//	           revival went between is made again
//	keep       how long its keys are kept once it ends (ms)
//	sum        the checksum of its steps, which tells a repeated create
//	           from another workflow of the same id (wf_create.lua)
//
// A step's state (a value of the workflow's steps hash; StepStates) is w
// (waiting for its parents), r (ready: to be enqueued), q (queued: its
// task is in its queue), ok (its task succeeded), dead (its task died) or
// x (cancelled: its task was, or a parent's end means it never runs).
//
// The stats hash (laid out at the top of stats.go: the current minute's
// values 'c:<name>' and 'cur', the minute they hold; slot stamps m<i> and
// h<i>, and the slots' values '<slot>:<name>') names its values with
// letters too: the counters (StatCounters: e enqueued, s started, f
// finished, r retried, q requeued, d dead, k reclaimed, x cancelled), the
// histogram buckets w<k> (wait) and u<k> (run), and the sums ws and us.
// Some mean another thing than the header letter: "r" counts retries (in a
// header, deaths), "d" dead letters (a due time), "f" finishes (failures),
// "u<k>" runs (a unique key), "h<i>" an hour (a healthy hold). They keep
// their names because they are stored: a stats hash holds seven days of
// them, under names the README documents, and each client version's
// scripts write the names they know, so a rename would make an upgraded
// reader miss the counts stored, leave the old fields behind for good
// (stats_roll clears only the names it knows) and, while a fleet is
// upgraded, split one counter between two names. The header letters are
// stored too, in every task entry, and are not renamed either.

// HeaderFields are the letters of a task entry's header fields, as laid
// out above: the scripts and the store write no others
// (TestRecordLayoutIsDocumented).
const HeaderFields = "afmtwpRudrhDWKkTgFeHA"

// ResultFields are the letters of an outcome record's fields.
const ResultFields = "sSEaK"

// MetaFields are the fields of a queue's meta hash.
var MetaFields = []string{"name", "registered", "tid", "seq", "paused", "limit", "rate", "per", "wx", "glimit", "gp", "grate", "grx", "ghold", "gdead", "amax", "adelay", "ghx", "gturns", "gtx", "gsize"}

// WorkflowFields are the fields of a workflow's flow hash.
var WorkflowFields = []string{"state", "created", "ended", "open", "dead", "cancelled", "revived", "keep", "sum"}

// StepStates are the states of a workflow's steps.
var StepStates = []string{"w", "r", "q", "ok", "dead", "x"}

// OwnerLen is the width of a worker id in process records: worker ids are
// UUID strings, and scripts slice the owner out at this width.
const OwnerLen = 36

// Task is a task entry as stored.
type Task struct {
	// ID is the task's id: the Redis clock in microseconds when it was
	// enqueued (bumped by one when that was taken), in hex.
	ID string
	// Attempts counts the times the task was started: in a Proc, with
	// the attempt the process runs.
	Attempts int
	// Failures counts the starts that failed (a handler error or a
	// retry), which the attempt budget counts.
	Failures int
	// MaxAttempts is the task's own attempt budget, 0 if it has none,
	// negative for no limit.
	MaxAttempts int
	// Timeout is the task's own handler timeout, 0 if it has none.
	Timeout time.Duration
	// Weight is the task's weight (the concurrency slots it holds in
	// flight), 0 if it has none: one slot.
	Weight int
	// Due is when the task became due, if not at its enqueue (Unix µs,
	// Redis clock): a delayed task, or one sent back to wait. 0 if none.
	Due int64
	// Kind is the task's kind, "" if it has none.
	Kind string
	// Trace is the trace context the task carries, "" if none.
	Trace string
	// Group is the task's group key (unescaped), "" if it has none.
	Group string
	// Flow is the workflow step the task runs, '<workflow id>.<step>',
	// "" if none.
	Flow string
	// LastError is the error the task's last failed attempt recorded,
	// "" if none (a dead letter's is in the errors hash).
	LastError string
	// Aggregated is the number of tasks an aggregated task gathers (its
	// payload holds them: ParseAggregated); 0 for any other task.
	Aggregated int
	// Died (Unix ms), Worker and Reason (why it died) are set on a dead
	// letter.
	Died   int64
	Worker string
	Reason string
	// Payload is the task's bytes, or their first bytes when a listing
	// cut them (see CutTask).
	Payload string
	// Size is the payload's whole size in bytes: len(Payload) unless it
	// was cut.
	Size int
}

// EnqueuedAt is when the task was enqueued, by the Redis clock, read from
// its id: exact to the microsecond unless more than one task per
// microsecond was enqueued, when later ones read a little late.
func (t Task) EnqueuedAt() time.Time {
	us, err := parseHex(t.ID, 63)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMicro(int64(us))
}

// Since is when the task began to wait (Unix µs, Redis clock), for the
// wait stats: its due time if it has one, else its enqueue (its id); 0 for
// an entry worqr did not write.
func (t Task) Since() int64 {
	if t.Due > 0 {
		return t.Due
	}
	us, err := parseHex(t.ID, 63)
	if err != nil {
		return 0
	}
	return int64(us)
}

// ParseTask decodes a task entry. It reports false for a value worqr did
// not write (such as a payload queued by a worqr before task ids).
func ParseTask(e string) (Task, bool) {
	return parseTask(e)
}

// TaskOrRaw is the task an entry holds, or, for an entry worqr did not
// write (queued before task ids, or by something else), the entry itself
// as the payload: shown and handed over as it is.
func TaskOrRaw(e string) Task {
	if t, ok := parseTask(e); ok {
		return t
	}
	return Task{Payload: e, Size: len(e)}
}

// CutTask is TaskOrRaw of an entry whose payload a script cut to its
// first bytes (entry_cut in common/entries.lua), with the whole payload's
// size.
func CutTask(e string, size int64) Task {
	t := TaskOrRaw(e)
	t.Size = int(size)
	return t
}

func parseTask(e string) (Task, bool) {
	header, payload, ok := strings.Cut(e, ":")
	if !ok {
		return Task{}, false
	}
	id, fields, _ := strings.Cut(header, ",")
	if id == "" {
		return Task{}, false
	}
	t := Task{ID: id, Payload: payload, Size: len(payload)}
	for fields != "" {
		var f string
		f, fields, _ = strings.Cut(fields, ",")
		if len(f) < 2 {
			continue
		}
		var err error
		switch v := f[1:]; f[0] {
		case 'a':
			t.Attempts, err = strconv.Atoi(v)
		case 'm':
			t.MaxAttempts, err = strconv.Atoi(v)
		case 'f':
			t.Failures, err = strconv.Atoi(v)
		case 'w':
			t.Weight, err = strconv.Atoi(v)
		case 't':
			var ms int64
			ms, err = strconv.ParseInt(v, 10, 64)
			t.Timeout = time.Duration(ms) * time.Millisecond
		case 'd':
			t.Due, err = strconv.ParseInt(v, 16, 64)
		case 'D':
			t.Died, err = strconv.ParseInt(v, 10, 64)
		case 'W':
			t.Worker = v
		case 'K':
			t.Reason = v
		case 'k':
			t.Kind = v
		case 'T':
			t.Trace = v
		case 'g':
			t.Group, err = UnescapeGroup(v)
		case 'F':
			t.Flow = v
		case 'e':
			t.LastError, err = UnescapeGroup(v)
		case 'A':
			t.Aggregated, err = strconv.Atoi(v)
		}
		if err != nil {
			return Task{}, false
		}
	}
	return t, true
}

// ParseAggregated splits an aggregated task's payload into its members
// (see the 'A' header field), in the order they were enqueued. It reports
// false for a payload not so laid out.
func ParseAggregated(payload []byte) ([]worqrtype.AggregateMember, bool) {
	var out []worqrtype.AggregateMember
	for len(payload) > 0 {
		comma := bytes.IndexByte(payload, ',')
		if comma <= 0 {
			return nil, false
		}
		colon := bytes.IndexByte(payload[comma:], ':')
		if colon < 0 {
			return nil, false
		}
		n, err := strconv.Atoi(string(payload[comma+1 : comma+colon]))
		start := comma + colon + 1
		if err != nil || n < 0 || n > len(payload)-start {
			return nil, false
		}
		out = append(out, worqrtype.AggregateMember{TaskID: string(payload[:comma]), Task: payload[start : start+n : start+n]})
		payload = payload[start+n:]
	}
	return out, true
}

// EncodeAggregated lays members out as an aggregated task's payload, as
// the scripts do (ParseAggregated reads it).
func EncodeAggregated(ms []worqrtype.AggregateMember) []byte {
	var out []byte
	for _, m := range ms {
		out = append(out, m.TaskID...)
		out = append(out, ',')
		out = strconv.AppendInt(out, int64(len(m.Task)), 10)
		out = append(out, ':')
		out = append(out, m.Task...)
	}
	return out
}

// State is what has happened to an in-flight process, as its record's
// first byte says.
type State byte

// Process states.
const (
	Active    State = 'a' // being worked on
	Cancelled State = 'c' // its task was cancelled
	Deleted   State = 'd' // its queue was deleted
	Lost      State = 'l' // (states.lua only) not this worker's, or its lease is gone
)

// Proc is a process record.
type Proc struct {
	PID   string
	State State
	Owner string
	Task  Task
	// Progress is the process's last progress report (Procs only), nil
	// if none.
	Progress *ProgressRecord
	// Plain is set when the task has no weight, group or priority
	// (Dequeue and HandedProc only): a retry of it at once may go to
	// retry_plain.lua (see RetryRef.Plain).
	Plain bool
}

// plainEntry tells whether an entry's header has no weight, group or
// priority field: the test retry_plain.lua makes again (its find of
// ',[wgp]') before it takes a batch from retry.lua.
func plainEntry(e string) bool {
	h, _, _ := strings.Cut(e, ":")
	return !strings.Contains(h, ",w") && !strings.Contains(h, ",g") && !strings.Contains(h, ",p")
}

// Seq is the process id as a number: ids count up in dequeue order.
func (p Proc) Seq() uint64 { return PIDSeq(p.PID) }

// PIDSeq is a process id as a number.
func PIDSeq(pid string) uint64 {
	n, _ := parseHex(pid, 64)
	return n
}

// parseHex is strconv.ParseUint(s, 16, bits), the same value and error,
// with a quick path for the ids worqr writes (a few per task: PIDSeq,
// Task.Since, Task.EnqueuedAt), which never overflow.
func parseHex(s string, bits int) (uint64, error) {
	if s == "" || len(s) > bits/4 {
		return strconv.ParseUint(s, 16, bits)
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return strconv.ParseUint(s, 16, bits)
		}
		n = n<<4 | uint64(c)
	}
	return n, nil
}

// ParseProc decodes a process record; false for one worqr did not write.
func ParseProc(pid, v string) (Proc, bool) {
	if len(v) < 1+OwnerLen {
		return Proc{}, false
	}
	t, ok := ParseTask(v[1+OwnerLen:])
	if !ok {
		return Proc{}, false
	}
	t.Attempts++ // the attempt this process runs
	return Proc{PID: pid, State: State(v[0]), Owner: v[1 : 1+OwnerLen], Task: t}, true
}

// Outcome is what the finish and requeue scripts found of a process.
type Outcome int8

// Outcomes, as the scripts return them.
const (
	// LeaseGone: the worker's lease on the queue is not live; nothing
	// was changed.
	LeaseGone Outcome = -1
	// NotOwned: no such process of this worker (reclaimed, given back,
	// already ended); nothing was changed.
	NotOwned Outcome = 0
	// WasActive: the process was active, and was finished or requeued.
	WasActive Outcome = 1
	// WasCancelled: its task had been cancelled; it was removed, never
	// requeued.
	WasCancelled Outcome = 2
	// WasDeleted: its queue had been deleted; it was removed, never
	// requeued.
	WasDeleted Outcome = 3
	// WasReleased: as WasActive, for a workflow step's task whose
	// workflow shares the queue's slot and recorded the step's end in the
	// same script (finish.lua): it left no notice to carry.
	WasReleased Outcome = 4
)

// EventKind is the kind of a queue event.
type EventKind byte

// Event kinds, as the first byte of a message.
const (
	EventWork      EventKind = 'w'
	EventCancel    EventKind = 'c'
	EventDelete    EventKind = 'd'
	EventSchedule  EventKind = 's'
	EventOutcome   EventKind = 'o'
	EventNoOutcome EventKind = 'x'
	EventProgress  EventKind = 'p'
	EventHandOff   EventKind = 'h'
)

// Event is a message on a queue's channel:
//
//	w<count>[:<worker id>,<worker id>...]  tasks were added; the ids name the runtimes to wake (none: all)
//	c<task id>,<task id>...                 these in-flight tasks were cancelled
//	s<due µs>                               a delayed task is due then (Unix µs, Redis clock)
//	o<task id>                              a retained task's outcome was recorded
//	x<task id>,<task id>...                 these retained tasks were cancelled before they started: no outcome will come
//	p<task id>,<progress record>            a task in flight reported progress (see ProgressRecord)
//	d<last pid>                             the queue was deleted; processes up to this id are affected
//	h<worker id>,<pid>,<task entry>         a task was enqueued into a process of this worker's idle runtime
type Event struct {
	Kind EventKind
	// Count is, for work, how many tasks were added.
	Count int64
	// To is, for work, the comma-separated ids of the runtimes to wake;
	// empty wakes every runtime. For a hand-off it is the worker whose
	// runtime the process was made for.
	To string
	// PID and Entry are, for a hand-off, the process made and its task
	// entry (see HandedProc).
	PID, Entry string
	// TaskIDs are, for cancel, the ids of the cancelled tasks that were in
	// flight; for no outcome, those of the retained tasks cancelled before
	// they started; for outcome and progress, the task's.
	TaskIDs []string
	// UpTo is, for delete, the last process id of the queue when the
	// script ran: processes dequeued later are not affected.
	UpTo uint64
	// Due is, for schedule, when a delayed task is due (Unix µs, Redis
	// clock).
	Due int64
	// Progress is, for progress, the report (TaskIDs holds its task's id).
	Progress ProgressRecord
}

// ParseEvent decodes a message published by the scripts.
func ParseEvent(msg string) (Event, bool) {
	if msg == "" {
		return Event{}, false
	}
	switch EventKind(msg[0]) {
	case EventWork:
		count, to, _ := strings.Cut(msg[1:], ":")
		n, err := strconv.ParseInt(count, 10, 64)
		return Event{Kind: EventWork, Count: n, To: to}, err == nil
	case EventCancel:
		if len(msg) == 1 {
			return Event{}, false
		}
		return Event{Kind: EventCancel, TaskIDs: strings.Split(msg[1:], ",")}, true
	case EventDelete:
		upTo, err := strconv.ParseUint(msg[1:], 16, 64)
		return Event{Kind: EventDelete, UpTo: upTo}, err == nil
	case EventOutcome:
		if len(msg) == 1 {
			return Event{}, false
		}
		return Event{Kind: EventOutcome, TaskIDs: []string{msg[1:]}}, true
	case EventNoOutcome:
		if len(msg) == 1 {
			return Event{}, false
		}
		return Event{Kind: EventNoOutcome, TaskIDs: strings.Split(msg[1:], ",")}, true
	case EventSchedule:
		due, err := strconv.ParseInt(msg[1:], 10, 64)
		return Event{Kind: EventSchedule, Due: due}, err == nil && due > 0
	case EventProgress:
		id, rec, _ := strings.Cut(msg[1:], ",")
		p, ok := ParseProgress(rec)
		return Event{Kind: EventProgress, TaskIDs: []string{id}, Progress: p}, ok && id != ""
	case EventHandOff:
		// Only the named worker reads the entry (HandedProc): every other
		// subscriber hears the event too, and ignores it.
		worker, rest, ok := strings.Cut(msg[1:], ",")
		pid, entry, ok2 := strings.Cut(rest, ",")
		return Event{Kind: EventHandOff, To: worker, PID: pid, Entry: entry}, ok && ok2 && worker != "" && PIDSeq(pid) > 0
	}
	return Event{}, false
}

// HandedProc is the process a hand-off event carries, as Dequeue would
// have returned it: a new task's first attempt, with no error before it.
func (e Event) HandedProc() Proc {
	t := TaskOrRaw(e.Entry)
	t.Attempts++ // the attempt this process runs
	return Proc{PID: e.PID, State: Active, Owner: e.To, Task: t, Plain: plainEntry(e.Entry)}
}

// WorkMessage is the work event for count tasks that wakes every runtime.
func WorkMessage(count int64) string { return "w" + strconv.FormatInt(count, 10) }

// taskIDs are the ids of n tasks enqueued together, the first given in
// hex. They are slices of one string, written once: a batch's ids cost
// two allocations, not one an id (an id kept keeps its batch's few bytes
// an id).
func taskIDs(first string, n int) ([]string, bool) {
	base, err := strconv.ParseUint(first, 16, 64)
	if err != nil || n <= 0 {
		return []string{}, err == nil
	}
	buf := make([]byte, 0, n*hexLen(base+uint64(n-1)))
	for i := range n {
		buf = strconv.AppendUint(buf, base+uint64(i), 16)
	}
	all := unsafe.String(unsafe.SliceData(buf), len(buf))
	ids := make([]string, n)
	for i := range ids {
		w := hexLen(base + uint64(i))
		ids[i], all = all[:w], all[w:]
	}
	return ids, true
}

// hexLen is the number of hex digits of v.
func hexLen(v uint64) int {
	return max((bits.Len64(v)+3)/4, 1)
}

// Result is a retained task's outcome record.
type Result struct {
	ID       string
	Status   string // "ok" or "dead"
	Started  int64  // Unix ms, Redis clock (from the process id)
	Ended    int64
	Expires  int64
	Attempts int
	Reason   string // why it died (dead only)
	Body     string // the handler's result, or the error (dead)
}

// ParseResult decodes an outcome record.
func ParseResult(v string) (Result, bool) {
	header, body, ok := strings.Cut(v, ":")
	if !ok {
		return Result{}, false
	}
	id, fields, _ := strings.Cut(header, ",")
	r := Result{ID: id, Body: body}
	for fields != "" {
		var f string
		f, fields, _ = strings.Cut(fields, ",")
		if len(f) < 2 {
			continue
		}
		var err error
		switch v := f[1:]; f[0] {
		case 's':
			r.Status = v
		case 'S':
			r.Started, err = strconv.ParseInt(v, 10, 64)
		case 'E':
			r.Ended, err = strconv.ParseInt(v, 10, 64)
		case 'a':
			r.Attempts, err = strconv.Atoi(v)
		case 'K':
			r.Reason = v
		}
		if err != nil {
			return Result{}, false
		}
	}
	return r, id != "" && r.Status != ""
}

// ProgressRecord is a task's last progress report, a value of the progress
// hash (under the task's id):
//
//	<pid>,<percent>,<ms>:<note>
//
// pid is the process that reported it, ms when (Unix ms, Redis clock).
type ProgressRecord struct {
	PID     string
	Percent int
	At      int64 // Unix ms, Redis clock
	Note    string
}

// ParseProgress decodes a progress record.
func ParseProgress(v string) (ProgressRecord, bool) {
	header, note, ok := strings.Cut(v, ":")
	if !ok {
		return ProgressRecord{}, false
	}
	parts := strings.Split(header, ",")
	if len(parts) != 3 || parts[0] == "" {
		return ProgressRecord{}, false
	}
	pct, err1 := strconv.Atoi(parts[1])
	at, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return ProgressRecord{}, false
	}
	return ProgressRecord{PID: parts[0], Percent: pct, At: at, Note: note}, true
}

// EscapeGroup is a group key as tasks and the group keys store it: '%',
// ',', ':' and the bytes up to ' ' and from 0x7f as %XX (hex), so that it
// fits in a header field and never holds the byte that ends a group in
// the group waiting set (see G.member in common/groups.lua).
func EscapeGroup(g string) string {
	var b strings.Builder
	for i := 0; i < len(g); i++ {
		c := g[i]
		if c <= ' ' || c >= 0x7f || c == '%' || c == ',' || c == ':' {
			b.WriteByte('%')
			b.WriteByte("0123456789ABCDEF"[c>>4])
			b.WriteByte("0123456789ABCDEF"[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// UnescapeGroup undoes EscapeGroup, and the scripts' field_escape of an
// error in a header (the 'e' field).
func UnescapeGroup(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("group %q: a cut escape", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("group %q: %w", s, err)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}
