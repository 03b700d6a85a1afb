package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The workflow scripts on seeded keys, every key compared: a workflow of
// two steps, a then b.
func flowSeeded(steps hash) keyState {
	return keyState{
		"wf.flow":    hash{"state": "running", "open": "2", "keep": "60000", "sum": "s", "created": "1000"},
		"wf.steps":   steps,
		"wf.ids":     hash{"a": "t-a"},
		"wf.left":    hash{"b": "1"},
		"wf.kids":    hash{"a": "b"},
		"wf.parents": hash{"b": "a"},
		"wf.spec":    hash{"a": "S-a", "b": "S-b"},
	}
}

// endedFlow is the flow hash of flowSeeded's workflow once it ended as
// state.
func endedFlow(state string) hash {
	return hash{"state": state, "open": "0", "keep": "60000", "sum": "s", "created": "1000", "ended": "2000"}
}

// wf_release.lua: a's end records its result, frees b and answers it,
// and notes when the notice was written; the same notice again, or an
// older one, records nothing, and answers b while it is still ready.
func TestWorkflowReleaseKeys(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	e.seed(flowSeeded(hash{"a": "q", "b": "w"}))
	ready, err := e.s.ReleaseStep(e.ctx, id, "a", "t-a", "ok", "result", 10)
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "b", Spec: "S-b"}}, ready)
	released := keyState{
		"wf.flow":    hash{"state": "running", "open": "1", "keep": "60000", "sum": "s", "created": "1000"},
		"wf.steps":   hash{"a": "ok", "b": "r"},
		"wf.ids":     hash{"a": "t-a"},
		"wf.left":    hash{"b": "0"},
		"wf.kids":    hash{"a": "b"},
		"wf.parents": hash{"b": "a"},
		"wf.spec":    hash{"a": "S-a", "b": "S-b"},
		"wf.results": hash{"a": "result"},
		"wf.freed":   hash{"a": "b"},
		"wf.seen":    hash{"a": "10"},
	}
	e.expect(released)

	ready, err = e.s.ReleaseStep(e.ctx, id, "a", "t-a", "ok", "again", 10)
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "b", Spec: "S-b"}}, ready, "a replay answers b, still ready")
	e.expect(released)

	ready, err = e.s.ReleaseStep(e.ctx, id, "a", "t-a", "dead", "", 5)
	require.NoError(t, err)
	assert.Equal(t, []ReadyStep{{Name: "b", Spec: "S-b"}}, ready, "an older notice answers b too")
	e.expect(released)
}

// wf_enqueued.lua: a ready step is marked queued with its task's id; one
// cancelled meanwhile is answered, its id noted; one ended keeps its state
// and the id its end recorded; a step the workflow does not have is
// ignored.
func TestWorkflowEnqueuedKeys(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_enqueued.lua")
	id := e.workflow()
	seeded := flowSeeded(hash{"a": "ok", "b": "r", "c": "x"})
	seeded["wf.spec"] = hash{"a": "S-a", "b": "S-b", "c": "S-c"}
	e.seed(seeded)
	cancelled, err := e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "a", TaskID: "t-other"}, {Name: "b", TaskID: "t-b"}, {Name: "c", TaskID: "t-c"}, {Name: "zz", TaskID: "t-z"}})
	require.NoError(t, err)
	assert.Equal(t, []QueuedStep{{Name: "c", TaskID: "t-c", Spec: "S-c"}}, cancelled)
	want := flowSeeded(hash{"a": "ok", "b": "q", "c": "x"})
	want["wf.spec"] = hash{"a": "S-a", "b": "S-b", "c": "S-c"}
	want["wf.ids"] = hash{"a": "t-a", "b": "t-b", "c": "t-c"}
	e.expect(want)
}

