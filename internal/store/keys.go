package store

import "strings"

// Keys names every Redis key and channel of one prefix.
//
// All keys of a queue share the hash tag {q:<escaped name>}, and all
// worker-level keys share the tag {r}, so every script touches one slot and
// runs unchanged on Redis Cluster. Queue names are never parsed back out of
// keys in normal operation (registries hold the raw names), so any byte may
// appear in a name; only '{', '}' and '%' are escaped, because a '}' inside
// the tag would end it early. The consistency check alone recovers names
// from keys (Parse), since it cannot trust the registries.
type Keys struct {
	prefix string
}

// NewKeys names the keys under prefix.
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

// Prefix is the prefix every key and channel starts with.
func (k Keys) Prefix() string { return k.prefix }

// QueueKeys are the keys and the event channel of one queue.
type QueueKeys struct {
	Waiting string // LIST of task entries; the right end is the front (next out)
	High    string // LIST of high-priority task entries, taken before Waiting
	Low     string // LIST of low-priority task entries, taken after Waiting
	Procs   string // HASH pid -> process record (see Proc)
	Leases  string // ZSET worker id -> lease expiry (ms, Redis clock)
	Meta    string // HASH the queue's name, id counters and controls (see MetaFields)
	Idle    string // ZSET worker id -> when its runtime found the queue empty
	Delayed string // ZSET task entry -> when it is due (µs, Redis clock)
	Dead    string // ZSET dead letter (entry with D, W, K fields) -> when it died (ms)
	Errors  string // HASH dead letter's id -> its error; '<id>:a' -> a task's older attempts (see ATTEMPTS in common/failures.lua)
	// Results holds the outcomes of tasks that asked to be retained, and
	// Retained lists them by when they expire, and the retained tasks
	// that have not ended yet with the score +inf (see outcome.lua).
	Results  string // HASH task id -> outcome record
	Retained string // ZSET task id -> when its outcome expires (ms), or +inf
	// Unique holds the unique keys held (their sha1 -> the holder's task
	// id), and UniqueTTL those held for a time, by when they expire.
	Unique    string // HASH key sha1 -> task id
	UniqueTTL string // ZSET key sha1 -> expiry (ms)
	Starts    string // ZSET pid -> when it started (µs), under a rate limit
	Periodic  string // HASH schedule name -> the last tick enqueued (ms, Redis clock)
	Ticks     string // HASH schedule name -> tick record (see records.go)
	// Progress holds the last progress report of tasks in flight, written
	// only when a handler reports and removed by every script that ends a
	// process (see ProgressRecord).
	Progress string // HASH task id -> progress record
	// Stats holds the queue's counters and histograms in two rings of
	// time slots (see StatsSlot and stats_flush in common/stats.lua).
	Stats string // HASH slot stamp and '<slot>:<name>' -> count
	// The groups (see GROUPS in common/waiting.lua and docs/flow-control.md):
	// the waiting tasks of every group in one sorted set, ordered by group
	// then start order, the groups whose turn may come, the slots each
	// group's processes hold, the groups' own concurrency and rate limits,
	// and the starts of the groups under a rate limit in its window.
	GroupWait    string // ZSET (all scored 0) '<group>\0<class><rank><entry>'
	GroupReady   string // ZSET group -> its turn (µs, Redis clock)
	GroupRunning string // HASH group -> slots its processes hold
	GroupLimits  string // HASH group -> its own concurrency limit, '<group>:r' -> its own rate '<n>/<per ms>', '<group>:d' -> the dead task its sequence is held on, '<group>:h' -> its own sequence-hold setting ('1' on, '0' off), '<group>:t' -> its own turns, '<group>:u' -> '<turns used>/<its turn>' in the middle of its run
	GroupStarts  string // ZSET (all scored 0) '<group>\0<start µs, 16 hex digits><task id>', under group rate limits
	// Flows holds the notices of workflow tasks that ended (finish.lua,
	// bury.lua, the cancel scripts, delete.lua), until their workflow has
	// recorded them (see internal/flows).
	Flows string // ZSET '<workflow>.<step>,<task id>,<ok|dead|cancelled|revived>' -> when written (µs)
	// The gatherings of tasks enqueued with an aggregation key (see
	// AGG.flush in common/aggregation.lua): the tasks gathered, of every key,
	// the deadline of each open gathering and the bytes its tasks take in an
	// aggregated task's payload.
	Gather     string // ZSET (all scored 0) '<aggregation key>\0<entry>'
	GatherDue  string // ZSET aggregation key -> its flush deadline (µs, Redis clock)
	GatherSize string // HASH aggregation key -> its tasks' bytes as members ('<id>,<length>:<payload>' each)
	Channel    string // pub/sub channel for work, schedule, cancel and delete events
}

