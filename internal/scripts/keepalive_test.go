package scripts

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
)

// A renewal of one worker serving one queue, while no lease has run out,
// makes six calls inside keepalive.lua: TIME, the registry's first two
// (which tell both whether any lease has run out and the next to), a
// ZADD of the registry and its ZCOUNT (the fleet's live workers, which
// set the reclaimers' chance of looking), a ZSCORE and a ZADD of the queue's
// leases. Each call is Redis time that a fleet of one-worker processes
// spends on every renewal. The calls are counted by a redis.call that
// shadows Redis's.
func TestKeepaliveOfOneWorkerMakesSixCalls(t *testing.T) {
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, AlwaysRESP2: true, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdb.Close)
	ctx := context.Background()
	body := source("keepalive.lua")
	if !strings.Contains(body, "\nreturn out\n") {
		t.Fatal("keepalive.lua no longer ends in `return out`")
	}
	counted := "local calls, real = 0, redis\n" +
		"local redis = setmetatable({call = function(...) calls = calls + 1; return real.call(...) end}, {__index = real})\n" +
		commonFor(false, false) + strings.Replace(body, "\nreturn out\n", "\nreturn calls\n", 1)
	now := time.Now().UnixMilli()
	for i, w := range []string{"a", "b", "c"} {
		m.ZAdd("workers", float64(now+int64(10_000*(i+1))), w)
	}
	m.ZAdd("leases", float64(now+30_000), "c")
	for _, w := range []string{"a", "c"} { // the first lease, and a later one
		calls, err := rdb.Do(ctx, rdb.B().Eval().Script(counted).Numkeys(3).Key("workers", "reclaiming", "leases").
			Arg("60000", w, "1").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if calls > 6 {
			t.Errorf("renewing %s: %d calls, want 6", w, calls)
		}
		if w == "c" && calls != 6 {
			t.Errorf("renewing c: %d calls, want 6", calls)
		}
	}
	if s, _ := m.ZScore("leases", "c"); s <= float64(now+30_000) {
		t.Errorf("c's queue lease was not renewed: %v", strconv.FormatFloat(s, 'f', 0, 64))
	}
}
