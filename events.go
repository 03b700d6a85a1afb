package worqr

// Events are a worker's callbacks for one queue, given to StartWork. Each
// may be nil. They run one at a time per queue, in the order the events
// arrived, on a goroutine of the worker's: never on the Redis connection's
// reader, so a slow callback delays only its own queue's events.
type Events struct {
	// Work is called when tasks may be waiting: after an enqueue (also
	// one handed straight to an idle runtime, count 1), a stop or a
	// reclaim (count is how many tasks that added), and after every
	// (re)subscription and re-registration when the queue is not empty
	// (count is the queue's length then). Work events that pile up while a
	// callback runs are merged into one, with their counts added.
	Work func(queue string, count int64)
	// Cancel is called with the id of each cancelled task that was in
	// flight (on any worker) when it was cancelled. Processes of this
	// worker holding it have already ended with ErrTaskCancelled. A task
	// cancelled while it waited is simply gone: no event is raised.
	Cancel func(queue string, taskID string)
	// Delete is called when the queue was deleted. Processes of this worker
	// in it have already ended with ErrQueueDeleted.
	Delete func(queue string)
}
