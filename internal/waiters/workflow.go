package waiters

import (
	"context"
	"fmt"
	"strings"

	"github.com/worqr/worqr/internal/errs"
)

// WaitWorkflow waits until workflow id has ended, ctx ends or the client
// closes, without polling: it listens on the workflow's channel, where its
// end is announced, and reads the workflow's brief state once subscribed
// and whenever it hears an end. noWorkflow is the error of a workflow
// unknown, or ended and past its keep (the root's ErrNoWorkflow); fail
// wraps a failed read's error.
func (ws *Waiters) WaitWorkflow(ctx context.Context, id string, noWorkflow error, fail func(op, queue string, err error) error) error {
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	// Subscribed (or subscribed again): the end may have been missed, so
	// read. An "e" message is the end.
	l := ws.store.ListenWorkflow(id, poke, func(msg string) {
		if strings.HasPrefix(msg, "e") {
			poke()
		}
	})
	defer l.Stop(context.WithoutCancel(ctx), true)
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("worqr: wait workflow %s: %w", id, ctx.Err())
		case <-ws.Closed():
			return fmt.Errorf("worqr: wait workflow %s: %w", id, errs.ErrClientClosed)
		case <-wake:
		}
		// Its state alone, until it has ended: the steps' are read by
		// the caller, once.
		rec, ok, err := ws.store.WorkflowBrief(ctx, id)
		switch {
		case err != nil:
			return fail("wait workflow", "", err)
		case !ok:
			return fmt.Errorf("worqr: wait workflow %s: %w", id, noWorkflow)
		case rec.State != "running":
			return nil
		}
	}
}
