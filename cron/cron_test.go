package cron_test

import (
	"errors"
	"testing"
	"time"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/cron"
)

func TestCronParse(t *testing.T) {
	at := time.Date(2026, 3, 4, 10, 2, 30, 0, time.UTC)
	for _, c := range []struct {
		spec string
		want time.Time
	}{
		{"*/5 * * * *", time.Date(2026, 3, 4, 10, 5, 0, 0, time.UTC)},
		{"0 9 * * *", time.Date(2026, 3, 5, 9, 0, 0, 0, time.UTC)},
		{"@hourly", time.Date(2026, 3, 4, 11, 0, 0, 0, time.UTC)},
		{"@every 1m", time.Date(2026, 3, 4, 10, 3, 0, 0, time.UTC)}, // aligned, not now + 1m
		{"CRON_TZ=Europe/Paris 0 12 * * *", time.Date(2026, 3, 4, 11, 0, 0, 0, time.UTC)},
	} {
		s, err := cron.Parse(c.spec)
		if err != nil {
			t.Fatalf("%q: %v", c.spec, err)
		}
		if got := s.Next(at); !got.Equal(c.want) {
			t.Errorf("%q: Next(%v) = %v, want %v", c.spec, at, got, c.want)
		}
		// A time in another zone gives the same tick.
		if got := s.Next(at.In(time.FixedZone("X", 5*3600))); !got.Equal(c.want) {
			t.Errorf("%q: Next in another zone = %v, want %v", c.spec, got, c.want)
		}
	}
}

func TestCronParseErrors(t *testing.T) {
	for _, spec := range []string{"", "nonsense", "61 * * * *", "* * * *", "@every soon", "@never"} {
		if _, err := cron.Parse(spec); !errors.Is(err, worqr.ErrInvalidOptions) {
			t.Errorf("%q: got %v, want ErrInvalidOptions", spec, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("MustParse of a bad expression did not panic")
		}
	}()
	cron.MustParse("bad")
}