var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// Queue names the keys of one queue.
func (k Keys) Queue(name string) QueueKeys {
	base := k.prefix + ":{q:" + tagEscaper.Replace(name) + "}:"
	return QueueKeys{
		Waiting:      base + "waiting",
		High:         base + "high",
		Low:          base + "low",
		Procs:        base + "procs",
		Leases:       base + "leases",
		Meta:         base + "meta",
		Idle:         base + "idle",
		Delayed:      base + "delayed",
		Dead:         base + "dead",
		Errors:       base + "errors",
		Results:      base + "results",
		Retained:     base + "retained",
		Unique:       base + "unique",
		UniqueTTL:    base + "uniquettl",
		Starts:       base + "starts",
		Periodic:     base + "periodic",
		Ticks:        base + "ticks",
		Progress:     base + "progress",
		Stats:        base + "stats",
		GroupWait:    base + "gwait",
		GroupReady:   base + "gready",
		GroupRunning: base + "grunning",
		GroupLimits:  base + "glimits",
		GroupStarts:  base + "gstarts",
		Flows:        base + "flows",
		Gather:       base + "gather",
		GatherDue:    base + "gatherdue",
		GatherSize:   base + "gathersize",
		Channel:      base + "events",
	}
}

// all are the queue's keys that hold data (not the channel).
func (q QueueKeys) all() []string {
	return []string{q.Waiting, q.High, q.Low, q.Procs, q.Leases, q.Meta, q.Idle, q.Delayed, q.Dead, q.Errors, q.Results,
		q.Retained, q.Unique, q.UniqueTTL, q.Starts, q.Periodic, q.Ticks, q.Progress, q.Stats, q.GroupWait, q.GroupReady,
		q.GroupRunning, q.GroupLimits, q.GroupStarts, q.Flows, q.Gather, q.GatherDue, q.GatherSize}
}

// groups are the group keys, in the order the scripts take them after
// their own (see set_lists in common/waiting.lua).
func (q QueueKeys) groups() []string {
	return []string{q.GroupWait, q.GroupReady, q.GroupRunning, q.GroupLimits}
}

// Queues is the SET of known queue names.
func (k Keys) Queues() string { return k.prefix + ":{r}:queues" }

// Workers is the ZSET of worker ids scored by registry lease expiry.
func (k Keys) Workers() string { return k.prefix + ":{r}:workers" }

// WorkerInfo is the HASH of what each registered worker said of itself,
// by worker id (the worker info of records.go).
func (k Keys) WorkerInfo() string { return k.prefix + ":{r}:winfo" }

// WorkerSlots is the hash of each live worker's handler slots per queue
// (worker_slots.lua), in the registry's slot with its info.
func (k Keys) WorkerSlots() string { return k.prefix + ":{r}:wslots" }

// Reclaiming is the ZSET of dead workers a peer is reclaiming, scored by
// when its claim runs out (see expired.lua).
func (k Keys) Reclaiming() string { return k.prefix + ":{r}:reclaiming" }

// WorkerQueues is the SET of queues a worker serves or held a lease in.
func (k Keys) WorkerQueues(id string) string { return k.prefix + ":{r}:wq:" + id }

// KeyKind is what a key under the prefix is, for the consistency check.
type KeyKind int

