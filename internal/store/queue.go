package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/scripts"
)

// MaxTasksPerScript bounds the tasks of one enqueue script call; larger
// batches are split and pipelined in the same round trip.
const MaxTasksPerScript = 1000

// EnqueueArgs are the enqueue options the store acts on.
type EnqueueArgs struct {
	// Front puts the tasks at the front of the queue, in their order,
	// instead of at the back.
	Front bool
	// DueAt (Unix µs, Redis clock) and Delay (from the Redis clock's now)
	// put the tasks in the delayed set until the later of the two.
	DueAt int64
	Delay time.Duration
	// MaxAttempts is the tasks' own attempt budget (0: the queue's;
	// negative: no limit, stored as -1).
	MaxAttempts int
	// Timeout is the tasks' own handler timeout (0: the queue's).
	Timeout time.Duration
	// Retain keeps the tasks' outcomes this long after they end (0: not
	// at all).
	Retain time.Duration
	// Weight is each task's weight: the concurrency slots it holds in
	// flight (0 or 1: one).
	Weight int
	// Priority puts the tasks in their level's list: "h" (high), "l"
	// (low), or "" (normal).
	Priority string
	// Unique is a unique key (one task only): the task is added only if
	// no task holds it; UniqueTTL holds it for that long from now rather
	// than while the task lives.
	Unique    string
	UniqueTTL time.Duration
	// Kind is the tasks' kind ("": none), checked by the caller: free of
	// ',' and ':'.
	Kind string
	// Persistent marks the tasks as held for a window already (header
	// field 'h'), so that the poison-pill guard never counts a death on
	// them (see return_to_front in common/processes.lua).
	Persistent bool
	// Trace is the tasks' trace context ("": none), checked by the
	// caller: free of ',' and ':'.
	Trace string
	// Group is the tasks' group key ("": none), checked by the caller
	// (not empty when set; stored escaped, see EscapeGroup).
	Group string
	// Flow is the workflow step the tasks run, '<workflow id>.<step>'
	// ("": none), checked by the caller: free of ',' and ':'.
	Flow string
	// Aggregate is the aggregation key the tasks gather under ("": none),
	// checked by the caller: free of NUL bytes. The tasks wait in the
	// queue's gathering of that key until it is flushed into one task.
	Aggregate string
}

// fields are the header fields every task enqueued with args gets.
func (args EnqueueArgs) fields() string {
	var fields string
	if args.MaxAttempts != 0 {
		fields += ",m" + strconv.Itoa(max(args.MaxAttempts, -1))
	}
	if args.Timeout > 0 {
		fields += ",t" + strconv.FormatInt(max(args.Timeout.Milliseconds(), 1), 10)
	}
	if args.Retain > 0 {
		fields += ",R" + strconv.FormatInt(max(args.Retain.Milliseconds(), 1), 10)
	}
	if args.Weight > 1 {
		fields += ",w" + strconv.Itoa(args.Weight)
	}
	if args.Persistent {
		fields += ",h1"
	}
	if args.Kind != "" {
		fields += ",k" + args.Kind
	}
	if args.Trace != "" {
		fields += ",T" + args.Trace
	}
	if args.Group != "" {
		fields += ",g" + EscapeGroup(args.Group)
	}
	if args.Flow != "" {
		fields += ",F" + args.Flow
	}
	return fields
}

// MaxHandOffPayload is the largest payload an enqueue may hand straight
// to an idle runtime, in the event that every subscriber of the queue's
// channel hears (see enqueue.lua); a larger task waits in the queue for
// the runtime's dequeue.
const MaxHandOffPayload = 2048

// handOff is enqueue.lua's hand-off argument for a call of these tasks:
// "1" for a single small task (the script hands it off only if it is due
// now), else "0".
func handOff(chunk [][]byte) string {
	if len(chunk) == 1 && len(chunk[0]) <= MaxHandOffPayload {
		return "1"
	}
	return "0"
}

// plainOne reports whether a call of these tasks is one that
// enqueue_one.lua does as enqueue.lua would: a single task due now, with
// no unique key, group, aggregation key, retained outcome or workflow step.
func plainOne(chunk [][]byte, keys []UniqueKey, args EnqueueArgs) bool {
	return len(chunk) == 1 && !keyed(keys) && args.DueAt == 0 && args.Delay == 0 &&
		args.Group == "" && args.Aggregate == "" && args.Retain <= 0 && args.Flow == ""
}

// UniqueKey is a task's unique key: the task is added only if no task
// holds Key, held while the task lives (TTL 0) or for TTL from now.
type UniqueKey struct {
	Key string
	TTL time.Duration
}

// Enqueue adds payloads to a queue, 1,000 per script call, all in one
// round trip, and registers the queue if it is new. It returns the tasks'
// ids, in order; on error those of the calls that failed are empty. With
// args.Unique (one task only) held by a task, it returns the holder's id
// and ErrDuplicate.
func (s *Store) Enqueue(ctx context.Context, queue string, payloads [][]byte, args EnqueueArgs) ([]string, error) {
	var keys []UniqueKey
	if args.Unique != "" {
		keys = make([]UniqueKey, len(payloads))
		keys[0] = UniqueKey{Key: args.Unique, TTL: args.UniqueTTL}
	}
	ids, dup, err := s.EnqueueKeyed(ctx, queue, payloads, keys, args)
	if err == nil && slices.Contains(dup, true) {
		return ids, ErrDuplicate
	}
	return ids, err
}

