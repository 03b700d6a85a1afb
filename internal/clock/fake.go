package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Fake is a Clock that moves only when a test moves it. Its timers fire
// during Advance, in the order of their deadlines: a channel timer's time
// is sent (the channel holds one), an AfterFunc's function runs on a
// goroutine of its own, as a real one does.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer // pending, in no order
	// changed is closed, and replaced, whenever a timer is set or stopped,
	// for WaitTimers.
	changed chan struct{}
	sets    uint64 // timers set so far (Mark)
}

// NewFake makes a Fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now is the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since is Now().Sub(t).
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// Until is t.Sub(Now()).
func (f *Fake) Until(t time.Time) time.Duration { return t.Sub(f.Now()) }

// NewTimer makes a timer that fires when the clock has advanced by d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc calls fn on a goroutine of its own when the clock has advanced
// by d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{f: f, fn: fn}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d, firing every timer due by then in
// the order of their deadlines (each at its own deadline's time).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	end := f.now.Add(d)
	for {
		sort.Slice(f.timers, func(i, j int) bool { return f.timers[i].when.Before(f.timers[j].when) })
		if len(f.timers) == 0 || f.timers[0].when.After(end) {
			break
		}
		t := f.timers[0]
		f.timers = f.timers[1:]
		if t.when.After(f.now) {
			f.now = t.when
		}
		t.fire(f.now)
	}
	f.now = end
	f.notify()
	f.mu.Unlock()
}

// Timers counts the timers pending.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitTimers waits until at least n timers are pending, so that a test can
// advance the clock knowing the component it drives has set its timer.
func (f *Fake) WaitTimers(ctx context.Context, n int) error {
	return f.waitFor(ctx, func() bool { return len(f.timers) >= n })
}

// Mark counts the timers set so far, for WaitTimerAt.
func (f *Fake) Mark() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sets
}

// WaitTimerAt waits until a timer set after mark (see Mark) and due at
// when is pending: a test that knows the deadline of the timer it waits
// for is not misled by another component's timer set meanwhile.
func (f *Fake) WaitTimerAt(ctx context.Context, mark uint64, when time.Time) error {
	return f.waitFor(ctx, func() bool {
		for _, t := range f.timers {
			if t.set > mark && t.when.Equal(when) {
				return true
			}
		}
		return false
	})
}

// waitFor waits until ok, called under f.mu, holds.
func (f *Fake) waitFor(ctx context.Context, ok func() bool) error {
	for {
		f.mu.Lock()
		done, changed := ok(), f.changed
		f.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notify wakes WaitTimers. Callers hold f.mu.
func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// remove drops t from the pending timers; false if it was not pending.
// Callers hold f.mu.
func (f *Fake) remove(t *fakeTimer) bool {
	for i, p := range f.timers {
		if p == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			return true
		}
	}
	return false
}

type fakeTimer struct {
	f    *Fake
	c    chan time.Time // nil for AfterFunc
	fn   func()
	when time.Time // guarded by f.mu
	set  uint64    // which of the clock's timers set this is (Mark); guarded by f.mu
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// fire delivers the timer. Callers hold f.mu.
func (t *fakeTimer) fire(now time.Time) {
	if t.fn != nil {
		go t.fn()
		return
	}
	select {
	case t.c <- now:
	default:
	}
}

// drain empties the channel, as a Stop or Reset of a Go 1.23 timer does.
func (t *fakeTimer) drain() {
	if t.c == nil {
		return
	}
	select {
	case <-t.c:
	default:
	}
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.f.remove(t)
	t.drain()
	if was {
		t.f.notify()
	}
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.f.remove(t)
	t.drain()
	t.when = t.f.now.Add(d)
	t.f.sets++
	t.set = t.f.sets
	if d <= 0 {
		t.fire(t.f.now)
	} else {
		t.f.timers = append(t.f.timers, t)
	}
	t.f.notify()
	return was
}