// Kinds of key under the prefix.
const (
	KeyUnknown      KeyKind = iota // not worqr's
	KeyRegistry                    // the queue or worker registry
	KeyWorkerQueues                // a worker's queue set; the value is its id
	KeyQueue                       // a queue's key; the value is its name
	KeyWorkflow                    // a workflow's key; the value is its id
)

// Parse says what a key under the prefix is. Queue names are recovered
// from the hash tag, and accepted only if valid reports the name valid
// and the name's own keys include the key: anything else is unknown.
func (k Keys) Parse(key string, valid func(name string) bool) (KeyKind, string) {
	rest, ok := strings.CutPrefix(key, k.prefix+":")
	if !ok {
		return KeyUnknown, ""
	}
	switch {
	case key == k.Queues() || key == k.Workers() || key == k.Reclaiming() || key == k.WorkerInfo() || key == k.WorkerSlots():
		return KeyRegistry, ""
	case strings.HasPrefix(key, k.WorkerQueues("")):
		if id := key[len(k.WorkerQueues("")):]; id != "" {
			return KeyWorkerQueues, id
		}
		return KeyUnknown, ""
	}
	if id, ok := k.workflowOf(rest); ok {
		return KeyWorkflow, id
	}
	tag, ok := strings.CutPrefix(rest, "{q:")
	if !ok {
		return KeyUnknown, ""
	}
	end := strings.IndexByte(tag, '}')
	if end < 0 {
		return KeyUnknown, ""
	}
	name, ok := unescapeTag(tag[:end])
	if !ok || !valid(name) {
		return KeyUnknown, ""
	}
	for _, own := range k.Queue(name).all() {
		if key == own {
			return KeyQueue, name
		}
	}
	return KeyUnknown, ""
}

// unescapeTag undoes the escaping of a queue name in its hash tag ('%',
// '{' and '}' as %25, %7B and %7D). It reports false for text the escaping
// cannot produce.
func unescapeTag(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, !strings.ContainsAny(s, "{}")
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '{' || ch == '}':
			return "", false
		case ch != '%':
			b.WriteByte(ch)
		case strings.HasPrefix(s[i:], "%25"):
			b.WriteByte('%')
			i += 2
		case strings.HasPrefix(s[i:], "%7B"):
			b.WriteByte('{')
			i += 2
		case strings.HasPrefix(s[i:], "%7D"):
			b.WriteByte('}')
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), true
}

// globEscape quotes the characters SCAN's MATCH treats as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\^`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// WorkflowKeys are the keys and the channel of one workflow, all under the
// hash tag {wf:<id>}: a slot of the workflow's own, apart from its
// queues' (see wf_release.lua for how the two meet). Workflow ids are
// letters, digits, '-' and '_', so they need no escaping.
type WorkflowKeys struct {
	Flow    string // HASH the workflow's fields (see WorkflowFields)
	Steps   string // HASH step -> its state (see StepStates)
	IDs     string // HASH step -> the id of its task, once queued
	Left    string // HASH step -> its parents not yet ended in a way that lets it run
	Kids    string // HASH step -> its children, ',' between, '+' before one that runs whatever the step's end
	Parents string // HASH step -> its parents, ',' between
	Spec    string // HASH step -> its spec: the queue, options and payload its task is enqueued with (Go's)
	Results string // HASH step -> the result its task set
	// Freed is HASH step -> the steps its end made ready, ',' between;
	// and '@<step>' -> the byte of its kids where the next child its
	// release settles starts, while some are left (wf_release.lua
	// settles a thousand a call); and '!<step>' -> the steps its death's
	// cascade cancelled whose children it has yet to settle; and
	// '^<step>' -> the step whose death's cascade made step ready, while
	// step is ready (see docs/key-layout.md).
	Freed string
	Seen  string // HASH step -> when the last notice recorded of it was written (µs, Redis clock of its queue)
	// Order is ZSET step -> its place in the workflow's dependency order,
	// from 0, written at create, so that a part of the steps is read at a
	// cost of its own size (wf_steps.lua). A workflow created before it
	// was written has none.
	Order   string
	Channel string // pub/sub channel: 'e' when the workflow ends
}

