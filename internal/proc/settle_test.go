package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/worqr/worqr/internal/clock"
	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/outage"
)

// The task's own budget wins over the policy's, which wins over the
// default; a negative budget never runs out.
func TestExhausted(t *testing.T) {
	for _, c := range []struct {
		policy, own, failed int
		want                bool
	}{
		{0, 0, 9, false}, {0, 0, 10, true},
		{3, 0, 2, false}, {3, 0, 3, true},
		{3, 5, 3, false}, {3, 5, 5, true},
		{-1, 0, 1000, false}, {3, -1, 1000, false},
	} {
		got := Policy{MaxAttempts: c.policy}.Exhausted(c.failed, c.own, 10)
		assert.Equal(t, c.want, got, "policy %d, own %d, failed %d", c.policy, c.own, c.failed)
	}
}

// The error text recorded is cut at MaxErrorLen bytes.
func TestErrorText(t *testing.T) {
	assert.Equal(t, "", ErrorText(nil))
	assert.Equal(t, "boom", ErrorText(errors.New("boom")))
	assert.Len(t, ErrorText(errors.New(strings.Repeat("x", MaxErrorLen+10))), MaxErrorLen)
}

type unrecordedLog struct{ errs []error }

func (u *unrecordedLog) Unrecorded(err error) { u.errs = append(u.errs, err) }

// writer is a worker as Persist takes it: an outage on a fake clock, and
// its life.
type writer struct {
	outage *outage.Outage
	life   context.Context
}

func (w writer) Outage() *outage.Outage    { return w.outage }
func (w writer) Life() context.Context     { return w.life }
func (w writer) WriteCtx() context.Context { return w.life }

func testWriter(life context.Context) writer {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return writer{outage.New(log, clock.NewFake(time.Unix(1000, 0)), Retryable), life}
}

// A write that failed on the connection is tried again, on the backoff
// (of the system's clock: 50 ms, then 100), until it goes through; the
// process is marked unwritten meanwhile.
func TestPersistTriesAgainAfterAnOutage(t *testing.T) {
	w := testWriter(context.Background())
	var s State
	u := &unrecordedLog{}
	tries := 0
	write := func(context.Context) error {
		tries++
		if tries < 3 {
			return fmt.Errorf("finish: %w", errs.ErrUnavailable)
		}
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Persist(w, &s, u, "finish", write, w.outage.Begin(), write(context.Background()))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Persist did not return once the write went through")
	}
	assert.Equal(t, 3, tries)
	assert.True(t, s.IsUnwritten())
	assert.Empty(t, u.errs)
	assert.Nil(t, w.outage.Counts(), "the outage ended with the write")
}

// A write that failed for any other reason, or found the process lost or
// dropped, is not tried again; only the failure is told.
func TestPersistGivesUpAtOnce(t *testing.T) {
	ctx := context.Background()
	w := testWriter(ctx)
	bad := errors.New("script error")
	for _, outcome := range []error{nil, errs.ErrTaskCancelled, errs.ErrQueueDeleted, errs.ErrProcessLost, bad} {
		var s State
		u := &unrecordedLog{}
		Persist(w, &s, u, "finish", func(context.Context) error {
			t.Fatal("tried again")
			return nil
		}, w.outage.Begin(), outcome)
		assert.False(t, s.IsUnwritten(), "%v", outcome)
		if outcome == bad {
			assert.Equal(t, []error{bad}, u.errs)
		} else {
			assert.Empty(t, u.errs, "%v", outcome)
		}
	}
}

// A write still failing when the worker's life ends is given up, and
// told.
func TestPersistEndsWithTheWorker(t *testing.T) {
	life, cancel := context.WithCancel(context.Background())
	w := testWriter(life)
	var s State
	u := &unrecordedLog{}
	down := fmt.Errorf("finish: %w", errs.ErrUnavailable)
	tried := make(chan struct{}, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Persist(w, &s, u, "finish", func(context.Context) error { tried <- struct{}{}; return down }, w.outage.Begin(), down)
	}()
	<-tried // tried again once: it would go on while the worker lives
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Persist did not return when the worker's life ended")
	}
	assert.Equal(t, []error{down}, u.errs)
}
