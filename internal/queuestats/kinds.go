package queuestats

import (
	"sync"
	"sync/atomic"

	"github.com/worqr/worqr"
)

// OtherKind is the label value of the task kinds past a Kinds's bound, and
// of a kind that is not a valid one (a task header written by hand): it
// cannot be a task's kind, since kinds have no parentheses.
const OtherKind = "(other)"

// DefaultMaxKinds is the bound of a Kinds whose max is 0.
const DefaultMaxKinds = 10

// Kinds turns task kinds into metric label values, keeping at most a
// bound of them apart: the first kinds it is asked about are their own
// value, later ones OtherKind. Kinds are the producers' to choose, so
// without a bound a metric labelled with them could grow without limit.
// "" (a task without a kind) is always its own value and takes no place.
// Safe for concurrent use.
type Kinds struct{ b *bound }

// NewKinds returns a Kinds that keeps max kinds apart: DefaultMaxKinds if
// max is 0, none if it is negative (every task with a kind is OtherKind).
func NewKinds(max int) *Kinds { return &Kinds{b: newBound(max, DefaultMaxKinds)} }

// Label is kind's label value: kind itself if it is "" or one of the kinds
// kept apart (admitting it if there is room), OtherKind otherwise.
func (k *Kinds) Label(kind string) string {
	if kind == "" {
		return ""
	}
	if !validKind(kind) || !k.b.admit(kind) {
		return OtherKind
	}
	return kind
}

// OtherQueue is the label value of the queues past a Queues's bound. A
// queue named so shares it.
const OtherQueue = "(other)"

// Queues turns queue names into metric label values as Kinds does kinds:
// the first queues it is asked about are their own value (their name, made
// UTF-8 by Label), later ones OtherQueue. A program with a queue per
// tenant would otherwise grow a series per tenant without end. Safe for
// concurrent use.
type Queues struct{ b *bound }

// NewQueues returns a Queues that keeps max queues apart: DefaultMaxQueues
// if max is 0, none if it is negative (every queue is OtherQueue).
func NewQueues(max int) *Queues { return &Queues{b: newBound(max, DefaultMaxQueues)} }

// Label is queue's label value: Label(queue) if it is one of the queues
// kept apart (admitting it if there is room), OtherQueue otherwise.
func (q *Queues) Label(queue string) string {
	l := Label(queue)
	if !q.b.admit(l) {
		return OtherQueue
	}
	return l
}

// bound admits at most max values, the first asked about, for as long as
// it lives.
type bound struct {
	max   int
	known sync.Map // the values admitted
	full  atomic.Bool

	mu sync.Mutex // serialises the admission of new values
	n  int        // len(known), under mu
}

// newBound returns a bound of max values: def if max is 0, none if it is
// negative.
func newBound(max, def int) *bound {
	switch {
	case max == 0:
		max = def
	case max < 0:
		max = 0
	}
	b := &bound{max: max}
	b.full.Store(max == 0)
	return b
}

// admit reports whether v is admitted, admitting it if there is room.
func (b *bound) admit(v string) bool {
	if _, ok := b.known.Load(v); ok {
		return true
	}
	if b.full.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.known.Load(v); ok {
		return true
	}
	if b.n >= b.max {
		return false
	}
	b.known.Store(v, struct{}{})
	b.n++
	b.full.Store(b.n >= b.max)
	return true
}

// validKind reports whether kind is one worqr.Kind accepts: the kind of a
// task written to Redis by hand could be any bytes, label values must be
// UTF-8.
func validKind(kind string) bool {
	if len(kind) > worqr.MaxKindLen {
		return false
	}
	for i := 0; i < len(kind); i++ {
		switch b := kind[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '-', b == '_', b == '.', b == '/':
		default:
			return false
		}
	}
	return true
}

// OtherReason is the label value of the reasons past a Reasons's bound,
// and of one that is not a valid reason: it cannot be a dead letter's
// reason, since reasons have no parentheses.
const OtherReason = "(other)"

// DefaultMaxReasons is the bound of a Reasons whose max is 0.
const DefaultMaxReasons = 10

// BuiltinReasons are the reasons worqr gives dead letters itself: always
// their own label value, outside the bound.
var BuiltinReasons = []string{
	worqr.ReasonPermanent, worqr.ReasonExhausted, worqr.ReasonPanic, worqr.ReasonManual,
	worqr.ReasonTimeout, worqr.ReasonPoison, worqr.ReasonDecode, worqr.ReasonUnroutable,
}

// Reasons turns dead letters' reasons into metric label values: the
// built-in reasons are always their own value, and so are the first max
// reasons of the application's own (WithReason) it is asked about; later
// ones are OtherReason. "" (an outcome that is not dead) is its own value.
// Safe for concurrent use.
type Reasons struct{ b *bound }

// NewReasons returns a Reasons that keeps max reasons of the
// application's apart besides the built-in ones: DefaultMaxReasons if max
// is 0, none if it is negative.
func NewReasons(max int) *Reasons { return &Reasons{b: newBound(max, DefaultMaxReasons)} }

// Label is reason's label value: reason itself if it is "", built in, or
// one of the reasons kept apart (admitting it if there is room),
// OtherReason otherwise.
func (r *Reasons) Label(reason string) string {
	if reason == "" || builtinReason(reason) {
		return reason
	}
	if !validReason(reason) || !r.b.admit(reason) {
		return OtherReason
	}
	return reason
}

func builtinReason(reason string) bool {
	for _, b := range BuiltinReasons {
		if reason == b {
			return true
		}
	}
	return false
}

// validReason reports whether reason is one WithReason could give: at
// most 64 bytes of letters, digits and "-_.".
func validReason(reason string) bool {
	if len(reason) > 64 {
		return false
	}
	for i := 0; i < len(reason); i++ {
		switch b := reason[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '-', b == '_', b == '.':
		default:
			return false
		}
	}
	return true
}
