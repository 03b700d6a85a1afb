package worqroutbox

import (
	"fmt"
	"strings"
	"time"

	"github.com/worqr/worqr"
)

// Option changes how Enqueue stores a task, and so how the relay enqueues
// it into worqr. Each is the outbox's form of the worqr enqueue option of
// the same name: worqr's options are functions the outbox cannot read, so
// the outbox keeps its own, stores them in the row's columns, and the
// relay turns them back into worqr's.
type Option func(*options)

// options are the options of one Enqueue, as the row stores them.
type options struct {
	at          time.Time // the due time: In and At, made absolute
	in          time.Duration
	front       bool
	maxAttempts *int32
	timeout     time.Duration
	retain      time.Duration
	priority    string // "h" high, "l" low, "" normal, as the core stores it
	weight      int
	kind        string
	unique      string
	uniqueTTL   time.Duration
	uniqueSet   bool
	group       string
	groupSet    bool
	aggregate   bool
}

// In delays the task until d after the Enqueue call, by the producer's
// clock (the delay counts from the insert, not from the move, so a relay
// that is late does not add to it). See worqr.In.
func In(d time.Duration) Option { return func(o *options) { o.in = d } }

// At delays the task until t; with In as well, the later of the two wins.
// See worqr.At.
func At(t time.Time) Option { return func(o *options) { o.at = t } }

// AtFront adds the task at the front of its queue. See worqr.AtFront.
func AtFront() Option { return func(o *options) { o.front = true } }

// MaxAttempts gives the task an attempt budget of its own. See
// worqr.MaxAttempts.
func MaxAttempts(n int) Option {
	return func(o *options) {
		v := int32(min(max(n, -1), 1<<31-1))
		o.maxAttempts = &v
	}
}

// Timeout bounds each attempt's run. See worqr.Timeout.
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Retain keeps the task's outcome for d after it ends. See worqr.Retain.
func Retain(d time.Duration) Option { return func(o *options) { o.retain = d } }

// HighPriority puts the task in its queue's high level. See
// worqr.HighPriority.
func HighPriority() Option { return func(o *options) { o.priority = "h" } }

// LowPriority puts the task in its queue's low level. See
// worqr.LowPriority.
func LowPriority() Option { return func(o *options) { o.priority = "l" } }

// Weight gives the task a weight. See worqr.Weight.
func Weight(n int) Option { return func(o *options) { o.weight = n } }

// Kind gives the task a kind. See worqr.Kind.
func Kind(name string) Option { return func(o *options) { o.kind = name } }

// Unique makes the task unique by key while it lives. See worqr.Unique.
//
// The key replaces the row's id as the task's unique key, so a relay that
// dies between the enqueue and the delete is covered by this key instead:
// once the first task has ended and given the key up, a second move of
// the row adds a second task. UniqueFor with a ttl longer than the
// relay's DedupeWindow keeps the outbox's guarantee.
func Unique(key string) Option {
	return func(o *options) { o.unique, o.uniqueTTL, o.uniqueSet = key, 0, true }
}

// UniqueFor makes the task unique by key for ttl from its enqueue into
// worqr. See worqr.UniqueFor and Unique.
func UniqueFor(key string, ttl time.Duration) Option {
	return func(o *options) { o.unique, o.uniqueTTL, o.uniqueSet = key, ttl, true }
}

// Group puts the task in a group of its queue, for per-key flow control
// (round-robin turns, a group's concurrency and rate limits, sequences).
// A key is 1 to worqr.MaxGroupLen bytes, without a NUL byte (which a text
// column cannot hold). See worqr.Group.
//
// A relay of an earlier version of this package, still running while
// producers use Group, moves a grouped row without its group: upgrade
// the relays first.
func Group(key string) Option { return func(o *options) { o.group, o.groupSet = key, true } }

// Aggregate is refused by Enqueue (worqr.ErrInvalidOptions). worqr's
// aggregated tasks cannot hold a unique key (an aggregated task ends
// under an id of its own, so its members' keys would never be given
// up), and the row's id, held as the task's unique key, is what makes a
// row moved twice (its relay died between the enqueue and the delete)
// one task: an aggregated row so moved would join its gathering twice.
// Enqueue aggregated tasks with worqr.Aggregate from a handler of a task
// the outbox moved instead, which runs once per row as any task does
// (see docs/outbox.md).
func Aggregate(key string) Option { return func(o *options) { o.aggregate = true } }

// collect applies opts and makes the delay absolute from now.
func collect(now time.Time, opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.in > 0 {
		if due := now.Add(o.in); due.After(o.at) {
			o.at = due
		}
	}
	return o
}

// check refuses, at the insert, options worqr would refuse at the move:
// the caller's transaction learns of them while it can still roll back.
func (o options) check() error {
	switch {
	case o.in < 0:
		return fmt.Errorf("%w: negative delay %v", worqr.ErrInvalidOptions, o.in)
	case o.timeout < 0:
		return fmt.Errorf("%w: negative Timeout %v", worqr.ErrInvalidOptions, o.timeout)
	case o.retain < 0:
		return fmt.Errorf("%w: negative Retain %v", worqr.ErrInvalidOptions, o.retain)
	case o.weight < 0 || o.weight > worqr.MaxWeight:
		return fmt.Errorf("%w: weight %d not in 0..%d", worqr.ErrInvalidOptions, o.weight, worqr.MaxWeight)
	case o.uniqueSet && o.unique == "":
		return fmt.Errorf("%w: empty unique key", worqr.ErrInvalidOptions)
	case o.uniqueTTL < 0:
		return fmt.Errorf("%w: negative unique TTL %v", worqr.ErrInvalidOptions, o.uniqueTTL)
	case o.groupSet && (o.group == "" || len(o.group) > worqr.MaxGroupLen || strings.IndexByte(o.group, 0) >= 0):
		return fmt.Errorf("%w: group key of %d bytes, not in 1..%d, or holding a NUL byte", worqr.ErrInvalidOptions, len(o.group), worqr.MaxGroupLen)
	case o.aggregate:
		return fmt.Errorf("%w: Aggregate: an aggregated task cannot hold the row's unique key, so a row moved twice would be gathered twice (see docs/outbox.md)", worqr.ErrInvalidOptions)
	}
	return checkKind(o.kind)
}

