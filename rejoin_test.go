package worqr

// The rejoin (rejoin.go) on its own: one attempt (tryRejoin) called
// directly after a session's fence, with the clock held, so the rejoin the
// fence started waits.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/lifecycle"
)

// A rejoin gives back the tasks Redis still says the worker holds in the
// queue, at the front, and takes the queue's lease again; one under an id
// no longer current, or for a session that is not fenced, does nothing.
func TestRejoinGivesBackAndServesAgain(t *testing.T) {
	t.Parallel()
	k := setupClocked(t)
	c, ctx := k.c, k.ctx
	c.signals.rejoined.Init(t)
	w := newWorker(t, c, WorkerOptions{StayFenced: true})
	require.NoError(t, w.StartWork(ctx, "q", Events{}))
	enqueueNumbered(t, c, "q", 2)
	p := dequeueAll(t, w, "q", 1)[0]
	s, id := sessionOf(w, "q"), w.ID()

	done, err := s.tryRejoin(ctx, id)
	require.NoError(t, err)
	assert.True(t, done, "serving: nothing to rejoin")
	assert.Equal(t, []string{"t0001"}, waiting(t, c, "q"))

	s.fence(id, errTestLease)
	require.ErrorIs(t, p.Err(), ErrProcessLost)
	done, err = s.tryRejoin(ctx, "stale-id")
	require.NoError(t, err)
	assert.True(t, done, "a stale id gives up")
	assert.Equal(t, []string{"t0001"}, waiting(t, c, "q"), "nothing given back under a stale id")
	c.signals.rejoined.RequireEmpty()

	done, err = s.tryRejoin(ctx, id)
	require.NoError(t, err)
	assert.True(t, done)
	assert.Equal(t, "q", c.signals.rejoined.WaitOrTimeout())
	assert.Equal(t, []string{"t0000", "t0001"}, waiting(t, c, "q"), "the lost process's task back at the front")
	lookAt(s, func() { assert.Equal(t, lifecycle.SessionServing, s.state) })
	again := dequeueAll(t, w, "q", 1)[0]
	assert.Equal(t, "t0000", string(again.Task()), "served again under the same id")
	assert.Equal(t, id, again.Owner())
}
