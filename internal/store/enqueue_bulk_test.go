package store

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/clock"
)

// enqueue.lua with whole entries: ids the client chose are taken when
// next_task_ids could have given them, and the entries are built anew
// with the script's ids when not; tasks with unique keys of their own are
// added or left out one by one.
func TestEnqueueScriptBulk(t *testing.T) {
	t.Parallel()
	shaOf := func(key string) string {
		sum := sha1.Sum([]byte(key))
		return hex.EncodeToString(sum[:])
	}
	// guessAt makes the store's clock, from which it guesses the ids,
	// read at (µs) whatever the real time.
	guessAt := func(e *scriptEnv, at int64) {
		e.s.SetClock(clock.NewFake(time.UnixMicro(at)))
	}
	t.Run("ids guessed within the clock's second are taken", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		g := e.clock() + 500_000 // ahead of Redis, by less than a second
		guessAt(e, g)
		e.seed(keyState{"meta": hash{"name": "q", "registered": "1", "tid": "7"}})
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p1"), []byte("p2")}, EnqueueArgs{Kind: "k"})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(g), hexOf(g + 1)}, ids)
		e.expect(keyState{
			"meta":    hash{"name": "q", "registered": "1", "tid": decOf(g + 1)},
			"waiting": list{hexOf(g+1) + ",kk:p2", hexOf(g) + ",kk:p1"},
		})
		// The next call counts on from the last, whatever the clock says.
		ids, err = e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p3"), []byte("p4")}, EnqueueArgs{})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(g + 2), hexOf(g + 3)}, ids)
	})
	t.Run("ids guessed at or below the last id are given anew", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		x := e.clock() + 1e9
		e.seed(keyState{"meta": hash{"name": "q", "registered": "1", "tid": decOf(x)}})
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p1"), []byte("p2")}, EnqueueArgs{Kind: "k", Priority: "h"})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(x + 1), hexOf(x + 2)}, ids)
		e.expect(keyState{
			"meta": hash{"name": "q", "registered": "1", "tid": decOf(x + 2)},
			"high": list{hexOf(x+2) + ",kk,ph:p2", hexOf(x+1) + ",kk,ph:p1"},
		})
	})
	t.Run("ids guessed from a clock far from Redis's are given anew", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		guessAt(e, e.clock()+10_000_000)
		e.seed(keyState{"meta": hash{"name": "q", "registered": "1", "tid": "7"}})
		before := e.clock()
		ids, err := e.s.Enqueue(e.ctx, "q", [][]byte{[]byte("p1"), []byte("p2")}, EnqueueArgs{})
		require.NoError(t, err)
		first := e.within(int64(mustHex(t, ids[0])), before, e.clock(), "the first id")
		require.Equal(t, []string{hexOf(first), hexOf(first + 1)}, ids)
		e.expect(keyState{
			"meta":    hash{"name": "q", "registered": "1", "tid": decOf(first + 1)},
			"waiting": list{hexOf(first+1) + ":p2", hexOf(first) + ":p1"},
		})
	})
	t.Run("each task's unique key, held or not", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		x := e.clock() + 1e9
		e.seed(keyState{
			"meta":   hash{"name": "q", "registered": "1", "tid": decOf(x)},
			"unique": hash{shaOf("a"): "77"},
		})
		before := e.clockMs()
		payloads := [][]byte{[]byte("p1"), []byte("p2"), []byte("p3"), []byte("p4"), []byte("p5")}
		keys := []UniqueKey{{Key: "a"}, {Key: "b", TTL: time.Minute}, {}, {Key: "b"}, {Key: "c"}}
		ids, dup, err := e.s.EnqueueKeyed(e.ctx, "q", payloads, keys, EnqueueArgs{})
		require.NoError(t, err)
		require.Equal(t, []string{"77", hexOf(x + 2), hexOf(x + 3), hexOf(x + 2), hexOf(x + 5)}, ids)
		require.Equal(t, []bool{true, false, false, true, false}, dup)
		got := e.dump()
		until := e.within(int64(got["uniquettl"].(zset)[shaOf("b")]), before+60_000, e.clockMs()+60_000, "b's expiry")
		require.Equal(t, keyState{
			"meta":      hash{"name": "q", "registered": "1", "tid": decOf(x + 5)},
			"waiting":   list{hexOf(x+5) + ",u" + shaOf("c") + ":p5", hexOf(x+3) + ":p3", hexOf(x+2) + ":p2"},
			"unique":    hash{shaOf("a"): "77", shaOf("b"): hexOf(x + 2), shaOf("c"): hexOf(x + 5)},
			"uniquettl": zset{shaOf("b"): float64(until)},
		}, got)
	})
	t.Run("unique keys in whole entries", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		g := e.clock() + 500_000
		guessAt(e, g)
		e.seed(keyState{"meta": hash{"name": "q", "registered": "1", "tid": "7"}})
		ids, dup, err := e.s.EnqueueKeyed(e.ctx, "q", [][]byte{[]byte("p1"), []byte("p2"), []byte("p3")},
			[]UniqueKey{{Key: "a"}, {Key: "a"}, {}}, EnqueueArgs{Retain: time.Second})
		require.NoError(t, err)
		require.Equal(t, []string{hexOf(g), hexOf(g), hexOf(g + 2)}, ids)
		require.Equal(t, []bool{false, true, false}, dup)
		e.expect(keyState{
			"meta":     hash{"name": "q", "registered": "1", "tid": decOf(g + 2)},
			"waiting":  list{hexOf(g+2) + ",R1000:p3", hexOf(g) + ",R1000,u" + shaOf("a") + ":p1"},
			"unique":   hash{shaOf("a"): hexOf(g)},
			"retained": zset{hexOf(g): inf, hexOf(g + 2): inf},
		})
	})
	t.Run("every key held adds nothing", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "enqueue.lua")
		seeded := keyState{
			"meta":   hash{"name": "q", "registered": "1", "tid": "7"},
			"unique": hash{shaOf("a"): "77", shaOf("b"): "78"},
		}
		e.seed(seeded)
		ids, dup, err := e.s.EnqueueKeyed(e.ctx, "q", [][]byte{[]byte("p1"), []byte("p2")}, []UniqueKey{{Key: "b"}, {Key: "a"}}, EnqueueArgs{})
		require.NoError(t, err)
		require.Equal(t, []string{"78", "77"}, ids)
		require.Equal(t, []bool{true, true}, dup)
		e.expect(seeded)
	})
}

