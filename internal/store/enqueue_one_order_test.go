package store

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// A batch of 1,001 plain tasks goes as enqueue.lua's call of 1,000 and
// enqueue_one.lua's call of 1, one pipeline. When only enqueue_one.lua is
// in the server's script cache (a fresh server on which single tasks were
// enqueued first), the first call fails NOSCRIPT and is sent again after
// the second ran: the batch's last task is then ahead of its first.
func TestABatchKeepsItsOrderWhicheverScriptsAreCached(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	s := New(rdb, "worqrtest-"+uuid.NewString()[:8], false, false)
	require.NoError(t, rdb.Do(ctx, rdb.B().ScriptFlush().Build()).Error())
	// A single plain task loads enqueue_one.lua (EVAL after NOSCRIPT).
	_, err := s.Enqueue(ctx, "other", [][]byte{[]byte("x")}, EnqueueArgs{})
	require.NoError(t, err)
	payloads := make([][]byte, 1001)
	for i := range payloads {
		payloads[i] = []byte(strconv.Itoa(i))
	}
	ids, err := s.Enqueue(ctx, "q", payloads, EnqueueArgs{})
	require.NoError(t, err)
	// The front is the right end.
	front, err := rdb.Do(ctx, rdb.B().Lindex().Key(s.Keys().Queue("q").Waiting).Index(-1).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, ids[0]+":0", front, "the batch's first task is at the front of the queue")
	require.Less(t, ids[999], ids[1000], "the batch's ids count up")
}

// With both scripts loaded, a batch whose last chunk is one task keeps its
// order and its ids count up, through the bulk path.
func TestABatchWhoseLastChunkIsOneTaskKeepsItsOrder(t *testing.T) {
	rdb := testRedis(t)
	ctx := context.Background()
	s := New(rdb, "worqrtest-"+uuid.NewString()[:8], false, false)
	payloads := make([][]byte, 2001)
	for i := range payloads {
		payloads[i] = []byte(strconv.Itoa(i))
	}
	for range 2 { // the first loads the scripts
		ids, err := s.Enqueue(ctx, "q", payloads, EnqueueArgs{Kind: "k"})
		require.NoError(t, err)
		got, err := rdb.Do(ctx, rdb.B().Lrange().Key(s.Keys().Queue("q").Waiting).Start(0).Stop(2000).Build()).AsStrSlice()
		require.NoError(t, err)
		for i := range payloads {
			require.Equal(t, ids[i]+",kk:"+strconv.Itoa(i), got[2000-i])
			if i > 0 {
				require.Less(t, ids[i-1], ids[i])
			}
		}
		require.NoError(t, rdb.Do(ctx, rdb.B().Del().Key(s.Keys().Queue("q").Waiting).Build()).Error())
	}
}
