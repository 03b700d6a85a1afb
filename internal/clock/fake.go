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
	for {
		f.mu.Lock()
		pending, changed := len(f.timers), f.changed
		f.mu.Unlock()
		if pending >= n {
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
	if d <= 0 {
		t.fire(t.f.now)
	} else {
		t.f.timers = append(t.f.timers, t)
	}
	t.f.notify()
	return was
}