// wf_cancel.lua: every step not ended is cancelled, the queued ones
// answered, and the workflow ends cancelled; a workflow not running is
// left alone.
func TestWorkflowCancelKeys(t *testing.T) {
	t.Parallel()
	t.Run("running", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "wf_cancel.lua")
		id := e.workflow()
		seeded := flowSeeded(hash{"a": "q", "b": "w"})
		e.seed(seeded)
		before := e.clockMs()
		was, queued, err := e.s.CancelWorkflow(e.ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "running", was)
		assert.Equal(t, []QueuedStep{{Name: "a", TaskID: "t-a", Spec: "S-a"}}, queued)
		got := e.dump()
		ended := e.within(num(t, got["wf.flow"].(hash)["ended"]), before, e.clockMs(), "when it ended")
		want := flowSeeded(hash{"a": "x", "b": "x"})
		want["wf.flow"] = hash{"state": "cancelled", "open": "0", "keep": "60000", "sum": "s", "created": "1000", "ended": decOf(ended)}
		e.same(want, got)
	})
	t.Run("ended", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "wf_cancel.lua")
		id := e.workflow()
		seeded := flowSeeded(hash{"a": "ok", "b": "ok"})
		seeded["wf.flow"] = endedFlow("succeeded")
		e.seed(seeded)
		was, queued, err := e.s.CancelWorkflow(e.ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "succeeded", was)
		assert.Empty(t, queued)
		e.expect(seeded)
	})
}

// flow_notices.lua lists the notices old enough, oldest first, up to its
// limit, changing nothing; flow_forget.lua removes those named, and only
// those.
func TestFlowNoticesAndForgetKeys(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "flow_notices.lua", "flow_forget.lua")
	now := e.clock()
	seeded := keyState{"flows": zset{
		"wf1.a,61,ok":   float64(now - 3_000_000),
		"wf1.b,62,dead": float64(now - 2_000_000),
		"wf2.c,63,ok":   float64(now - 1_000_000),
		"wf2.d,64,ok":   float64(now),
	}}
	e.seed(seeded)
	got, err := e.s.FlowNotices(e.ctx, "q", 1500*time.Millisecond, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"wf1.a,61,ok", "wf1.b,62,dead"}, got)
	got, err = e.s.FlowNotices(e.ctx, "q", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"wf1.a,61,ok"}, got, "the limit")
	e.expect(seeded)

	require.NoError(t, e.s.ForgetNotices(e.ctx, "q", []string{"wf1.a,61,ok", "wf2.c,63,ok", "wf9.z,99,ok"}))
	e.expect(keyState{"flows": zset{
		"wf1.b,62,dead": float64(now - 2_000_000),
		"wf2.d,64,ok":   float64(now),
	}})
}

// wf_release.lua on a workflow that has ended: the notice records
// nothing. A workflow cancelled while its steps were queued has no seen
// hash yet (no end was recorded): the notices of its tasks, cancelled in
// their queues, must not make one, which would outlive the workflow's
// keys (they expire at its end; a hash made after has no expiry).
func TestWorkflowReleaseEnded(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_release.lua")
	id := e.workflow()
	seeded := flowSeeded(hash{"a": "x", "b": "x"})
	seeded["wf.flow"] = endedFlow("cancelled")
	e.seed(seeded)
	ready, err := e.s.ReleaseStep(e.ctx, id, "a", "t-a", "ok", "late", 10)
	require.NoError(t, err)
	assert.Empty(t, ready)
	e.expect(seeded)
}

// wf_enqueued.lua on a workflow cancelled while a step's enqueue was under
// way, before any step was queued (so with no ids hash, and its other keys
// set to expire as it ended): the step is answered, and the id noted
// expires with the workflow's keys.
func TestWorkflowEnqueuedAfterTheEnd(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "wf_enqueued.lua")
	id := e.workflow()
	seeded := flowSeeded(hash{"a": "x", "b": "x"})
	seeded["wf.flow"] = endedFlow("cancelled")
	delete(seeded, "wf.ids")
	e.seed(seeded)
	keys := e.keys()
	for name := range seeded {
		require.NoError(t, e.rdb.Do(e.ctx, e.rdb.B().Pexpire().Key(keys[name]).Milliseconds(60_000).Build()).Error())
	}
	cancelled, err := e.s.StepsEnqueued(e.ctx, id, []QueuedStep{{Name: "a", TaskID: "t-a"}})
	require.NoError(t, err)
	assert.Equal(t, []QueuedStep{{Name: "a", TaskID: "t-a", Spec: "S-a"}}, cancelled)
	want := flowSeeded(hash{"a": "x", "b": "x"})
	want["wf.flow"] = seeded["wf.flow"]
	e.expect(want)
	ttl, err := e.rdb.Do(e.ctx, e.rdb.B().Pttl().Key(keys["wf.ids"]).Build()).AsInt64()
	require.NoError(t, err)
	assert.True(t, ttl > 0 && ttl <= 60_000, "the ids hash expires with the workflow: %d", ttl)
}
