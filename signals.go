package worqr

// The test signals of the engine's components: each says what it did,
// so that a test that drives the client's clock by hand waits on the event
// rather than polling. Off (a nil check each) unless a test turns one on.

import (
	"time"

	"github.com/worqr/worqr/internal/testsignal"
)

// signals are a client's test signals. A test turns one on (Init) after
// New and before the components it watches start.
type signals struct {
	// beat: a beat's round took in its answers, and the beat's timer is
	// set for the next; the number of workers it renewed.
	beat testsignal.Signal[int]
	// queueRenewed: a renewal of a queue lease sent apart from the
	// registry's (see session.renew) was answered, or failed; the queue.
	queueRenewed testsignal.Signal[string]
	// looked: a reclaimer's look ended; the tasks it sent back.
	looked testsignal.Signal[int64]
	// armed: a scheduler set its timer for a due time (Unix µs, Redis
	// clock).
	armed testsignal.Signal[int64]
	// promoted: a scheduler ran a promotion of its queue's due tasks.
	promoted testsignal.Signal[string]
	// ticked: a periodic schedule ran a tick (the tick's time).
	ticked testsignal.Signal[time.Time]
	// waiting: a periodic schedule set its timer for a tick, or to try
	// one again (the tick's time).
	waiting testsignal.Signal[time.Time]
	// rejoined: a fenced queue's lease was taken again.
	rejoined testsignal.Signal[string]
	// registered: a fenced worker registered again; its new id.
	registered testsignal.Signal[string]
	// swept: a workflow sweep of a queue ended; the notices it carried.
	swept testsignal.Signal[int]
	// joined: a batch handler's call joined its queue's batch filling
	// (engine.Batcher.Join); the queue, and how many the batch then held.
	joined testsignal.Signal[batchJoin]
}

// batchJoin is the joined signal's value.
type batchJoin struct {
	queue string
	n     int
}
