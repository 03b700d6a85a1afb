package enqueue

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/worqr/worqr/internal/errs"
)

func TestCheckRefusesWhatCannotWork(t *testing.T) {
	bad := map[string]Options{
		"negative delay":       {In: -time.Second},
		"negative timeout":     {Timeout: -time.Second},
		"negative retain":      {Retain: -time.Second},
		"weight over the max":  {Weight: MaxWeight + 1},
		"negative weight":      {Weight: -1},
		"empty unique key":     {UniqueSet: true},
		"negative unique TTL":  {Unique: "k", UniqueSet: true, UniqueTTL: -time.Second},
		"empty group key":      {GroupSet: true},
		"long group key":       {Group: strings.Repeat("g", MaxGroupLen+1), GroupSet: true},
		"empty aggregate key":  {AggregateSet: true},
		"NUL in aggregate key": {Aggregate: "a\x00b", AggregateSet: true},
		"aggregate at front":   {Aggregate: "a", AggregateSet: true, Front: true},
		"aggregate retained":   {Aggregate: "a", AggregateSet: true, Retain: time.Second},
		"aggregate grouped":    {Aggregate: "a", AggregateSet: true, Group: "g", GroupSet: true},
		"kind with a comma":    {Kind: "a,b"},
		"long kind":            {Kind: strings.Repeat("k", MaxKindLen+1)},
	}
	for name, o := range bad {
		if err := o.Check(); !errors.Is(err, errs.ErrInvalidOptions) {
			t.Errorf("%s: Check() = %v, want ErrInvalidOptions", name, err)
		}
	}
	good := []Options{{}, {Weight: MaxWeight, Kind: "email.welcome/v1_x-y", Group: strings.Repeat("g", MaxGroupLen), GroupSet: true},
		{Aggregate: "a", AggregateSet: true, Kind: "k", Weight: 3}, {Unique: "k", UniqueSet: true, UniqueTTL: time.Hour}}
	for _, o := range good {
		if err := o.Check(); err != nil {
			t.Errorf("Check(%+v) = %v, want nil", o, err)
		}
	}
}

func TestPlainAndKindOnly(t *testing.T) {
	switch {
	case !(Options{}).Plain(), (Options{Kind: "k"}).Plain(), (Options{Trace: "t"}).Plain():
		t.Error("Plain: only no option at all is plain")
	case (Options{}).KindOnly(), !(Options{Kind: "k"}).KindOnly(), (Options{Kind: "k", Front: true}).KindOnly():
		t.Error("KindOnly: a kind and nothing else")
	}
}

func TestArgsRoundAtUp(t *testing.T) {
	at := time.UnixMicro(1_700_000_000_000_000).Add(300 * time.Nanosecond)
	a := (Options{At: at, In: time.Second, Priority: "h", Kind: "k"}).Args()
	if a.DueAt != at.UnixMicro()+1 {
		t.Errorf("DueAt = %d, want %d: never earlier than asked", a.DueAt, at.UnixMicro()+1)
	}
	if a.Delay != time.Second || a.Priority != "h" || a.Kind != "k" {
		t.Errorf("Args = %+v", a)
	}
	if a := (Options{At: time.UnixMicro(5)}).Args(); a.DueAt != 5 {
		t.Errorf("a whole microsecond: DueAt = %d, want 5", a.DueAt)
	}
}

func TestTooLargeSaysSizesInWords(t *testing.T) {
	cases := []struct {
		e    TooLarge
		want string
	}{
		{TooLarge{Index: -1, Size: 5 << 20, Limit: 1 << 20}, "task of 5.0 MiB is over the limit of 1.0 MiB (Options.MaxTaskSize)"},
		{TooLarge{Index: 3, Size: 2048, Limit: 512}, "task 3 of 2.0 KiB is over the limit of 512 bytes (Options.MaxTaskSize)"},
		{TooLarge{Index: -1, Size: 1<<20 + 1, Limit: 1 << 20}, "task of 1.0 MiB (1048577 bytes) is over the limit of 1.0 MiB (1048576 bytes) (Options.MaxTaskSize)"},
	}
	for _, c := range cases {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		if !errors.Is(c.e, errs.ErrTaskTooLarge) {
			t.Errorf("%v does not match ErrTaskTooLarge", c.e)
		}
	}
	if got := SizeText(3 << 30); got != "3.0 GiB" {
		t.Errorf("SizeText = %q", got)
	}
}
