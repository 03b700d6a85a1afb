package worqrtest_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/worqrtest"
)

// Run gives an aggregated handler the members RunOptions name, through
// Process.Aggregated and TypedAggregated alike; without them the task is
// not aggregated.
func TestRunAggregated(t *testing.T) {
	t.Parallel()
	members := []worqr.AggregateMember{{TaskID: "a", Task: []byte(`1`)}, {TaskID: "b", Task: []byte(`2`)}}
	var got []worqr.AggregateMember
	var aggregated bool
	h := func(_ context.Context, p *worqr.Process) error {
		got, aggregated = p.Aggregated()
		return nil
	}
	_, err := worqrtest.Run(t.Context(), h, nil, worqrtest.RunOptions{Members: members})
	require.NoError(t, err)
	assert.True(t, aggregated)
	assert.Equal(t, members, got)

	_, err = worqrtest.Run(t.Context(), h, []byte("alone"), worqrtest.RunOptions{})
	require.NoError(t, err)
	assert.False(t, aggregated, "no Members: not aggregated")

	sum := worqr.TypedAggregated(nil, func(_ context.Context, p *worqr.Process, ns []int) error {
		total := 0
		for _, n := range ns {
			total += n
		}
		p.SetResult([]byte{byte(total)})
		return nil
	})
	result, err := worqrtest.Run(t.Context(), sum, nil, worqrtest.RunOptions{Members: members})
	require.NoError(t, err)
	assert.Equal(t, []byte{3}, result)

	_, err = worqrtest.Run(t.Context(), h, nil, worqrtest.RunOptions{Members: []worqr.AggregateMember{}})
	assert.ErrorIs(t, err, worqr.ErrInvalidOptions, "an aggregated task of no member")
}

// RunBatch settles each task of the batch as a worker does: by its
// BatchErrors entry, or by the handler's one error for all of them, or
// by a panic; and refuses what it cannot run.
func TestRunBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	errFlaky := errors.New("flaky")
	h := func(_ context.Context, batch []*worqr.Process) error {
		errs := worqr.BatchErrors{}
		for _, p := range batch {
			switch string(p.Task()) {
			case "flaky":
				errs[p] = errFlaky
			case "bad":
				errs[p] = worqr.Permanent(errFlaky)
			case "boom":
				panic("boom")
			default:
				p.SetResult(append([]byte("done "), p.Task()...))
			}
		}
		return errs
	}
	res, err := worqrtest.RunBatch(ctx, h, [][]byte{[]byte("ok"), []byte("flaky"), []byte("bad")}, worqrtest.RunOptions{TaskID: "t", Queue: "rows"})
	require.NoError(t, err)
	require.Len(t, res, 3)
	assert.Equal(t, "t-1", res[0].Task.TaskID())
	assert.Equal(t, "rows", res[0].Task.Queue())
	assert.Equal(t, "done ok", string(res[0].Result))
	assert.NoError(t, res[0].Err)
	assert.ErrorIs(t, res[1].Err, errFlaky)
	assert.False(t, worqr.IsPermanent(res[1].Err), "retried")
	assert.True(t, worqr.IsPermanent(res[2].Err), "dead-lettered")

	res, err = worqrtest.RunBatch(ctx, func(context.Context, []*worqr.Process) error { return errFlaky },
		[][]byte{[]byte("a"), []byte("b")}, worqrtest.RunOptions{})
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.NotEqual(t, res[0].Task.TaskID(), res[1].Task.TaskID(), "each task its own id")
	for _, r := range res {
		assert.ErrorIs(t, r.Err, errFlaky, "one error for every task")
	}

	res, err = worqrtest.RunBatch(ctx, h, [][]byte{[]byte("ok"), []byte("boom")},
		worqrtest.RunOptions{PanicIsPermanent: true, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	for _, r := range res {
		assert.ErrorIs(t, r.Err, worqr.ErrHandlerPanicked)
		assert.True(t, worqr.IsPermanent(r.Err))
	}

	for name, tc := range map[string]struct {
		h    worqr.BatchHandler
		ps   [][]byte
		opts worqrtest.RunOptions
	}{
		"nil handler": {nil, [][]byte{nil}, worqrtest.RunOptions{}},
		"no task":     {h, nil, worqrtest.RunOptions{}},
		"members":     {h, [][]byte{nil}, worqrtest.RunOptions{Members: []worqr.AggregateMember{{TaskID: "a"}}}},
		"middleware":  {h, [][]byte{nil}, worqrtest.RunOptions{Middleware: []worqr.Middleware{func(next worqr.Handler) worqr.Handler { return next }}}},
	} {
		_, err := worqrtest.RunBatch(ctx, tc.h, tc.ps, tc.opts)
		assert.ErrorIs(t, err, worqr.ErrInvalidOptions, name)
	}
}
