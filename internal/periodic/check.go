package periodic

import (
	"fmt"
	"time"

	"github.com/worqr/worqr/internal/enqueue"
	"github.com/worqr/worqr/internal/errs"
)

// MaxNameLen bounds a schedule's name in bytes (the root's
// MaxPeriodicNameLen).
const MaxNameLen = 1024

// Every is the root's Every: a tick at each multiple of the interval
// since the Unix epoch.
type Every time.Duration

// Next is the first multiple of the interval strictly after t, in UTC;
// zero for an interval that is not positive.
func (e Every) Next(t time.Time) time.Time {
	d := int64(e)
	if d <= 0 {
		return time.Time{}
	}
	n := t.UnixNano()
	k := n / d
	if n < 0 && n%d != 0 {
		k-- // floor
	}
	return time.Unix(0, (k+1)*d).UTC()
}

func (e Every) String() string { return "every " + time.Duration(e).String() }

// Check refuses a schedule that cannot work, judged at now, with an error
// that wraps errs.ErrInvalidOptions.
func Check(name string, sched Schedule, opts Options, now time.Time) error {
	every, isEvery := sched.(Every)
	switch {
	case name == "":
		return fmt.Errorf("%w: empty schedule name", errs.ErrInvalidOptions)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: schedule name is %d bytes, limit %d", errs.ErrInvalidOptions, len(name), MaxNameLen)
	case sched == nil:
		return fmt.Errorf("%w: nil schedule", errs.ErrInvalidOptions)
	case isEvery && time.Duration(every) < time.Millisecond:
		return fmt.Errorf("%w: interval %v is under a millisecond", errs.ErrInvalidOptions, time.Duration(every))
	case opts.Timeout < 0:
		return fmt.Errorf("%w: negative Timeout %v", errs.ErrInvalidOptions, opts.Timeout)
	case opts.Retain < 0:
		return fmt.Errorf("%w: negative Retain %v", errs.ErrInvalidOptions, opts.Retain)
	case opts.Weight < 0 || opts.Weight > enqueue.MaxWeight:
		return fmt.Errorf("%w: Weight %d not in 0..%d", errs.ErrInvalidOptions, opts.Weight, enqueue.MaxWeight)
	}
	// Ticks are told apart by the millisecond: two in a row must be at
	// least that far apart, and later than the time asked about.
	now = now.UTC()
	t1 := sched.Next(now)
	if t1.IsZero() || TickMs(t1) <= now.UnixMilli() {
		return fmt.Errorf("%w: the schedule has no tick after now (%v)", errs.ErrInvalidOptions, t1)
	}
	if t2 := sched.Next(t1); t2.IsZero() || TickMs(t2) <= TickMs(t1) {
		return fmt.Errorf("%w: the schedule's ticks do not advance by a millisecond (%v, then %v)", errs.ErrInvalidOptions, t1, t2)
	}
	return nil
}
