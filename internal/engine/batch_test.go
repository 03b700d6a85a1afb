package engine

// The batcher on its own: a batch's start (full, after its wait on the
// fake clock, or as the runtime stops taking work), a member leaving
// before it starts, and the outcomes it gives each member.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
)

// batchRig is a batcher on a runtime that takes work (its scheduler's
// loop never runs), whose handler sends each batch's process ids and
// returns what fail says; each join's outcome comes on outcomes, by
// process id.
type batchRig struct {
	w        *fakeWorker
	r        *Runtime
	b        *Batcher
	batches  chan string
	joined   chan int
	outcomes chan joinOutcome
}

type joinOutcome struct {
	id  string
	err error
}

func newBatchRig(t *testing.T, opts BatchOptions, call func(ctx context.Context, ids []string) (func(*Proc) error, error)) *batchRig {
	k := &batchRig{batches: make(chan string, 10), joined: make(chan int, 10), outcomes: make(chan joinOutcome, 10)}
	k.r = idleMember(t, 10)
	k.w = k.r.host.(*fakeWorker)
	k.r.StartLoop()
	k.b = NewBatcher(k.r, func(ctx context.Context, batch []*BatchMember) (func(*Proc) error, error) {
		ids := make([]string, len(batch))
		for i, m := range batch {
			ids[i] = m.Proc().ID
		}
		k.batches <- strings.Join(ids, " ")
		return call(ctx, ids)
	}, opts, k.w.clk, func(n int) { k.joined <- n })
	return k
}

// join runs a handler call for a process of id on ctx, on a goroutine of
// its own, once it has joined the batch filling.
func (k *batchRig) join(t *testing.T, ctx context.Context, id string) {
	go func() { k.outcomes <- joinOutcome{id, k.b.Join(ctx, &Proc{ID: id})} }()
	recv(t, k.joined, "joined "+id)
}

func (k *batchRig) outcome(t *testing.T) joinOutcome { return recv(t, k.outcomes, "an outcome") }

func finishAll(context.Context, []string) (func(*Proc) error, error) { return nil, nil }

// A full batch runs at once, in the order its calls joined, and each
// member gets its own entry of the handler's outcome.
func TestBatcherRunsAFullBatchWithEachOutcome(t *testing.T) {
	t.Parallel()
	errBad := errors.New("bad row")
	k := newBatchRig(t, BatchOptions{Size: 3, Wait: time.Hour}, func(context.Context, []string) (func(*Proc) error, error) {
		return func(p *Proc) error {
			if p.ID == "b" {
				return errBad
			}
			return nil
		}, errBad
	})
	for _, id := range []string{"c", "a", "b"} {
		k.join(t, t.Context(), id)
	}
	assert.Equal(t, "c a b", recv(t, k.batches, "the batch"))
	got := map[string]error{}
	for range 3 {
		o := k.outcome(t)
		got[o.id] = o.err
	}
	assert.Equal(t, map[string]error{"a": nil, "b": errBad, "c": nil}, got)
	assert.Zero(t, k.b.Pending())
}

// A batch that is not full starts once its wait has passed, not before;
// a member whose context ended before then leaves it.
func TestBatcherStartsAPartialBatchAfterItsWait(t *testing.T) {
	t.Parallel()
	k := newBatchRig(t, BatchOptions{Size: 5, Wait: 100 * time.Millisecond}, finishAll)
	k.join(t, t.Context(), "a")
	ctx, cancel := context.WithCancelCause(t.Context())
	k.join(t, ctx, "b")
	k.join(t, t.Context(), "c")
	gone := errors.New("cancelled (test)")
	cancel(gone)
	assert.Equal(t, joinOutcome{"b", gone}, k.outcome(t), "left the batch")
	assert.Equal(t, 2, k.b.Pending())
	require.Equal(t, 1, k.w.clk.Timers(), "the batch's timer")
	// Advance takes a timer due off the clock before it fires.
	k.w.clk.Advance(99 * time.Millisecond)
	assert.Equal(t, 1, k.w.clk.Timers(), "the batch's timer fired before its wait")
	k.w.clk.Advance(time.Millisecond)
	assert.Equal(t, "a c", recv(t, k.batches, "the partial batch"))
	for range 2 {
		assert.NoError(t, k.outcome(t).err)
	}
}

// As the runtime stops taking work, the batch filling starts with what
// it holds, and a call that joins after the stop starts its batch at
// once.
func TestBatcherStartsAsTheRuntimeStops(t *testing.T) {
	t.Parallel()
	k := newBatchRig(t, BatchOptions{Size: 5, Wait: time.Hour}, finishAll)
	k.join(t, t.Context(), "a")
	k.r.StopTaking()
	assert.Equal(t, "a", recv(t, k.batches, "the batch, on the stop"))
	assert.NoError(t, k.outcome(t).err)
	k.join(t, t.Context(), "late")
	assert.Equal(t, "late", recv(t, k.batches, "a join after the stop"))
	assert.NoError(t, k.outcome(t).err)
}

// A handler that panics fails every member with ErrHandlerPanicked
// (Permanent under PanicIsPermanent); one that ran out of the batch's
// time fails them with ErrTaskTimeout, reason timeout.
func TestBatcherPanicAndTimeout(t *testing.T) {
	t.Parallel()
	k := newBatchRig(t, BatchOptions{Size: 1, PanicIsPermanent: true}, func(context.Context, []string) (func(*Proc) error, error) {
		panic("boom")
	})
	k.join(t, t.Context(), "a")
	err := k.outcome(t).err
	assert.ErrorIs(t, err, errs.ErrHandlerPanicked)
	assert.True(t, IsPermanent(err), "PanicIsPermanent")
	assert.Contains(t, k.w.logs.String(), "batch handler panicked")

	k = newBatchRig(t, BatchOptions{Size: 1, Timeout: time.Nanosecond}, func(ctx context.Context, _ []string) (func(*Proc) error, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	k.join(t, t.Context(), "a")
	err = k.outcome(t).err
	assert.ErrorIs(t, err, errs.ErrTaskTimeout)
	assert.Equal(t, ReasonTimeout, Reason(err, ""))
	require.False(t, IsPermanent(err))
}
