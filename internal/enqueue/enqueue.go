// Package enqueue is what an enqueue is given, checked and encoded: the
// options of one call (the root's EnqueueOption values set them), their
// checks, the rules of a task's kind, group, aggregation key and trace
// context, the arguments the store sends, the error of a task over the
// size limit, and the kind and name of a typed payload's type. The root
// package's limits (MaxKindLen, MaxGroupLen...) are these package's,
// checked equal where the root declares them.
package enqueue

import (
	"fmt"
	"strings"
	"time"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// The limits of an enqueue's options (the root's, by the same names).
const (
	MaxKindLen         = 64
	MaxGroupLen        = 128
	MaxAggregateKeyLen = 1024
	MaxWeight          = 1 << 20
	MaxTraceLen        = 256
)

// Options are the options of one Enqueue or EnqueueBatch call.
type Options struct {
	Front        bool
	At           time.Time
	In           time.Duration
	MaxAttempts  int
	Timeout      time.Duration
	Retain       time.Duration
	Persistent   bool
	Priority     string // "h" high, "" normal, "l" low
	Weight       int
	Unique       string
	UniqueTTL    time.Duration
	UniqueSet    bool
	Kind         string
	Group        string
	GroupSet     bool
	Aggregate    string
	AggregateSet bool
	Trace        string // set by the client's Tracer, not by an option
}

// Plain reports whether no option was given: such calls on one queue can
// be joined into one script call.
func (o Options) Plain() bool { return o == Options{} }

// KindOnly reports whether a kind and no other option was given: such
// calls on one queue with the same kind can be joined too.
func (o Options) KindOnly() bool { return o.Kind != "" && o == Options{Kind: o.Kind} }

// Args are the options as the store sends them.
func (o Options) Args() store.EnqueueArgs {
	a := store.EnqueueArgs{Front: o.Front, Delay: o.In, MaxAttempts: o.MaxAttempts, Timeout: o.Timeout, Retain: o.Retain, Persistent: o.Persistent, Weight: o.Weight, Unique: o.Unique, UniqueTTL: o.UniqueTTL, Priority: o.Priority, Kind: o.Kind, Trace: o.Trace, Group: o.Group, Aggregate: o.Aggregate}
	if !o.At.IsZero() {
		a.DueAt = o.At.UnixMicro()
		if o.At.Sub(time.UnixMicro(a.DueAt)) > 0 {
			a.DueAt++ // rounded up: never earlier than asked
		}
	}
	return a
}

// Check refuses options that cannot work.
func (o Options) Check() error {
	switch {
	case o.In < 0:
		return fmt.Errorf("%w: negative delay %v", errs.ErrInvalidOptions, o.In)
	case o.Timeout < 0:
		return fmt.Errorf("%w: negative Timeout %v", errs.ErrInvalidOptions, o.Timeout)
	case o.Retain < 0:
		return fmt.Errorf("%w: negative Retain %v", errs.ErrInvalidOptions, o.Retain)
	case o.Weight < 0 || o.Weight > MaxWeight:
		return fmt.Errorf("%w: weight %d not in 0..%d", errs.ErrInvalidOptions, o.Weight, MaxWeight)
	case o.UniqueSet && o.Unique == "":
		return fmt.Errorf("%w: empty unique key", errs.ErrInvalidOptions)
	case o.UniqueTTL < 0:
		return fmt.Errorf("%w: negative unique TTL %v", errs.ErrInvalidOptions, o.UniqueTTL)
	}
	if err := CheckGroup(o.Group, o.GroupSet); err != nil {
		return err
	}
	if err := o.checkAggregate(); err != nil {
		return err
	}
	return CheckKind(o.Kind)
}

// checkAggregate refuses an aggregation key that is not valid, or options
// an aggregated task cannot honour.
func (o Options) checkAggregate() error {
	if !o.AggregateSet {
		return nil
	}
	switch {
	case o.Aggregate == "" || len(o.Aggregate) > MaxAggregateKeyLen:
		return fmt.Errorf("%w: aggregation key of %d bytes, not in 1..%d", errs.ErrInvalidOptions, len(o.Aggregate), MaxAggregateKeyLen)
	case strings.IndexByte(o.Aggregate, 0) >= 0:
		return fmt.Errorf("%w: aggregation key %q holds a NUL byte", errs.ErrInvalidOptions, o.Aggregate)
	case o.Front || !o.At.IsZero() || o.In != 0 || o.UniqueSet || o.Retain != 0 || o.GroupSet || o.Persistent:
		return fmt.Errorf("%w: Aggregate cannot be combined with AtFront, In, At, Unique, UniqueFor, Retain, Group or Persistent", errs.ErrInvalidOptions)
	}
	return nil
}

// CheckKind refuses a task kind that is not "" or a valid one: up to
// MaxKindLen bytes, each a KindByte.
func CheckKind(kind string) error {
	if len(kind) > MaxKindLen {
		return fmt.Errorf("%w: kind of %d bytes, limit %d", errs.ErrInvalidOptions, len(kind), MaxKindLen)
	}
	for i := 0; i < len(kind); i++ {
		if !KindByte(kind[i]) {
			return fmt.Errorf("%w: kind %q: byte %q is not a letter, a digit or one of \"-_./\"", errs.ErrInvalidOptions, kind, kind[i])
		}
	}
	return nil
}

// KindByte reports whether b may appear in a task kind: never ',' or ':',
// which end a header field and the header.
func KindByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '-', b == '_', b == '.', b == '/':
		return true
	}
	return false
}

