package worqr

import (
	"time"

	"github.com/worqr/worqr/internal/delayed"
	"github.com/worqr/worqr/internal/engine"
)

// newSession makes the session of a queue (engine.Session: its gate,
// lease, in-flight processes, dispatcher, timer of delayed tasks, the
// application's events and, for Handle, its runtime), over the worker as
// its host, serving under a lease whose deadline is deadline, and
// subscribes it to the queue's events.
func newSession(w *Worker, queue string, events Events, r *engine.Runtime, deadline time.Time) *engine.Session {
	s := new(engine.Session)
	s.Init((*workerHost)(w), &w.env, queue, engine.Events(events), r, deadline, delayed.New(delayedEnv(w), w.life, queue))
	s.Subscribe(w.life)
	return s
}
