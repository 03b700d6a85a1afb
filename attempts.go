package worqr

import (
	"time"

	"github.com/worqr/worqr/internal/store"
)

// AttemptEnd is how a failed attempt at a task ended (see Attempt).
type AttemptEnd string

// How attempts end, in a task's history.
const (
	// AttemptRetried: the attempt failed and the task went back to wait,
	// at once or after a delay, for another.
	AttemptRetried AttemptEnd = "retried"
	// AttemptDead: the attempt failed and the task went to the dead
	// letters (with its reason, DeadLetter.Reason).
	AttemptDead AttemptEnd = "dead"
	// AttemptReclaimed: the worker that held the process was lost (its
	// lease ran out) and a peer, or Client.Check's repair, gave the task
	// back to its queue.
	AttemptReclaimed AttemptEnd = "reclaimed"
)

// MaxAttemptHistory is how many attempts a task's history keeps: the last
// ones, older ones dropped.
const MaxAttemptHistory = 10

// MaxAttemptErrorLen is the longest error text an attempt in a history
// keeps, in bytes (a rune cut at the bound is dropped whole).
const MaxAttemptErrorLen = 1024

// Attempt is one failed attempt at a task, in its history
// (TaskLocation.History). A task keeps its last MaxAttemptHistory failed
// attempts, written by the same script that retries, buries or reclaims
// it, and they go with the task: when it finishes, is cancelled or
// deleted, or its dead letter is requeued, deleted or trimmed. A task
// that never failed has none, and costs nothing more.
type Attempt struct {
	// EndedAt is when the attempt ended, by the Redis clock (to the
	// millisecond).
	EndedAt time.Time
	// End says how it ended.
	End AttemptEnd
	// Worker is the id of the worker that held it.
	Worker string
	// Error is the error it failed with, its first MaxAttemptErrorLen
	// bytes; "" for none (a reclaimed attempt has none).
	Error string
}

var attemptEnds = map[byte]AttemptEnd{
	store.AttemptRetried:   AttemptRetried,
	store.AttemptDead:      AttemptDead,
	store.AttemptReclaimed: AttemptReclaimed,
}

func attemptHistory(as []store.Attempt) []Attempt {
	if len(as) == 0 {
		return nil
	}
	out := make([]Attempt, len(as))
	for i, a := range as {
		out[i] = Attempt{EndedAt: time.UnixMilli(a.Ended), End: attemptEnds[a.How], Worker: a.Worker, Error: a.Error}
	}
	return out
}
