package worqr

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A waiter waits for the count to reach zero once: counts added after
// that concern later waiters only; a count added while it waits delays it.
func TestRunningWaitsForZeroOnce(t *testing.T) {
	var c running
	select {
	case <-c.drained():
	default:
		t.Fatal("nothing running: drained at once")
	}
	c.add(1)
	first := c.drained()
	c.add(2) // while first waits
	c.done()
	c.done()
	select {
	case <-first:
		t.Fatal("drained with one still running")
	default:
	}
	c.done()
	recv(t, first, time.Second, "drained at zero")
	c.add(1) // a restarted loop's handler: the old waiter is long gone
	second := c.drained()
	select {
	case <-second:
		t.Fatal("a new waiter waits for the new handler")
	default:
	}
	c.done()
	recv(t, second, time.Second, "the new waiter drained")
	assert.Panics(t, func() { c.done() }, "below zero is a bug")
}
