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
type Kinds struct {
	max   int
	known sync.Map // kinds that are their own value
	full  atomic.Bool

	mu sync.Mutex // serialises the admission of new kinds
	n  int        // len(known), under mu
}

// NewKinds returns a Kinds that keeps max kinds apart: DefaultMaxKinds if
// max is 0, none if it is negative (every task with a kind is OtherKind).
func NewKinds(max int) *Kinds {
	switch {
	case max == 0:
		max = DefaultMaxKinds
	case max < 0:
		max = 0
	}
	k := &Kinds{max: max}
	k.full.Store(max == 0)
	return k
}

// Label is kind's label value: kind itself if it is "" or one of the kinds
// kept apart (admitting it if there is room), OtherKind otherwise.
func (k *Kinds) Label(kind string) string {
	if kind == "" {
		return ""
	}
	if _, ok := k.known.Load(kind); ok {
		return kind
	}
	if k.full.Load() || !validKind(kind) {
		return OtherKind
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.known.Load(kind); ok {
		return kind
	}
	if k.n >= k.max {
		return OtherKind
	}
	k.known.Store(kind, struct{}{})
	k.n++
	k.full.Store(k.n >= k.max)
	return kind
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
