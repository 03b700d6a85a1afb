package outage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/clock"
)

// errDown stands for the client's ErrUnavailable.
var errDown = errors.New("redis unavailable")

func retryable(err error) bool { return errors.Is(err, errDown) }

// records keeps the log lines an Outage writes.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// attrs flattens a record's attributes, groups as "group.key".
func attrs(rec slog.Record) map[string]slog.Value {
	out := make(map[string]slog.Value)
	var add func(prefix string, a slog.Attr)
	add = func(prefix string, a slog.Attr) {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			for _, g := range v.Group() {
				add(prefix+a.Key+".", g)
			}
			return
		}
		out[prefix+a.Key] = v
	}
	rec.Attrs(func(a slog.Attr) bool { add("", a); return true })
	return out
}

// The outage's state does not flap when calls in flight across its start
// or end return in any order: an answer to a call sent before it began
// does not end it, and a failure of one sent before it ended does not
// begin another.
func TestOutageIgnoresCallsSentBeforeItChanged(t *testing.T) {
	t.Parallel()
	rec := &records{}
	clk := clock.NewFake(time.Unix(0, 0))
	o := New(slog.New(rec), clk, retryable)
	down := fmt.Errorf("x: %w", errDown)

	before := o.Begin()
	require.True(t, o.Failed(o.Begin(), "dequeue", down))
	o.OK(before) // sent before the outage: no news
	assert.NotNil(t, o.Counts(), "still out")
	during := o.Begin()
	require.True(t, o.Failed(during, "renewal", down))
	assert.False(t, o.Failed(during, "finish", errors.New("an error reply")), "not an outage: the caller's to log")
	clk.Advance(1500 * time.Millisecond)
	o.OK(during)
	assert.Nil(t, o.Counts(), "back")
	require.True(t, o.Failed(during, "finish", down), "a late failure is still an outage error")
	assert.Nil(t, o.Counts(), "but begins no outage")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.recs, 2, "one line when it began, one when it ended")
	assert.Equal(t, slog.LevelWarn, rec.recs[0].Level)
	back := rec.recs[1]
	assert.Equal(t, "worqr: Redis back after 1.5s", back.Message)
	a := attrs(back)
	assert.EqualValues(t, 1, a["failed.dequeue"].Int64())
	assert.EqualValues(t, 1, a["failed.renewal"].Int64())
	assert.NotContains(t, a, "failed.finish")
	assert.Equal(t, 1500*time.Millisecond, a["down"].Duration())
}
