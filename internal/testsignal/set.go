package testsignal

import "time"

// Set is a client's test signals, one per event of its components that a
// test driving the client's clock by hand waits on. A test turns one on
// (Init) after the client is made and before the components it watches
// start.
type Set struct {
	// Beat: a beat's round took in its answers, and the beat's timer is
	// set for the next; the number of workers it renewed.
	Beat Signal[int]
	// QueueRenewed: a renewal of a queue lease sent apart from the
	// registry's (see session.renew) was answered, or failed; the queue.
	QueueRenewed Signal[string]
	// Looked: a reclaimer's look ended; the tasks it sent back.
	Looked Signal[int64]
	// Armed: a scheduler set its timer for a due time (Unix µs, Redis
	// clock).
	Armed Signal[int64]
	// Promoted: a scheduler ran a promotion of its queue's due tasks.
	Promoted Signal[string]
	// Ticked: a periodic schedule ran a tick (the tick's time).
	Ticked Signal[time.Time]
	// Waiting: a periodic schedule set its timer for a tick, or to try
	// one again (the tick's time).
	Waiting Signal[time.Time]
	// Rejoined: a fenced queue's lease was taken again.
	Rejoined Signal[string]
	// Registered: a fenced worker registered again; its new id.
	Registered Signal[string]
	// Swept: a workflow sweep of a queue ended; the notices it carried.
	Swept Signal[int]
	// Joined: a batch handler's call joined its queue's batch filling
	// (engine.Batcher.Join); the queue, and how many the batch then held.
	Joined Signal[BatchJoin]
}

// BatchJoin is the Joined signal's value.
type BatchJoin struct {
	Queue string
	N     int
}
