// Package cron parses cron expressions into schedules for worqr's
// periodic tasks (worqr.Worker.Periodic). It wraps the parser of
// github.com/robfig/cron/v3, so that the core package does not depend on
// it.
//
// Expressions have the standard five fields (minute, hour, day of month,
// month, day of week) or a descriptor (@hourly, @daily, @weekly, @monthly,
// @yearly, @every <duration>). They are read in UTC, unless they start
// with CRON_TZ=<zone> (or TZ=<zone>), as in "CRON_TZ=Europe/Paris 0 9 * *
// 1-5". Every worker running a schedule must compute the same ticks, so
// prefer an explicit zone to the machine's.
package cron

import (
	"fmt"
	"time"

	robfig "github.com/robfig/cron/v3"

	"github.com/worqr/worqr"
)

// Parse parses a standard cron expression. "@every d" is worqr.Every(d):
// ticks at the multiples of d since the Unix epoch, the same on every
// worker (robfig's own @every counts from when it is asked, which workers
// starting at different times would not agree on).
func Parse(spec string) (worqr.Schedule, error) {
	s, err := robfig.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("worqr/cron: %q: %w: %w", spec, err, worqr.ErrInvalidOptions)
	}
	switch s := s.(type) {
	case robfig.ConstantDelaySchedule:
		return worqr.Every(s.Delay), nil
	case *robfig.SpecSchedule:
		return specSchedule{s}, nil
	default:
		return nil, fmt.Errorf("worqr/cron: %q: unsupported schedule %T: %w", spec, s, worqr.ErrInvalidOptions)
	}
}

// MustParse is Parse that panics on an error, for expressions fixed in the
// code.
func MustParse(spec string) worqr.Schedule {
	s, err := Parse(spec)
	if err != nil {
		panic(err)
	}
	return s
}

// specSchedule is a parsed expression: its ticks, in UTC.
type specSchedule struct{ s *robfig.SpecSchedule }

func (s specSchedule) Next(t time.Time) time.Time {
	next := s.s.Next(t.UTC())
	if next.IsZero() {
		return next
	}
	return next.UTC()
}
