package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// release.lua, every key: a dead worker's processes go back to the front
// of their lists, the oldest frontmost, each with one more start and due
// now; a cancelled one is dropped with its error and unique key; the
// worker's lease and idle entry go; another worker's process stays. (Its
// poison-pill guard: TestReleaseRunsThePoisonGuard.)
func TestReleaseScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "release.lua")
	dead, other := e.worker(), e.worker()
	now := e.clockMs()
	e.seed(keyState{
		"meta":     hash{"name": "q", "seq": "30", "wx": "2"},
		"leases":   zset{dead: float64(now - 1), other: float64(now + hour)},
		"idle":     zset{dead: 1, other: 2},
		"waiting":  list{"40:waits"},
		"high":     list{"41,ph:waits"},
		"procs":    hash{"10": "a" + dead + "51:older", "20": "a" + dead + "52,ph,w3:newer", "25": "c" + dead + "53,uabc:gone", "28": "a" + other + "54:stays"},
		"errors":   hash{"53": "e", "53:a": attemptRecord(1, 'r', dead, "e")},
		"unique":   hash{"abc": "53"},
		"progress": hash{"51": "10,5,1:", "54": "28,5,1:"},
	})
	before := e.clock()
	r := e.s.ReleaseOne(e.ctx, Release{Queue: "q", Worker: dead, Mode: ReleaseExpired})
	require.NoError(t, r.Err)
	assert.Equal(t, Released{Returned: 2, UpTo: 30, Dropped: 1}, r)
	got := e.dump()
	after := e.clock()
	due := e.within(field(t, got["waiting"].(list)[1], "d", 16), before, after, "when it became due")
	dueHigh := e.within(field(t, got["high"].(list)[1], "d", 16), before, after, "when it became due")
	at := e.within(attemptEnded(t, got["waiting"].(list)[1]), before/1000, after/1000, "when it was reclaimed")
	// The reclaimed attempt is noted in each entry, the errors hash
	// untouched but for the cancelled task's history, which goes.
	e.same(keyState{
		"meta":     hash{"name": "q", "seq": "30"},
		"leases":   zset{other: float64(now + hour)},
		"idle":     zset{other: 2},
		"waiting":  list{"40:waits", "51,a1" + attemptFields(1, at, 'k', dead, "", "") + ",d" + hexOf(due) + ":older"},
		"high":     list{"41,ph:waits", "52,ph,w3,a1" + attemptFields(1, at, 'k', dead, "", "") + ",d" + hexOf(dueHigh) + ":newer"},
		"procs":    hash{"28": "a" + other + "54:stays"},
		"progress": hash{"54": "28,5,1:"},
	}, got)
}

// progress.lua: an active process's report is written under its task's
// id with the time; a cancelled one's is not.
func TestProgressScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "progress.lua")
	w := e.worker()
	lease := float64(e.clockMs() + hour)
	e.seed(keyState{
		"leases": zset{w: lease},
		"procs":  hash{"1": "a" + w + "61,a1:x", "2": "c" + w + "62:y"},
	})
	before := e.clockMs()
	out, err := e.s.ReportProgress(e.ctx, "q", ProcRef{Worker: w, PID: "1"}, 40, "a, b: c")
	require.NoError(t, err)
	assert.Equal(t, WasActive, out)
	out, err = e.s.ReportProgress(e.ctx, "q", ProcRef{Worker: w, PID: "2"}, 50, "")
	require.NoError(t, err)
	assert.Equal(t, WasCancelled, out)
	got := e.dump()
	p, ok := ParseProgress(got["progress"].(hash)["61"])
	require.True(t, ok)
	at := e.within(p.At, before, e.clockMs(), "when it reported")
	e.same(keyState{
		"leases":   zset{w: lease},
		"procs":    hash{"1": "a" + w + "61,a1:x", "2": "c" + w + "62:y"},
		"progress": hash{"61": "1,40," + decOf(at) + ":a, b: c"},
	}, got)
}

// check_repair.lua: processes whose owner holds no live lease go back to
// the front (their attempts noted as reclaimed), expired lease entries and stray progress reports go, and the
// count of weight in flight is set to what the processes left hold.
func TestCheckRepairScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_repair.lua")
	gone, live := e.worker(), e.worker()
	now := e.clockMs()
	e.seed(keyState{
		"meta":     hash{"name": "q", "seq": "30", "wx": "5"},
		"leases":   zset{gone: float64(now - 1), live: float64(now + hour)},
		"procs":    hash{"10": "a" + gone + "51:orphan", "20": "a" + live + "52,w3:held"},
		"progress": hash{"51": "10,5,1:", "52": "20,5,1:", "59": "9,5,1:stray"},
	})
	before := e.clock()
	sets := e.s.CheckScripts()
	r := e.s.RepairQueues(e.ctx, []string{"q"}, sets)
	require.Len(t, r, 1)
	require.NoError(t, r[0].Err)
	assert.Equal(t, QueueRepair{Requeued: 1, LeasesRemoved: 1, Recounted: true}, r[0])
	got := e.dump()
	due := e.within(field(t, got["waiting"].(list)[0], "d", 16), before, e.clock(), "when it became due")
	at := e.within(attemptEnded(t, got["waiting"].(list)[0]), before/1000, e.clockMs(), "when it was reclaimed")
	e.same(keyState{
		"meta":     hash{"name": "q", "seq": "30", "wx": "2"},
		"leases":   zset{live: float64(now + hour)},
		"procs":    hash{"20": "a" + live + "52,w3:held"},
		"progress": hash{"52": "20,5,1:"},
		"waiting":  list{"51,a1" + attemptFields(1, at, 'k', gone, "", "") + ",d" + hexOf(due) + ":orphan"},
	}, got)
}

// check_adopt.lua and check_unregister.lua, each run alone: a worker the
// registry does not know is entered as dead, with the queues where it
// holds work (none for one that holds only what its queue set lists); a
// known worker keeps its lease's expiry and gains the queues. A queue
// unregistered that exists after all loses its confirmation.
func TestCheckAdoptAndUnregisterScripts(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "check_adopt.lua", "check_unregister.lua")
	known, unknown, bare := e.worker(), e.worker(), e.worker()
	e.seed(keyState{
		"workers":     zset{known: 5},
		"wq:" + known: set{"a"},
		"meta":        hash{"name": "q", "registered": "1"},
		"queues":      set{"q", "z"},
	})
	sets := e.s.CheckScripts()
	adopted := e.s.Adopt(e.ctx, []string{known, unknown, bare}, [][]string{{"b"}, {"c", "d"}, nil}, sets)
	assert.Equal(t, []Adopted{{Entered: false}, {Entered: true}, {Entered: true}}, adopted)
	e.expect(keyState{
		"workers":       zset{known: 5, unknown: 0, bare: 0},
		"wq:" + known:   set{"a", "b"},
		"wq:" + unknown: set{"c", "d"},
		"meta":          hash{"name": "q", "registered": "1"},
		"queues":        set{"q", "z"},
	})
	exists, err := e.s.UnregisterQueue(e.ctx, "q", sets)
	require.NoError(t, err)
	assert.True(t, exists)
	e.expect(keyState{
		"workers":       zset{known: 5, unknown: 0, bare: 0},
		"wq:" + known:   set{"a", "b"},
		"wq:" + unknown: set{"c", "d"},
		"meta":          hash{"name": "q"},
		"queues":        set{"z"},
	})
}
