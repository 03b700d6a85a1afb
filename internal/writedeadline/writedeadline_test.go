package writedeadline

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Writes that start within an eighth of a TTL of each other share one
// context, whose deadline leaves each at least a TTL; the context ends
// with the life it was made from.
func TestWritesShareOneContextWithAtLeastATTL(t *testing.T) {
	life, end := context.WithCancel(context.Background())
	var d Deadline
	const ttl = time.Hour // the test runs well within an eighth of it
	start := time.Now()
	first := d.Ctx(life, ttl)
	assert.Same(t, first, d.Ctx(life, ttl), "one context for writes close together")
	dl, ok := first.Deadline()
	require.True(t, ok)
	assert.GreaterOrEqual(t, dl.Sub(start), ttl, "a TTL at least")
	assert.LessOrEqual(t, dl.Sub(start), ttl+ttl/8+time.Minute, "and at most an eighth more")
	end()
	<-first.Done() // ends with the life
}

// A write that starts when less than a TTL is left on the shared context
// gets a new one.
func TestAWriteAfterTheSlackGetsANewContext(t *testing.T) {
	var d Deadline
	const ttl = 8 * time.Millisecond
	first := d.Ctx(context.Background(), ttl)
	dl, _ := first.Deadline()
	for time.Until(dl) >= ttl { // the slack, an eighth of a TTL, runs out
		time.Sleep(time.Millisecond)
	}
	assert.NotSame(t, first, d.Ctx(context.Background(), ttl))
}