// checkKind refuses a kind worqr.Kind would refuse: over
// worqr.MaxKindLen bytes, or a byte that is not a letter, a digit or one
// of "-_./".
func checkKind(kind string) error {
	if len(kind) > worqr.MaxKindLen {
		return fmt.Errorf("%w: kind of %d bytes, limit %d", worqr.ErrInvalidOptions, len(kind), worqr.MaxKindLen)
	}
	for i := 0; i < len(kind); i++ {
		b := kind[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '-' || b == '_' || b == '.' || b == '/') {
			return fmt.Errorf("%w: kind %q: byte %q is not a letter, a digit or one of \"-_./\"", worqr.ErrInvalidOptions, kind, b)
		}
	}
	return nil
}

// millis is d in whole milliseconds, rounded up so that a positive d
// stays positive; nil for none.
func millis(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	return &ms
}

// nullString is s, or nil for "".
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// row is one outbox row as the relay reads it.
type row struct {
	id          string
	queue       string
	payload     []byte
	at          *time.Time
	front       bool
	maxAttempts *int32
	timeoutMs   *int64
	retainMs    *int64
	priority    *string
	weight      *int32
	kind        *string
	unique      *string
	uniqueTTLMs *int64
	group       *string
}

// dedupePrefix starts the unique key a row's id gives its task.
const dedupePrefix = "outbox:"

// enqueueOptions are the worqr options that enqueue r: its own, and a
// unique key (the row's id, held for window, unless the row has one).
func (r row) enqueueOptions(window time.Duration) []worqr.EnqueueOption {
	key, ttl := r.uniqueKey(window)
	if ttl > 0 {
		return append(r.batchOptions(), worqr.UniqueFor(key, ttl))
	}
	return append(r.batchOptions(), worqr.Unique(key))
}

// uniqueKey is the unique key of r's task, and how long it is held (0:
// while the task lives): the row's own, else its id, held for window.
func (r row) uniqueKey(window time.Duration) (string, time.Duration) {
	switch {
	case r.unique != nil && r.uniqueTTLMs != nil:
		return *r.unique, time.Duration(*r.uniqueTTLMs) * time.Millisecond
	case r.unique != nil:
		return *r.unique, 0
	}
	return dedupePrefix + r.id, window
}

// item is r's task as an item of a batch with its unique key.
func (r row) item(window time.Duration) worqr.BatchItem {
	key, ttl := r.uniqueKey(window)
	return worqr.BatchItem{Payload: r.payload, UniqueKey: key, UniqueFor: ttl}
}

// batchOptions are r's worqr options but its unique key: those rows must
// share to go in one batch (see sameOptions).
func (r row) batchOptions() []worqr.EnqueueOption {
	opts := make([]worqr.EnqueueOption, 0, 11)
	if r.at != nil {
		opts = append(opts, worqr.At(*r.at))
	}
	if r.front {
		opts = append(opts, worqr.AtFront())
	}
	if r.maxAttempts != nil {
		opts = append(opts, worqr.MaxAttempts(int(*r.maxAttempts)))
	}
	if r.timeoutMs != nil {
		opts = append(opts, worqr.Timeout(time.Duration(*r.timeoutMs)*time.Millisecond))
	}
	if r.retainMs != nil {
		opts = append(opts, worqr.Retain(time.Duration(*r.retainMs)*time.Millisecond))
	}
	if r.priority != nil {
		switch *r.priority {
		case "h":
			opts = append(opts, worqr.HighPriority())
		case "l":
			opts = append(opts, worqr.LowPriority())
		}
		// Anything else (a row written by hand) waits at the normal level.
	}
	if r.weight != nil {
		opts = append(opts, worqr.Weight(int(*r.weight)))
	}
	if r.kind != nil {
		opts = append(opts, worqr.Kind(*r.kind))
	}
	if r.group != nil {
		opts = append(opts, worqr.Group(*r.group))
	}
	return opts
}

// sameOptions reports whether rows a and b have the same batchOptions.
//
// Rows for the front of their queue are never joined: one at a time, the
// newest row's task goes first, as Enqueue(AtFront) calls in the
// producers' order put it, where a batch at the front keeps its own order.
func sameOptions(a, b row) bool {
	if a.front || b.front {
		return false
	}
	return (a.at == nil) == (b.at == nil) && (a.at == nil || a.at.Equal(*b.at)) && a.front == b.front && eqPtr(a.maxAttempts, b.maxAttempts) &&
		eqPtr(a.timeoutMs, b.timeoutMs) && eqPtr(a.retainMs, b.retainMs) && eqPtr(a.priority, b.priority) &&
		eqPtr(a.weight, b.weight) && eqPtr(a.kind, b.kind) && eqPtr(a.group, b.group)
}

// eqPtr reports whether a and b are both nil or point to equal values.
func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