// mustHex is the number of hex digits s.
func mustHex(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 16, 64)
	require.NoError(t, err)
	return v
}

// Batches of one queue sent at once from many goroutines, and one batch
// of more calls than a round trip takes, each get ids of their own, in
// order, for the tasks stored under them.
func TestEnqueueBulkConcurrentAndLarge(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "enqueue.lua")
	const callers, batches, size = 8, 4, 50
	got := make([][]string, callers*batches)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for b := range batches {
				payloads := make([][]byte, size)
				for i := range payloads {
					payloads[i] = []byte(fmt.Sprintf("c%d-b%d-%d", c, b, i))
				}
				ids, err := e.s.Enqueue(e.ctx, "q", payloads, EnqueueArgs{})
				assert.NoError(t, err)
				got[c*batches+b] = ids
			}
		})
	}
	wg.Wait()
	e.s.bulkCalls = 2 // three calls, two round trips
	large := make([][]byte, e.s.bulkCalls*MaxTasksPerScript+1)
	for i := range large {
		large[i] = []byte("large-" + strconv.Itoa(i))
	}
	ids, err := e.s.Enqueue(e.ctx, "q", large, EnqueueArgs{})
	require.NoError(t, err)
	for i := 1; i < len(ids); i++ {
		require.Less(t, mustHex(t, ids[i-1]), mustHex(t, ids[i]), "ids count up in the batch's order")
	}

	want := make(map[string]string) // entry id -> payload
	for k, ids := range got {
		require.Len(t, ids, size)
		for i, id := range ids {
			want[id] = fmt.Sprintf("c%d-b%d-%d", k/batches, k%batches, i)
		}
	}
	for i, id := range ids {
		want[id] = "large-" + strconv.Itoa(i)
	}
	require.Len(t, want, callers*batches*size+len(large), "no id given twice")
	entries := e.dump()["waiting"].(list)
	require.Len(t, entries, len(want))
	for _, entry := range entries {
		id, payload, ok := strings.Cut(entry, ":")
		require.True(t, ok, entry)
		require.Equal(t, want[id], payload, "the entry of id %s", id)
	}
}
