package queuestats

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/worqr/worqr"
)

func TestKindsBound(t *testing.T) {
	k := NewKinds(2)
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"a", "a"},
		{"a", "a"},
		{"b", "b"},
		{"c", OtherKind}, // past the bound
		{"", ""},         // no kind takes no place
		{"b", "b"},       // admitted kinds stay
		{"d", OtherKind},
	} {
		if got := k.Label(c.in); got != c.want {
			t.Errorf("Label(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestKindsDefaultAndNone(t *testing.T) {
	k := NewKinds(0)
	for i := range DefaultMaxKinds + 3 {
		kind := "k" + strings.Repeat("x", i)
		want := kind
		if i >= DefaultMaxKinds {
			want = OtherKind
		}
		if got := k.Label(kind); got != want {
			t.Errorf("default bound: Label(%q) = %q, want %q", kind, got, want)
		}
	}
	none := NewKinds(-1)
	if got := none.Label("a"); got != OtherKind {
		t.Errorf("no kinds kept apart: Label(a) = %q, want %q", got, OtherKind)
	}
	if got := none.Label(""); got != "" {
		t.Errorf("no kinds kept apart: Label(\"\") = %q, want \"\"", got)
	}
}

// A kind worqr would refuse (a task header written by hand) is OtherKind,
// and takes no place.
func TestKindsInvalid(t *testing.T) {
	k := NewKinds(1)
	for _, bad := range []string{"a b", "\xff", "caf\u00e9", "(other)", strings.Repeat("x", 65)} {
		if got := k.Label(bad); got != OtherKind {
			t.Errorf("Label(%q) = %q, want %q", bad, got, OtherKind)
		}
	}
	if got := k.Label("ok"); got != "ok" {
		t.Errorf("Label(ok) = %q after invalid kinds, want ok", got)
	}
}

// Concurrent callers admit no more than the bound.
func TestKindsConcurrent(t *testing.T) {
	k := NewKinds(5)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				v := k.Label("k" + strings.Repeat("x", (g*50+i)%40))
				mu.Lock()
				seen[v] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	delete(seen, OtherKind)
	if len(seen) != 5 {
		t.Errorf("%d kinds kept apart, want 5: %v", len(seen), seen)
	}
}

// validKind accepts what worqr accepts as a kind, byte by byte and in
// length.
func TestValidKindAgreesWithWorqr(t *testing.T) {
	accepts := func(kind string) bool {
		var r worqr.Router
		return r.Handle(kind, func(context.Context, *worqr.Process) error { return nil }) == nil
	}
	for b := range 256 {
		kind := "a" + string([]byte{byte(b)})
		if got, want := validKind(kind), accepts(kind); got != want {
			t.Errorf("validKind(%q) = %v, worqr accepts it: %v", kind, got, want)
		}
	}
	for _, n := range []int{worqr.MaxKindLen, worqr.MaxKindLen + 1} {
		kind := strings.Repeat("x", n)
		if got, want := validKind(kind), accepts(kind); got != want {
			t.Errorf("validKind of %d bytes = %v, worqr accepts it: %v", n, got, want)
		}
	}
}

func TestQueuesBound(t *testing.T) {
	q := NewQueues(2)
	for _, c := range []struct{ in, want string }{
		{"a", "a"},
		{"b\xff", "b\uFFFD"}, // made UTF-8, then admitted
		{"c", OtherQueue},
		{"a", "a"},
		{"b\xff", "b\uFFFD"},
	} {
		if got := q.Label(c.in); got != c.want {
			t.Errorf("Label(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	def := NewQueues(0)
	for i := range DefaultMaxQueues + 1 {
		name := "q" + strings.Repeat("x", i)
		want := name
		if i == DefaultMaxQueues {
			want = OtherQueue
		}
		if got := def.Label(name); got != want {
			t.Fatalf("default bound: Label(%q) = %q, want %q", name, got, want)
		}
	}
	if got := NewQueues(-1).Label("a"); got != OtherQueue {
		t.Errorf("no queues kept apart: Label(a) = %q", got)
	}
}

// The built-in reasons are always their own label and take no place; the
// application's own are kept apart up to the bound, then OtherReason.
func TestReasonsBound(t *testing.T) {
	r := NewReasons(2)
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{worqr.ReasonPermanent, worqr.ReasonPermanent},
		{"smtp-5xx", "smtp-5xx"},
		{"bad-input", "bad-input"},
		{"quota", OtherReason}, // past the bound
		{"smtp-5xx", "smtp-5xx"},
		{worqr.ReasonPoison, worqr.ReasonPoison}, // built in: past the bound too
		{"a b", OtherReason},                     // not a reason WithReason gives
		{strings.Repeat("x", 65), OtherReason},
	} {
		if got := r.Label(c.in); got != c.want {
			t.Errorf("Label(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	none := NewReasons(-1)
	for _, b := range BuiltinReasons {
		if got := none.Label(b); got != b {
			t.Errorf("no reasons kept apart: Label(%q) = %q, want itself", b, got)
		}
	}
	if got := none.Label("mine"); got != OtherReason {
		t.Errorf("no reasons kept apart: Label(mine) = %q, want %q", got, OtherReason)
	}
	def := NewReasons(0)
	for i := range DefaultMaxReasons + 1 {
		reason := "r" + strings.Repeat("x", i)
		want := reason
		if i >= DefaultMaxReasons {
			want = OtherReason
		}
		if got := def.Label(reason); got != want {
			t.Errorf("default bound: Label(%q) = %q, want %q", reason, got, want)
		}
	}
}