// EnqueueKeyed is Enqueue with a unique key per task (keys[i] for
// payloads[i], Key "" for none; keys nil for no key at all; args.Unique
// is not read). A task whose key is held, by a task already enqueued or
// by an earlier one of the call, is left out: its id is the holder's and
// dup[i] is set. The other tasks are added.
func (s *Store) EnqueueKeyed(ctx context.Context, queue string, payloads [][]byte, keys []UniqueKey, args EnqueueArgs) (ids []string, dup []bool, err error) {
	k := s.queueKeys(queue)
	// Tasks go 1,000 a script call, except a batch for the front, which
	// goes in one: calls pipelined in order would each put their tasks
	// ahead of the last call's.
	per := MaxTasksPerScript
	if args.Front {
		per = max(len(payloads), 1)
	}
	calls := make([]*enqueueCall, 0, (len(payloads)+per-1)/per)
	// The first call carries the client's stats counts, if due.
	carry := s.stats.take(queue)
	counts := carry.counts()
	whole := false
	for start := 0; start < len(payloads); start += per {
		end := min(start+per, len(payloads))
		var chunkKeys []UniqueKey
		if keys != nil {
			chunkKeys = keys[start:end]
		}
		c := s.enqueueCall(k, queue, payloads[start:end], chunkKeys, args, counts, len(payloads) == 1)
		calls = append(calls, c)
		whole = whole || c.buf != nil
		counts = ""
	}
	var results []rueidis.RedisResult
	var sendErr error
	if sendErr = s.enter(ctx, OpEnqueue, queue); sendErr == nil {
		if whole {
			// A large batch goes bulkCalls calls a round trip, so that
			// pipelines stay of bounded size.
			// A round trip with a failed call ends the batch: the later
			// ones, sent on a new connection, would store the batch's tail
			// without its head, so that what a failed call stored is always
			// a prefix of the batch, as one pipeline's is.
			for from := 0; from < len(calls) && sendErr == nil; from += s.bulkCalls {
				var got []rueidis.RedisResult
				got, sendErr = s.bulk.Do(ctx, queue, calls[from:min(from+s.bulkCalls, len(calls))])
				results = append(results, got...)
				if anyFailed(got) {
					break
				}
			}
		} else {
			results = scripts.ExecMulti(ctx, s.rdb, sendable(calls))
		}
	}
	// The counts went with the first call, if that was sent.
	headErr := sendErr
	if len(results) > 0 {
		headErr = nil
	}
	s.stats.sent(carry, headErr, firstResult(results))
	if len(results) == 0 {
		return nil, nil, sendErr
	}
	ids, dup = nil, make([]bool, len(payloads))
	if len(results) > 1 || len(payloads) > per {
		ids = make([]string, len(payloads))
	}
	unregistered := false
	firstErr := sendErr // the calls not sent, if any
	for i, res := range results {
		start := i * per
		n := min(per, len(payloads)-start)
		r, err := enqueued(res, n)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		s.idHints.seen(queue, r.next)
		if ids == nil {
			ids = r.ids // the one call's: not copied
		} else {
			copy(ids[start:], r.ids)
		}
		for j, holder := range r.dups {
			ids[start+j], dup[start+j] = holder, true
		}
		if added := n - len(r.dups); added > 0 {
			s.stats.enqueued(queue, added)
		}
		unregistered = unregistered || r.unregistered
	}
	if ids == nil { // the one call failed
		ids = make([]string, len(payloads))
	}
	if unregistered {
		if err := s.RegisterQueue(ctx, queue); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return ids, dup, firstErr
}

// anyFailed reports whether any of a round trip's results is an error.
func anyFailed(results []rueidis.RedisResult) bool {
	for _, r := range results {
		if r.Error() != nil {
			return true
		}
	}
	return false
}

// noKey stands for a task without a unique key in enqueue.lua's list of
// the tasks' keys' sha1s.
var noKey = strings.Repeat("-", sha1.Size*2)

// enqueueCall is enqueue.lua's call for one chunk of tasks of a queue.
// A call of whole entries (see enqueue.lua) has its entries in buf, each
// starting with a placeholder id of width digits, until sendBulk gives
// them their ids and completes its arguments.
type enqueueCall struct {
	scripts.Call
	buf   []byte
	lens  []int // each entry's length in buf
	width int
}

// enqueueCall is enqueue.lua's call for one chunk of tasks of a queue,
// with their unique keys (nil for none), carrying the client's stats
// counts ("" for none). alone says the call is the only one of its
// pipeline: only then may it go to enqueue_one.lua, since a pipeline of
// two scripts, one of them not in the server's cache, runs the other
// first, and the failed calls are sent again after it.
func (s *Store) enqueueCall(k QueueKeys, queue string, chunk [][]byte, keys []UniqueKey, args EnqueueArgs, counts string, alone bool) *enqueueCall {
	front := "0"
	if args.Front {
		front = "1"
	}
	due, delay := strconv.FormatInt(args.DueAt, 10), strconv.FormatInt(args.Delay.Microseconds(), 10)
	// The header fields every task of the call gets.
	fields := args.fields()
	list := k.Waiting
	switch args.Priority {
	case "h":
		list, fields = k.High, fields+",ph"
	case "l":
		list, fields = k.Low, fields+",pl"
	}
	hand := handOff(chunk)
	// A plain task goes to the script that carries only what it needs.
	if alone && plainOne(chunk, keys, args) {
		return &enqueueCall{Call: scripts.Call{
			Script: s.scripts.EnqueueOne,
			Keys:   []string{list, k.Meta, k.Idle, k.Stats, k.Leases, k.Procs, k.Waiting, k.High, k.Low, k.GroupReady},
			Args:   []string{k.Channel, queue, front, fields, hand, counts, string(chunk[0])},
		}}
	}
	// own[i] is the header field task i gets for its unique key, if it is
	// held while the task lives.
	var shas, ttls strings.Builder
	var own []string
	if keyed(keys) {
		own = make([]string, len(chunk))
		shas.Grow(len(noKey) * len(keys))
		ttls.Grow(2 * len(keys))
		for i, key := range keys {
			if i > 0 {
				ttls.WriteByte(',')
			}
			if key.Key == "" {
				shas.WriteString(noKey)
				ttls.WriteByte('0')
				continue
			}
			sum := sha1.Sum([]byte(key.Key))
			sha := hex.EncodeToString(sum[:])
			shas.WriteString(sha)
			if key.TTL > 0 {
				ttls.WriteString(strconv.FormatInt(max(key.TTL.Milliseconds(), 1), 10))
			} else {
				ttls.WriteByte('0')
				own[i] = ",u" + sha
			}
		}
	}
	c := &enqueueCall{}
	argv := make([]string, 0, 13+len(chunk))
	if args.Aggregate != "" {
		hand = "0"
	}
	argv = append(argv, k.Channel, queue, front, due, delay, fields, shas.String(), ttls.String(), hand, counts, "", args.Aggregate, strconv.Itoa(s.aggLimit))
	c.Call = scripts.Call{Script: s.scripts.Enqueue, Keys: []string{list, k.Meta, k.Idle, k.Delayed, k.Unique, k.UniqueTTL, k.Stats, k.Leases, k.Procs, k.Waiting, k.High, k.Low, k.Retained, k.GroupWait, k.GroupReady, k.Gather, k.GatherDue, k.GatherSize}, Args: argv}
	// Tasks due now, for the back, go as whole entries, so that the script
	// need not build them; a single task goes as its payload, for the
	// hand-off.
	if !args.Front && args.DueAt == 0 && args.Delay == 0 && len(chunk) > 1 {
		c.width = len(strconv.FormatInt(max(s.clock.Now().UnixMicro(), 1), 16))
		size := 0
		for i, t := range chunk {
			size += c.width + len(fields) + 1 + len(t)
			if own != nil {
				size += len(own[i])
			}
		}
		c.buf, c.lens = make([]byte, 0, size), make([]int, len(chunk))
		for i, t := range chunk {
			at := len(c.buf)
			for range c.width {
				c.buf = append(c.buf, '0')
			}
			c.buf = append(c.buf, fields...)
			if own != nil {
				c.buf = append(c.buf, own[i]...)
			}
			c.buf = append(c.buf, ':')
			c.buf = append(c.buf, t...)
			c.lens[i] = len(c.buf) - at
		}
		return c
	}
	// One copy of the chunk's bytes into one string, sliced per task,
	// rather than an allocation per task.
	size := 0
	for _, t := range chunk {
		size += len(t)
	}
	var all strings.Builder
	all.Grow(size)
	for _, t := range chunk {
		all.Write(t)
	}
	joined := all.String()
	for _, t := range chunk {
		c.Args = append(c.Args, joined[:len(t)])
		joined = joined[len(t):]
	}
	return c
}

// sendable are the script calls of calls.
func sendable(calls []*enqueueCall) []scripts.Call {
	out := make([]scripts.Call, len(calls))
	for i, c := range calls {
		out[i] = c.Call
	}
	return out
}

// sendBulk sends the calls of several Enqueues of one queue, in order, in
// one round trip, and returns each one's replies. The store sends one
// such batch per queue at a time (s.bulk), so that the ids it gives the
// whole entries here count up in the order the scripts run: a call whose
// ids are below those of one run before it would have its entries built
// anew by the script.
func (s *Store) sendBulk(ctx context.Context, queue string, items [][]*enqueueCall) ([][]rueidis.RedisResult, error) {
	var all []scripts.Call
	now := uint64(max(s.clock.Now().UnixMicro(), 0))
	for _, calls := range items {
		for _, c := range calls {
			if c.buf != nil {
				c.fill(s.idHints.reserve(queue, now, len(c.lens)))
			}
			all = append(all, c.Call)
		}
	}
	results := scripts.ExecMulti(ctx, s.rdb, all)
	out := make([][]rueidis.RedisResult, len(items))
	for i, calls := range items {
		out[i], results = results[:len(calls)], results[len(calls):]
	}
	return out, nil
}

// fill writes the ids counting up from first into the entries and
// completes the call's arguments. Ids of another width than the
// placeholders' are not written: the script is given zeros, which it
// never takes, and gives the ids itself.
func (c *enqueueCall) fill(first uint64) {
	given := strconv.FormatUint(first, 16)
	if len(given) != c.width || len(strconv.FormatUint(first+uint64(len(c.lens))-1, 16)) != c.width {
		given = strings.Repeat("0", c.width)
	} else {
		at := 0
		var id []byte
		for i, n := range c.lens {
			id = strconv.AppendUint(id[:0], first+uint64(i), 16)
			copy(c.buf[at:], id)
			at += n
		}
	}
	c.Args[10] = given
	// The entries are read as a string in place, not copied: buf is
	// written no more once its ids are in.
	joined := unsafe.String(unsafe.SliceData(c.buf), len(c.buf))
	c.buf = nil
	for _, n := range c.lens {
		c.Args = append(c.Args, joined[:n])
		joined = joined[n:]
	}
}

// keyed reports whether any of keys is set.
func keyed(keys []UniqueKey) bool {
	for _, k := range keys {
		if k.Key != "" {
			return true
		}
	}
	return false
}

// enqueueReply is enqueue.lua's reply for a call of n tasks.
type enqueueReply struct {
	ids          []string
	dups         map[int]string // index in the call -> the holder's id
	unregistered bool
	next         uint64 // one past the last id the call took
}

// enqueued reads enqueue.lua's reply for a call of n tasks.
func enqueued(res rueidis.RedisResult, n int) (enqueueReply, error) {
	vals, err := res.ToArray()
	if err != nil {
		return enqueueReply{}, err
	}
	if len(vals) < 3 {
		return enqueueReply{}, fmt.Errorf("enqueue.lua answered %d values", len(vals))
	}
	flag, err := vals[0].AsInt64()
	if err != nil {
		return enqueueReply{}, err
	}
	first, err := vals[1].ToString()
	if err != nil {
		return enqueueReply{}, err
	}
	d, err := vals[2].AsInt64()
	if err != nil {
		return enqueueReply{}, err
	}
	if int64(len(vals)) != 3+2*d {
		return enqueueReply{}, fmt.Errorf("enqueue.lua answered %d values for %d duplicates", len(vals), d)
	}
	ids, ok := taskIDs(first, n)
	if !ok {
		return enqueueReply{}, fmt.Errorf("enqueue.lua answered id %q", first)
	}
	base, _ := strconv.ParseUint(first, 16, 64)
	r := enqueueReply{ids: ids, unregistered: flag == 1, next: base + uint64(n)}
	if d > 0 {
		r.dups = make(map[int]string, d)
	}
	for i := 3; i < len(vals); i += 2 {
		at, err := vals[i].AsInt64()
		if err != nil {
			return enqueueReply{}, err
		}
		holder, err := vals[i+1].ToString()
		if err != nil {
			return enqueueReply{}, err
		}
		if at < 1 || at > int64(n) {
			return enqueueReply{}, fmt.Errorf("enqueue.lua answered duplicate %d of %d tasks", at, n)
		}
		r.dups[int(at-1)] = holder
	}
	return r, nil
}

// EnqueueOne is one task of an EnqueueEach call.
type EnqueueOne struct {
	Queue   string
	Payload []byte
	Args    EnqueueArgs
}

// EnqueueEach enqueues single tasks, each to its queue with args of its
// own, pipelined in one round trip (one per node on a cluster), and
// registers the queues that are new. It returns each task's id (for one
// whose unique key was held, the holder's, with ErrDuplicate among the
// errors) and each one's error.
func (s *Store) EnqueueEach(ctx context.Context, tasks []EnqueueOne) ([]string, []error) {
	ids, errs := make([]string, len(tasks)), make([]error, len(tasks))
	calls := make([]scripts.Call, len(tasks))
	entered := make(map[string]error)
	for i, t := range tasks {
		if _, ok := entered[t.Queue]; !ok {
			entered[t.Queue] = s.enter(ctx, OpEnqueue, t.Queue)
		}
		var keys []UniqueKey
		if t.Args.Unique != "" {
			keys = []UniqueKey{{Key: t.Args.Unique, TTL: t.Args.UniqueTTL}}
		}
		calls[i] = s.enqueueCall(s.queueKeys(t.Queue), t.Queue, [][]byte{t.Payload}, keys, t.Args, "", len(tasks) == 1).Call
	}
	var send []scripts.Call
	var at []int
	for i, t := range tasks {
		if errs[i] = entered[t.Queue]; errs[i] == nil {
			send, at = append(send, calls[i]), append(at, i)
		}
	}
	unregistered := make(map[string]bool)
	for j, res := range scripts.ExecMulti(ctx, s.rdb, send) {
		i, q := at[j], tasks[at[j]].Queue
		r, err := enqueued(res, 1)
		switch {
		case err != nil:
			errs[i] = err
			continue
		case len(r.dups) > 0:
			ids[i], errs[i] = r.dups[0], ErrDuplicate
		default:
			ids[i] = r.ids[0]
			s.stats.enqueued(q, 1)
		}
		unregistered[q] = unregistered[q] || r.unregistered
	}
	for q, un := range unregistered {
		if !un {
			continue
		}
		if err := s.RegisterQueue(ctx, q); err != nil {
			for i, t := range tasks {
				if t.Queue == q && errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	return ids, errs
}

// firstResult is the reply of the first of several calls (none: zero).
func firstResult(results []rueidis.RedisResult) rueidis.RedisResult {
	if len(results) == 0 {
		return rueidis.RedisResult{}
	}
	return results[0]
}

// RegisterQueue adds a queue to the registry, then confirms that in the
// queue's meta hash. Until it is confirmed every enqueue asks again, so a
// failure here, or a crash, only delays registration. The order matters
// against DeleteQueue, which unregisters first and then deletes the queue:
// a queue holding tasks is never left out of the registry for good; at
// worst an empty deleted one is left in, and Queues filters those out.
func (s *Store) RegisterQueue(ctx context.Context, queue string) error {
	if err := s.enter(ctx, OpRegisterQueue, queue); err != nil {
		return err
	}
	if err := s.rdb.Do(ctx, s.b().Sadd().Key(s.keys.Queues()).Member(queue).Build().Pin()).Error(); err != nil {
		return err
	}
	return s.scripts.Registered.Exec(ctx, s.rdb, []string{s.queueKeys(queue).Meta}, nil).Error()
}

// Dequeue moves up to n tasks from the front of a queue into processes of
// worker, whose lease on the queue must be live (else ErrLeaseGone). park
// marks a Handle runtime, which parks in the idle set when it finds fewer
// tasks than it asked for. until is, when the queue's rate limit is used
// up, or when it took fewer than n and a group waits for its rate limit,
// when the next start is allowed (Unix µs, Redis clock), else 0; now is the
// Redis clock (Unix µs) the rate limit was judged by, 0 when none was.
func (s *Store) Dequeue(ctx context.Context, queue, worker string, n int, park bool) (procs []Proc, until, now int64, err error) {
	k := s.queueKeys(queue)
	p := "0"
	if park {
		p = "1"
	}
	carry := s.stats.take(queue)
	res, err := s.run(ctx, OpDequeue, queue, s.scripts.Dequeue, append([]string{k.Waiting, k.Procs, k.Leases, k.Meta, k.Idle, k.Starts, k.High, k.Low, k.Stats}, append(k.groups(), k.GroupStarts)...), []string{worker, strconv.Itoa(n), p, carry.counts()})
	s.stats.sent(carry, err, res)
	if err != nil {
		return nil, 0, 0, err
	}
	if code, err := res.AsInt64(); err == nil && code == -1 {
		return nil, 0, 0, ErrLeaseGone
	}
	vals, err := res.AsStrSlice()
	if err == nil && len(vals)%2 != 0 {
		err = fmt.Errorf("dequeue.lua answered %d values", len(vals))
	}
	if err != nil {
		return nil, 0, 0, err
	}
	until, _ = strconv.ParseInt(vals[0], 10, 64)
	now, _ = strconv.ParseInt(vals[1], 10, 64)
	out := make([]Proc, 0, len(vals)/2-1)
	var old []int // the tasks of the earlier layout, by index in out
	for i := 2; i+1 < len(vals); i += 2 {
		t := TaskOrRaw(vals[i+1])
		t.Attempts++ // the attempt this process runs
		if oldLayoutFailed(vals[i+1]) {
			old = append(old, len(out))
		}
		out = append(out, Proc{PID: vals[i], State: Active, Owner: worker, Task: t, Plain: plainEntry(vals[i+1])})
	}
	if len(old) > 0 {
		s.oldLayoutErrors(ctx, k.Errors, out, old)
	}
	s.stats.started(queue, out)
	return out, until, now, nil
}

// oldLayoutFailed says whether an entry is of the earlier layout (see
// ATTEMPTS in common/failures.lua) and failed before: it counts failures
// ('f') but carries no attempt ('H'), so its last error is in the errors
// hash under its id. An entry that failed in this layout carries its
// attempt, and one never failed counts none: neither is read there.
func oldLayoutFailed(e string) bool {
	h, _, _ := strings.Cut(e, ":")
	return strings.Contains(h, ",f") && !strings.Contains(h, ",H")
}

// oldLayoutErrors reads the last errors of the processes out[i], i in
// old, whose entries are of the earlier layout (oldLayoutFailed), from
// the errors hash, in one call: such entries are left only in queues not
// drained across the upgrade, so the usual dequeue, in one script call,
// reads nothing more. The process is the caller's: nothing but its finish,
// retry or cancel removes the error read, so reading it after the
// dequeue's script gives what that script would have. A failed read
// leaves their LastError empty rather than failing the dequeue, whose
// processes exist.
func (s *Store) oldLayoutErrors(ctx context.Context, key string, out []Proc, old []int) {
	ids := make([]string, len(old))
	for j, i := range old {
		ids[j] = out[i].Task.ID
	}
	errs, err := s.rdb.Do(ctx, s.b().Hmget().Key(key).Field(ids...).Build()).ToArray()
	if err != nil || len(errs) != len(old) {
		return
	}
	for j, i := range old {
		if v, err := errs[j].ToString(); err == nil {
			out[i].Task.LastError = v
		}
	}
}

// ProcRef names a process and the worker that holds it.
type ProcRef struct {
	Worker string
	PID    string
	// Result is the handler's result, kept when the task asked for its
	// outcome to be retained (Finish only).
	Result string
	// Kind is the task's kind, counted in the stats when it has one
	// (Finish and Retry only).
	Kind string
	// Flow is the workflow step the task runs, "<workflow id>.<step>"
	// (its entry's F field), "" for a task of no workflow (Finish only):
	// a workflow that shares the queue's slot has its keys passed, and
	// the step's end recorded in the finish.
	Flow string
}

// refKinds are the kinds of the processes' tasks, nil when none has one
// (the stats count nothing more then).
func refKinds(n int, kind func(i int) string) []string {
	var kinds []string
	for i := range n {
		if k := kind(i); k != "" {
			if kinds == nil {
				kinds = make([]string, n)
			}
			kinds[i] = k
		}
	}
	return kinds
}

// Finish deletes processes of one queue, each only if it still belongs to
// its worker and that worker's lease on the queue is live, in one script
// call. It returns one outcome per process, and the Redis clock (µs) of
// the call, the stamp of the notices it wrote for workflow steps.
func (s *Store) Finish(ctx context.Context, queue string, procs []ProcRef) ([]Outcome, int64, error) {
	k := s.queueKeys(queue)
	carry := s.stats.take(queue)
	args := make([]string, 0, 2+4*len(procs))
	pids := make([]string, len(procs))
	keys := append([]string{k.Procs, k.Leases, k.Meta, k.Errors, k.Results, k.Retained, k.Waiting, k.Idle, k.Unique, k.High, k.Low, k.Progress, k.Stats}, append(k.groups(), k.Flows)...)
	args = append(args, k.Channel, carry.counts())
	homes := map[string]string{} // workflow id -> its place among the keys' workflows, from 1
	for i, p := range procs {
		home := "0"
		if wf, _, ok := strings.Cut(p.Flow, "."); ok && s.keys.WorkflowHome(wf, queue) {
			if home, ok = homes[wf]; !ok {
				home = strconv.Itoa(len(homes) + 1)
				homes[wf] = home
				keys = append(keys, s.keys.Workflow(wf).all()...)
			}
		}
		args = append(args, p.Worker, p.PID, p.Result, home)
		pids[i] = p.PID
	}
	res, err := s.run(ctx, OpFinish, queue, s.scripts.Finish, keys, args)
	s.stats.sent(carry, err, res)
	if err != nil {
		return nil, 0, err
	}
	out, clock, err := outcomesAt("finish.lua", res, len(procs))
	if err != nil {
		return nil, 0, err
	}
	s.stats.ended(queue, false, clock, pids, refKinds(len(procs), func(i int) string { return procs[i].Kind }), out)
	return out, clock, nil
}

// Requeue puts a process's task back at the back of its queue (a retry)
// and wakes the queue, if the process still belongs to worker and its
// lease is live. A cancelled task, or one of a deleted queue, is dropped.
func (s *Store) Requeue(ctx context.Context, queue string, p ProcRef) (Outcome, error) {
	return s.stop(ctx, queue, p, "")
}

// GiveBack puts the task of a process an enqueue handed to worker (see
// EnqueueArgs) back at the front of its queue, as it was (its count of
// starts unchanged), and wakes the queue: for a runtime that could not
// start it. The outcomes are Requeue's.
func (s *Store) GiveBack(ctx context.Context, queue string, p ProcRef) (Outcome, error) {
	return s.stop(ctx, queue, p, "front")
}

// stop runs stop.lua: Requeue, or with mode "front" GiveBack.
func (s *Store) stop(ctx context.Context, queue string, p ProcRef, mode string) (Outcome, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpRequeue, queue, s.scripts.Stop, append([]string{k.Procs, k.Leases, k.Waiting, k.Meta, k.Idle, k.Unique, k.Errors, k.High, k.Low, k.Progress, k.Stats}, k.groups()...), []string{p.Worker, p.PID, k.Channel, mode})
	return outcome(res, err)
}

// CancelCount says what a cancel found.
type CancelCount struct {
	Removed int64 // waiting and delayed tasks removed
	Marked  int64 // in-flight processes marked cancelled
}

// CancelPayload cancels every task of a queue with this payload. It
// returns the notices written for the workflow tasks cancelled (see
// flow_notice in common/workflows.lua), for the caller to carry.
func (s *Store) CancelPayload(ctx context.Context, queue string, payload []byte) (CancelCount, []string, error) {
	return s.cancel(ctx, s.scripts.Cancel, queue, string(payload))
}

// CancelID cancels the task of a queue with this id, and returns the
// notice written if it is a workflow task (as CancelPayload).
func (s *Store) CancelID(ctx context.Context, queue, id string) (CancelCount, []string, error) {
	return s.cancel(ctx, s.scripts.CancelID, queue, id)
}

func (s *Store) cancel(ctx context.Context, sc *scripts.Script, queue, arg string) (CancelCount, []string, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpCancel, queue, sc, []string{k.Waiting, k.Procs, k.Delayed, k.Errors, k.Unique, k.High, k.Low, k.Stats, k.Retained, k.GroupWait, k.GroupReady, k.Flows, k.GroupLimits}, []string{k.Channel, arg})
	if err != nil {
		return CancelCount{}, nil, err
	}
	n, notices, err := countsAndNotices(res, 2, "cancel")
	if err != nil {
		return CancelCount{}, nil, err
	}
	return CancelCount{Removed: n[0], Marked: n[1]}, notices, nil
}

// countsAndNotices reads a script's answer of n counts followed by the
// notices it wrote (see flow_cancelled in common/workflows.lua).
func countsAndNotices(res rueidis.RedisResult, n int, what string) ([]int64, []string, error) {
	vals, err := res.ToArray()
	if err == nil && len(vals) < n {
		err = fmt.Errorf("%s answered %d values", what, len(vals))
	}
	if err != nil {
		return nil, nil, err
	}
	counts := make([]int64, n)
	for i := range counts {
		if counts[i], err = vals[i].AsInt64(); err != nil {
			return nil, nil, err
		}
	}
	var notices []string
	for _, v := range vals[n:] {
		s, err := v.ToString()
		if err != nil {
			return nil, nil, err
		}
		notices = append(notices, s)
	}
	return counts, notices, nil
}

// CancelSelection chooses the waiting tasks CancelWaiting removes: those
// with IDs if any, else those of Kind if set, else all.
type CancelSelection struct {
	IDs  []string
	Kind string
}

// CancelWaiting removes waiting tasks in bulk (see cancel_waiting.lua),
// looking at limit entries at most: it returns how many it removed,
// whether it left entries unlooked at, and the notices written for the
// workflow tasks removed (as CancelPayload).
func (s *Store) CancelWaiting(ctx context.Context, queue string, sel CancelSelection, limit int) (int64, bool, []string, error) {
	k := s.queueKeys(queue)
	args := []string{k.Channel, "all", strconv.Itoa(limit)}
	switch {
	case len(sel.IDs) > 0:
		args[1] = "ids"
		args = append(args, sel.IDs...)
	case sel.Kind != "":
		args[1] = "kind"
		args = append(args, sel.Kind)
	}
	res, err := s.run(ctx, OpCancel, queue, s.scripts.CancelWaiting, []string{k.Waiting, k.Errors, k.Unique, k.High, k.Low, k.Stats, k.Retained, k.GroupWait, k.GroupReady, k.Flows, k.GroupLimits}, args)
	if err != nil {
		return 0, false, nil, err
	}
	n, notices, err := countsAndNotices(res, 2, "cancel waiting")
	if err != nil {
		return 0, false, nil, err
	}
	return n[0], n[1] == 1, notices, nil
}

// DeleteQueue removes a queue from the registry, then drops its waiting
// tasks and marks its in-flight processes deleted. It returns the number
// of waiting tasks dropped and the notices written for its workflow tasks
// (delete.lua), for the caller to carry. If the second step fails the queue is put back
// in the registry (best effort) rather than hidden.
func (s *Store) DeleteQueue(ctx context.Context, queue string) (int64, []string, error) {
	if err := s.enter(ctx, OpDeleteQueue, queue); err != nil {
		return 0, nil, err
	}
	if err := s.rdb.Do(ctx, s.b().Srem().Key(s.keys.Queues()).Member(queue).Build().Pin()).Error(); err != nil {
		return 0, nil, err
	}
	k := s.queueKeys(queue)
	n, notices, err := countsAndNotices(s.scripts.Delete.Exec(ctx, s.rdb, []string{k.Waiting, k.Procs, k.Meta, k.Delayed, k.Dead, k.Errors, k.Results, k.Retained, k.Unique, k.UniqueTTL, k.Starts, k.High, k.Low, k.Periodic, k.Progress, k.Stats, k.Ticks, k.GroupWait, k.GroupReady, k.GroupLimits, k.Flows, k.GroupStarts, k.Gather, k.GatherDue, k.GatherSize}, []string{k.Channel}), 1, "delete")
	if err != nil {
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = s.rdb.Do(undo, s.b().Sadd().Key(s.keys.Queues()).Member(queue).Build().Pin()).Error()
		return 0, nil, err
	}
	return n[0], notices, nil
}

// States reports what became of a worker's processes in a queue: each
// one's state, or Lost when it is no longer the worker's (every one, once
// the lease is gone).
func (s *Store) States(ctx context.Context, queue, worker string, pids []string) ([]State, error) {
	k := s.queueKeys(queue)
	res, err := s.run(ctx, OpStates, queue, s.scripts.States, []string{k.Procs, k.Leases}, append([]string{worker}, pids...))
	if err != nil {
		return nil, err
	}
	vals, err := res.AsStrSlice()
	if err != nil {
		return nil, err
	}
	if len(vals) != len(pids) {
		return nil, fmt.Errorf("states.lua answered %d states for %d processes", len(vals), len(pids))
	}
	out := make([]State, len(vals))
	for i, v := range vals {
		out[i] = Lost
		if len(v) == 1 {
			out[i] = State(v[0])
		}
	}
	return out, nil
}

// ReleaseMode says whose processes release.lua gives back, and when.
type ReleaseMode string

// Release modes.
const (
	// ReleaseExpired: a peer reclaims a dead worker; refused while the
	// worker's lease on the queue is live.
	ReleaseExpired ReleaseMode = "expired"
	// ReleaseForce: a worker gives its own work back (StopWork, Close,
	// rejoining a fenced queue), and drops its lease.
	ReleaseForce ReleaseMode = "force"
	// ReleaseOrphans: a worker gives back the processes it holds in Redis
	// but does not know of (a dequeue whose reply was lost), keeping the
	// ones listed; its lease stays.
	ReleaseOrphans ReleaseMode = "orphans"
)

// Release is one release.lua call.
type Release struct {
	Queue  string
	Worker string
	Mode   ReleaseMode
	Keep   []string // pids to keep (ReleaseOrphans)
	// Poison is the poison-pill guard of a reclaim (ReleaseExpired). In
	// the other modes only its Window counts: a task held longer has its
	// count of deaths cleared.
	Poison Poison
}

// Poison is the poison-pill guard: a task whose holder died within Window
// of starting it Limit times goes to the dead letters (Bounds) instead of
// back to the queue. A death counts only when the holder had been up for
// Window before it started the task (Born: when it joined; zero if
// unknown) and the task was never held for Window (see release.lua). A
// Limit of 0 turns it off; a Window of 0 leaves the counts as they are.
type Poison struct {
	Limit  int
	Window time.Duration
	Born   time.Time
	Bounds DeadBounds
}

// Released is what a release did.
type Released struct {
	// Returned counts the tasks that went back to the front.
	Returned int64
	// UpTo is the last process id (as a number) the queue had given when
	// the release ran: every process of the worker up to it that it did
	// not keep was given back.
	UpTo uint64
	// Dropped counts the tasks dropped: cancelled, or of a deleted queue.
	Dropped int64
	// Buried lists the ids of the tasks the poison-pill guard sent to the
	// dead letters.
	Buried []string
	// Refused is set when mode ReleaseExpired found the lease live, and
	// LeaseLeft then says for how long it stays so.
	Refused   bool
	LeaseLeft time.Duration
	Err       error
}

func (s *Store) releaseCall(r Release) scripts.Call {
	k := s.keys.Queue(r.Queue)
	p := r.Poison
	if p.Window <= 0 {
		p.Limit = 0 // off
	}
	born := int64(0)
	if !p.Born.IsZero() {
		born = p.Born.UnixMilli()
	}
	args := append([]string{r.Worker, k.Channel, string(r.Mode), strconv.Itoa(max(p.Limit, 0)), strconv.FormatInt(p.Window.Milliseconds(), 10),
		strconv.Itoa(p.Bounds.MaxCount), strconv.FormatInt(p.Bounds.MaxAge.Milliseconds(), 10), strconv.FormatInt(born, 10)}, r.Keep...)
	return scripts.Call{Script: s.scripts.Release, Keys: append([]string{k.Waiting, k.Procs, k.Leases, k.Meta, k.Idle, k.Errors, k.Dead, k.Unique, k.Results, k.Retained, k.High, k.Low, k.Progress, k.Stats}, append(k.groups(), k.Flows)...), Args: args}
}

func released(res rueidis.RedisResult) Released {
	if n, err := res.AsInt64(); err == nil {
		return Released{Refused: true, LeaseLeft: time.Duration(-1-n) * time.Millisecond}
	}
	vals, err := res.ToArray()
	if err == nil && len(vals) < 3 {
		err = fmt.Errorf("release.lua answered %d values", len(vals))
	}
	if err != nil {
		return Released{Err: err}
	}
	n, err := vals[0].AsInt64()
	if err != nil {
		return Released{Err: err}
	}
	upTo, err := vals[1].ToString()
	if err != nil {
		return Released{Err: err}
	}
	seq, err := strconv.ParseUint(upTo, 10, 64)
	if err != nil {
		return Released{Err: fmt.Errorf("release.lua answered id %q", upTo)}
	}
	dropped, err := vals[2].AsInt64()
	if err != nil {
		return Released{Err: err}
	}
	out := Released{Returned: n, UpTo: seq, Dropped: dropped}
	for _, v := range vals[3:] {
		id, err := v.ToString()
		if err != nil {
			return Released{Err: err}
		}
		out.Buried = append(out.Buried, id)
	}
	return out
}

// ReleaseAll runs release calls pipelined, one round trip per node.
func (s *Store) ReleaseAll(ctx context.Context, rs []Release) []Released {
	calls := make([]scripts.Call, len(rs))
	for i, r := range rs {
		calls[i] = s.releaseCall(r)
	}
	out := make([]Released, len(rs))
	queue := ""
	if len(rs) == 1 {
		queue = rs[0].Queue
	}
	results, err := s.runMulti(ctx, OpRelease, queue, calls)
	for i := range out {
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i] = released(results[i])
	}
	return out
}

// ReleaseOne runs one release call.
func (s *Store) ReleaseOne(ctx context.Context, r Release) Released {
	call := s.releaseCall(r)
	res, err := s.run(ctx, OpRelease, r.Queue, call.Script, call.Keys, call.Args)
	if err != nil {
		return Released{Err: err}
	}
	return released(res)
}

// Queues lists the registered queues that exist (their meta record holds
// their name): a deleted queue may linger in the registry.
func (s *Store) Queues(ctx context.Context) ([]string, error) {
	if err := s.enter(ctx, OpRead, ""); err != nil {
		return nil, err
	}
	names, err := s.rdb.Do(ctx, s.b().Smembers().Key(s.keys.Queues()).Build().Pin()).AsStrSlice()
	if err != nil || len(names) == 0 {
		return names, err
	}
	cmds := make(rueidis.Commands, len(names))
	for i, name := range names {
		cmds[i] = s.b().Hexists().Key(s.keys.Queue(name).Meta).Field("name").Build().Pin()
	}
	live := names[:0]
	for i, res := range s.rdb.DoMulti(ctx, cmds...) {
		ok, err := res.AsBool()
		if err != nil {
			return nil, err
		}
		if ok {
			live = append(live, names[i])
		}
	}
	return live, nil
}

// QueueLen is the number of tasks waiting in a queue, at every priority.
func (s *Store) QueueLen(ctx context.Context, queue string) (int64, error) {
	if err := s.enter(ctx, OpRead, queue); err != nil {
		return 0, err
	}
	lens, err := s.lens(ctx, s.queueKeys(queue))
	return lens[0] + lens[1] + lens[2] + lens[3], err
}

// lens are the lengths of a queue's high, normal and low lists and of its
// group waiting set, in the order Range lists them. They are read one
// command at a time, not pipelined: rueidis retries a single read through
// an outage until the context's deadline is near and then gives up (reads
// fail with ErrUnavailable before the caller's deadline), which it does
// not do for a pipeline on a cluster.
func (s *Store) lens(ctx context.Context, k QueueKeys) ([4]int64, error) {
	var out [4]int64
	for i, key := range []string{k.High, k.Waiting, k.Low} {
		n, err := s.rdb.Do(ctx, s.b().Llen().Key(key).Build().Pin()).AsInt64()
		if err != nil {
			return out, err
		}
		out[i] = n
	}
	n, err := s.rdb.Do(ctx, s.b().Zcard().Key(k.GroupWait).Build().Pin()).AsInt64()
	out[3] = n
	return out, err
}

// Range returns waiting tasks: first those without a group in dequeue
// order (high, normal, then low priority), then those waiting in groups,
// group by group (in the byte order of the escaped group keys), each
// group's in the order they are to start; from position start to stop
// inclusive, where 0 is the first listed; negative positions count from
// the back, as in LRANGE. With cut >= 0 each payload is cut to its first
// cut bytes in Redis (see Task.Size), in one script call
// (waiting_list.lua); with cut < 0 the tasks come whole. The group set is
// read by rank: O(log N) to reach a position, and no more than the range
// asked for.
func (s *Store) Range(ctx context.Context, queue string, start, stop int64, cut int) ([]Task, error) {
	if err := s.enter(ctx, OpRead, queue); err != nil {
		return nil, err
	}
	k := s.queueKeys(queue)
	if cut >= 0 {
		res := s.scripts.WaitingList.Exec(ctx, s.rdb, []string{k.High, k.Waiting, k.Low, k.GroupWait},
			[]string{strconv.FormatInt(start, 10), strconv.FormatInt(stop, 10), strconv.Itoa(cut)})
		return cutTasks("waiting_list.lua", res, 2, nil)
	}
	lens, err := s.lens(ctx, k)
	if err != nil {
		return nil, err
	}
	total := lens[0] + lens[1] + lens[2] + lens[3]
	if start < 0 {
		start += total
	}
	if stop < 0 {
		stop += total
	}
	start, stop = max(start, 0), min(stop, total-1)
	var out []Task
	// Each list's front is its right end: its position i is list index
	// -(i+1), and its slice comes back reversed.
	offset := int64(0)
	for i, key := range []string{k.High, k.Waiting, k.Low} {
		from, to := max(start-offset, 0), min(stop-offset, lens[i]-1)
		offset += lens[i]
		if from > to {
			continue
		}
		vals, err := s.rdb.Do(ctx, s.b().Lrange().Key(key).Start(-(to + 1)).Stop(-(from + 1)).Build().Pin()).AsStrSlice()
		if err != nil {
			return nil, err
		}
		for j := len(vals) - 1; j >= 0; j-- {
			t := TaskOrRaw(vals[j])
			out = append(out, t)
		}
	}
	if from, to := max(start-offset, 0), min(stop-offset, lens[3]-1); from <= to {
		vals, err := s.rdb.Do(ctx, s.b().Zrange().Key(k.GroupWait).Min(strconv.FormatInt(from, 10)).Max(strconv.FormatInt(to, 10)).Build().Pin()).AsStrSlice()
		if err != nil {
			return nil, err
		}
		for _, m := range vals {
			out = append(out, TaskOrRaw(groupMemberEntry(m)))
		}
	}
	return out, nil
}

// groupMemberEntry is the entry a member of the group waiting set holds:
// what follows its group, the '\0', the class and the 16 digits of rank
// (see G.member in common/groups.lua).
func groupMemberEntry(m string) string {
	at := strings.IndexByte(m, 0)
	if at < 0 || len(m) < at+18 {
		return m
	}
	return m[at+18:]
}

// Procs lists the in-flight processes of a queue, in no order, with their
// progress reports. With cut >= 0 each task's payload is cut to its first
// cut bytes in Redis (procs_list.lua; see Task.Size).
func (s *Store) Procs(ctx context.Context, queue string, cut int) ([]Proc, error) {
	if err := s.enter(ctx, OpRead, queue); err != nil {
		return nil, err
	}
	k := s.queueKeys(queue)
	// Two calls, not one DoMulti: on a cluster whose node cannot be
	// reached, rueidis retries a multi until the context ends, where a
	// single call fails at once (ErrUnavailable, as every other read).
	var all map[string]string
	var sizes map[string]int64
	var err error
	if cut >= 0 {
		all, sizes, err = s.procsCut(ctx, k, cut)
	} else {
		all, err = s.rdb.Do(ctx, s.b().Hgetall().Key(k.Procs).Build().Pin()).AsStrMap()
	}
	if err != nil {
		return nil, err
	}
	var reports map[string]string
	if len(all) > 0 {
		if reports, err = s.rdb.Do(ctx, s.b().Hgetall().Key(k.Progress).Build().Pin()).AsStrMap(); err != nil {
			return nil, err
		}
	}
	out := make([]Proc, 0, len(all))
	for pid, v := range all {
		p, ok := ParseProc(pid, v)
		if !ok {
			continue
		}
		if size, ok := sizes[pid]; ok {
			p.Task.Size = int(size)
		}
		if r, ok := ParseProgress(reports[p.Task.ID]); ok && r.PID == pid {
			p.Progress = &r
		}
		out = append(out, p)
	}
	return out, nil
}

// procsCut reads a queue's process records with their payloads cut
// (procs_list.lua): the records by process id, and the whole payloads'
// sizes.
func (s *Store) procsCut(ctx context.Context, k QueueKeys, cut int) (map[string]string, map[string]int64, error) {
	vals, err := s.scripts.ProcsList.Exec(ctx, s.rdb, []string{k.Procs}, []string{strconv.Itoa(cut)}).ToArray()
	if err == nil && len(vals)%3 != 0 {
		err = fmt.Errorf("procs_list.lua answered %d values", len(vals))
	}
	if err != nil {
		return nil, nil, err
	}
	all, sizes := make(map[string]string, len(vals)/3), make(map[string]int64, len(vals)/3)
	for i := 0; i < len(vals); i += 3 {
		pid, err1 := vals[i].ToString()
		size, err2 := vals[i+1].AsInt64()
		v, err3 := vals[i+2].ToString()
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, nil, err
		}
		all[pid], sizes[pid] = v, size
	}
	return all, sizes, nil
}

// cutTasks reads a listing script's answer: per task, the payload's whole
// size and the entry cut, then stride - 2 values more, which extra (if
// not nil) reads into the task.
func cutTasks(script string, res rueidis.RedisResult, stride int, extra func(*Task, []rueidis.RedisMessage) error) ([]Task, error) {
	vals, err := res.ToArray()
	if err == nil && len(vals)%stride != 0 {
		err = fmt.Errorf("%s answered %d values", script, len(vals))
	}
	if err != nil {
		return nil, err
	}
	out := make([]Task, 0, len(vals)/stride)
	for i := 0; i < len(vals); i += stride {
		size, err1 := vals[i].AsInt64()
		e, err2 := vals[i+1].ToString()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		t := CutTask(e, size)
		if extra != nil {
			if err := extra(&t, vals[i+2:i+stride]); err != nil {
				return nil, err
			}
		}
		out = append(out, t)
	}
	return out, nil
}
