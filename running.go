package worqr

import "sync"

// running counts a runtime's handlers: those running, and those that
// returned until their outcome is written. It is a sync.WaitGroup that may
// be added to while a waiter still waits: a StopWork whose handlers
// outlived their cancel, and whose release failed, leaves the queue served
// and its loop started again while its waiting goroutine still waits; with
// a WaitGroup, that loop's first Add would race the old Wait (and could
// panic with "WaitGroup is reused before previous Wait has returned").
// Here a waiter waits for the count to be zero once, whatever comes after.
type running struct {
	mu sync.Mutex // guards the fields below
	n  int
	// zero is closed when n next reaches zero; made when a waiter asks
	// while n > 0, and dropped once closed.
	zero chan struct{}
}

// add adds d (which may be negative) to the count.
func (c *running) add(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += d
	if c.n < 0 {
		panic("worqr: negative count of running handlers")
	}
	if c.n == 0 && c.zero != nil {
		close(c.zero)
		c.zero = nil
	}
}

// done is add(-1): a handler ended.
func (c *running) done() { c.add(-1) }

// drained returns a channel closed once the count is zero: at once if it
// is now.
func (c *running) drained() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	return c.zero
}

// wait waits for the count to be zero.
func (c *running) wait() { <-c.drained() }
