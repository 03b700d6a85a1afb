package worqrtype

// BatchResult is what EnqueueBatchItems did with one item.
type BatchResult struct {
	// ID is the task's id; for a duplicate, the id of the task holding
	// its unique key.
	ID string
	// Duplicate reports that the item's unique key was held, by a task
	// enqueued before or by an earlier item of the same call, so that
	// nothing was added for it.
	Duplicate bool
}

// CancelResult says what Cancel found.
type CancelResult struct {
	// Removed counts the tasks removed before they started: waiting ones
	// and delayed ones, together.
	Removed int64
	// Marked counts in-flight processes that were marked cancelled; their
	// workers get a cancel event.
	Marked int64
}