// CheckGroup refuses a group key that is empty (when given) or too long.
func CheckGroup(key string, set bool) error {
	switch {
	case set && key == "":
		return fmt.Errorf("%w: empty group key", errs.ErrInvalidOptions)
	case len(key) > MaxGroupLen:
		return fmt.Errorf("%w: group key of %d bytes, limit %d", errs.ErrInvalidOptions, len(key), MaxGroupLen)
	}
	return nil
}

// TooLarge is ErrTaskTooLarge with the task's size and the limit, in
// words: "task of 4.8 MiB is over the limit of 1.0 MiB (Options.MaxTaskSize)".
type TooLarge struct {
	Index       int // the task's index in a batch; -1 for a single task
	Size, Limit int
}

func (e TooLarge) Error() string {
	size, limit := SizeText(e.Size), SizeText(e.Limit)
	if size == limit { // 1048577 bytes over a limit of 1048576
		size = fmt.Sprintf("%s (%d bytes)", size, e.Size)
		limit = fmt.Sprintf("%s (%d bytes)", limit, e.Limit)
	}
	task := "task"
	if e.Index >= 0 {
		task = fmt.Sprintf("task %d", e.Index)
	}
	return fmt.Sprintf("%s of %s is over the limit of %s (Options.MaxTaskSize)", task, size, limit)
}

func (e TooLarge) Unwrap() error { return errs.ErrTaskTooLarge }

// SizeText is a size in bytes in words: "512 bytes", "2.5 KiB", "4.8 MiB".
func SizeText(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// CheckTrace refuses a trace context a Tracer gave that is not "" or one
// a task header can carry.
func CheckTrace(trace string) error {
	if len(trace) > MaxTraceLen {
		return fmt.Errorf("%w: the Tracer gave a trace context of %d bytes, limit %d", errs.ErrInvalidOptions, len(trace), MaxTraceLen)
	}
	for i := 0; i < len(trace); i++ {
		if b := trace[i]; !traceByte(b) {
			return fmt.Errorf("%w: the Tracer gave a trace context with byte %q (letters, digits and \"-_./=+\" only)", errs.ErrInvalidOptions, b)
		}
	}
	return nil
}

// traceByte reports whether b may appear in a trace context: never ','
// or ':', which end header fields.
func traceByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '_' || b == '.' || b == '/' || b == '=' || b == '+'
}

// Collect is the options opts set (the root's EnqueueOption values).
func Collect[O ~func(*Options)](opts []O) Options {
	var o Options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// Batch are a batch's options, checked: a unique key among them is
// refused with why, since it would fit one task only.
func Batch[O ~func(*Options)](queue string, opts []O, why string) (Options, error) {
	o := Collect(opts)
	if err := o.Check(); err != nil {
		return o, fmt.Errorf("worqr: enqueue %q: %w", queue, err)
	}
	if o.UniqueSet {
		return o, fmt.Errorf("worqr: enqueue %q: %s: %w", queue, why, errs.ErrInvalidOptions)
	}
	return o, nil
}
