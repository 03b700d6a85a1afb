package queuestats

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/worqr/worqr"
)

// The pools of one label value are summed, in the order first seen: the
// workers' pools of the same queues, and those past the bound on names
// under OtherQueue; held slots are those neither busy nor free.
func TestSumSlots(t *testing.T) {
	t.Parallel()
	got := SumSlots([]worqr.PoolSlots{
		{Worker: "w1", Queues: []string{"a", "b"}, Size: 4, Busy: 1, Free: 2},
		{Worker: "w1", Queues: []string{"c"}, Size: 2, Busy: 2},
		{Worker: "w2", Queues: []string{"a", "b"}, Size: 4, Busy: 3, Free: 1},
		{Worker: "w2", Queues: []string{"d"}, Size: 1, Free: 1},
	}, NewQueues(2))
	assert.Equal(t, []PoolSlots{
		{Pool: "a,b", Busy: 4, Free: 3, Held: 1},
		{Pool: "c", Busy: 2},
		{Pool: OtherQueue, Free: 1},
	}, got)
}
