package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/worqr/worqr/internal/subscription"
	"github.com/worqr/worqr/internal/testsignal"
)

// A reconciliation gives back what Redis says the worker holds in the
// queue and the session does not, keeps what it does, and ignores later
// hand-offs of what it gave back. It does nothing under a stale id, for
// a session no longer the queue's, or for a fenced worker.
func TestSessionReconcile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newFakeWorker(t, testID)
	var events testsignal.Signal[subscription.Event]
	s := w.serve(t, "q", w.clk.Now(), &events)
	ps := w.hold(t, "q", testID, 2)
	adopt(t, s, ps[0])
	s.Books.MarkUnsure(1, false)

	assert.NoError(t, s.Reconcile(ctx, staleID))
	assert.Len(t, w.held(t, "q", testID, ps), 2, "a reconciliation under a stale id gave tasks back")
	w.mu.Lock()
	delete(w.sessions, "q")
	w.mu.Unlock()
	assert.NoError(t, s.Reconcile(ctx, testID))
	assert.Len(t, w.held(t, "q", testID, ps), 2, "a session no longer the queue's gave tasks back")
	w.mu.Lock()
	w.sessions["q"] = s
	w.mu.Unlock()

	assert.NoError(t, s.Reconcile(ctx, testID))
	assert.Equal(t, []string{ps[0].PID}, w.held(t, "q", testID, ps), "the reconciliation gave back a process the session holds, or kept one it does not")
	assert.False(t, s.Books.IsUnsure(), "the pass was not counted")
	late := &Proc{ID: ps[1].PID, Seq: ps[1].Seq(), Queue: "q", Host: &fakeHost{}}
	assert.False(t, s.Adopt(late), "a hand-off of a task given back was taken")

	unknown := w.hold(t, "q", testID, 1)
	w.mu.Lock()
	w.state.ToFenced(testID, w.clk.Now())
	w.mu.Unlock()
	assert.NoError(t, s.Reconcile(ctx, testID))
	assert.Equal(t, []string{unknown[0].PID}, w.held(t, "q", testID, unknown), "a fenced worker reconciled")
}