// Workflow names the keys of one workflow.
func (k Keys) Workflow(id string) WorkflowKeys {
	base := k.prefix + ":{wf:" + id + "}:"
	return WorkflowKeys{
		Flow:    base + "flow",
		Steps:   base + "steps",
		IDs:     base + "ids",
		Left:    base + "left",
		Kids:    base + "kids",
		Parents: base + "parents",
		Spec:    base + "spec",
		Results: base + "results",
		Freed:   base + "freed",
		Seen:    base + "seen",
		Order:   base + "order",
		Channel: base + "events",
	}
}

// all are the workflow's keys, in the order its scripts take them.
func (w WorkflowKeys) all() []string {
	return []string{w.Flow, w.Steps, w.IDs, w.Left, w.Kids, w.Parents, w.Spec, w.Results, w.Freed, w.Seen, w.Order}
}

// workflowOf is the workflow id of rest, a key without its prefix, if it
// is one of a workflow's keys.
func (k Keys) workflowOf(rest string) (string, bool) {
	tag, ok := strings.CutPrefix(rest, "{wf:")
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(tag, "}")
	if !ok || id == "" {
		return "", false
	}
	key := k.prefix + ":" + rest
	for _, own := range k.Workflow(id).all() {
		if key == own {
			return id, true
		}
	}
	return "", false
}

// slot is the Redis Cluster slot of a hash tag's contents: CRC16
// (XMODEM) mod 16384.
func slot(tag string) uint16 { return crc16(0, tag) % 16384 }

// crc16 continues CRC16 (XMODEM) crc over s.
func crc16(crc uint16, s string) uint16 {
	for i := 0; i < len(s); i++ {
		crc = crc16Byte(crc, s[i])
	}
	return crc
}

// crc16Byte continues CRC16 (XMODEM) crc over b.
func crc16Byte(crc uint16, b byte) uint16 {
	return crc<<8 ^ crc16Table[byte(crc>>8)^b]
}

// crc16Table is CRC16 (XMODEM) of each byte value, a constant: a byte
// of a CRC is one lookup, not eight shifts (HomeWorkflowID tries
// thousands).
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// homeDigits are the bytes of a home suffix (see HomeWorkflowID).
const homeDigits = "0123456789abcdefghijklmnopqrstuvwxyz"

// HomeWorkflowID is base, a workflow id of at most 59 bytes, with '-'
// and four letters or digits after it, chosen so that the workflow's
// hash tag {wf:<id>} falls in queue's slot: its keys then share that
// queue's slot (its home, see WorkflowHome), and the scripts that end
// its steps' tasks in that queue record their ends too. Of the 36^4
// suffixes, some hundred fall in each slot, whatever base (see
// TestHomeSuffixesCoverEverySlot); the first found is taken, its first
// byte varying slowest: the CRC of a suffix's first bytes is shared by
// every suffix they start, so a try costs about one byte's CRC, a table
// lookup (some 16,000 tries on average, a few microseconds).
func (k Keys) HomeWorkflowID(base, queue string) string {
	want := slot("q:" + tagEscaper.Replace(queue))
	c0 := crc16(0, "wf:"+base+"-")
	const d = homeDigits
	for i := 0; i < len(d); i++ {
		c1 := crc16Byte(c0, d[i])
		for j := 0; j < len(d); j++ {
			c2 := crc16Byte(c1, d[j])
			for k := 0; k < len(d); k++ {
				c3 := crc16Byte(c2, d[k])
				for l := 0; l < len(d); l++ {
					if crc16Byte(c3, d[l])%16384 == want {
						return base + "-" + string([]byte{d[i], d[j], d[k], d[l]})
					}
				}
			}
		}
	}
	return base // every slot has suffixes: never reached
}

// WorkflowHome says whether workflow id's keys share queue's slot (a
// workflow whose id HomeWorkflowID made for that queue, or one that
// falls there by chance).
func (k Keys) WorkflowHome(id, queue string) bool {
	return slot("wf:"+id) == slot("q:"+tagEscaper.Replace(queue))
}
