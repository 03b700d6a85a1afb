package controls

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/store"
)

// A rate limit is refused unless Redis keeps it as given: a count in
// 0..MaxLimit and, for a limit, a window of whole milliseconds, at least
// one.
func TestCheckRate(t *testing.T) {
	for _, c := range []struct {
		n   int
		per time.Duration
		ok  bool
	}{
		{0, 0, true},
		{0, time.Microsecond, true}, // no limit: the window is not kept
		{5, time.Second, true},
		{MaxLimit, time.Millisecond, true},
		{MaxLimit + 1, time.Second, false},
		{-1, time.Second, false},
		{5, 0, false},
		{5, 999 * time.Microsecond, false},
		{5, 1500 * time.Microsecond, false},
	} {
		err := CheckRate(c.n, c.per)
		if c.ok {
			assert.NoError(t, err, "%d per %v", c.n, c.per)
		} else {
			assert.ErrorIs(t, err, errs.ErrInvalidOptions, "%d per %v", c.n, c.per)
		}
	}
}

type option func(*Options)

// A change runs only once its call is valid, is told whether to make the
// queue, and says a missing queue as ErrNoQueue.
func TestRun(t *testing.T) {
	ctx := context.Background()
	valid := func(context.Context, string, string) error { return nil }
	refused := errors.New("refused")
	err := Run(ctx, func(context.Context, string, string) error { return refused }, "pause", "q", []option{nil},
		func(bool) error { t.Fatal("a refused call ran"); return nil })
	require.Equal(t, refused, err)

	var created []bool
	set := func(create bool) error { created = append(created, create); return nil }
	require.NoError(t, Run(ctx, valid, "pause", "q", []option{nil}, set))
	require.NoError(t, Run(ctx, valid, "pause", "q", []option{nil, func(o *Options) { o.Create = true }}, set))
	assert.Equal(t, []bool{false, true}, created)

	err = Run(ctx, valid, "pause", "q", []option{}, func(bool) error { return store.ErrNoQueue })
	require.ErrorIs(t, err, errs.ErrNoQueue)
	assert.Equal(t, `worqr: pause "q": no such queue (CreateQueue makes it)`, err.Error())
}
