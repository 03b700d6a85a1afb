package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	_, err := c.Enqueue(ctx, "orders", []byte("x"))
	require.NoError(t, err)

	out := b.ok("check").stdout
	assert.Regexp(t, `^0 problems \(.*\) in 1 queues, 0 workflows, \d+ keys, 1 nodes\n$`, out)
	clean := jsonOf[checkJSON](b, "check")
	assert.Zero(t, clean.Problems)
	assert.Equal(t, []string{}, clean.UnregisteredQueues, "empty lists are [], not null")
	assert.Nil(t, clean.Repaired)

	// Lose the queue's registry entry, as a hand-made mistake would.
	rdb := b.redis()
	require.NoError(t, rdb.Do(ctx, rdb.B().Srem().Key(b.prefix+":{r}:queues").Member("orders").Build()).Error())
	queues, err := c.Queues(ctx)
	require.NoError(t, err)
	require.Empty(t, queues)

	r := b.fails(exitFailure, "1 problems found (worqr check --repair fixes what it can)", "check")
	assert.Equal(t, []string{"FINDING", "WHAT"}, rows(r.stdout)[0])
	assert.Equal(t, []string{"unregistered queue", "orders"}, row(t, r.stdout, "unregistered queue"))
	assert.Contains(t, r.stdout, "1 problems (")

	r = b.fails(exitFailure, "1 problems found (see the report for what was repaired)", "check", "--repair", "--json")
	var rep checkJSON
	require.NoError(t, jsonDecode(r.stdout, &rep))
	assert.Equal(t, 1, rep.Problems)
	assert.Equal(t, []string{"orders"}, rep.UnregisteredQueues)
	require.NotNil(t, rep.Repaired)
	assert.Equal(t, []string{"orders"}, rep.Repaired.RegisteredQueues)

	queues, err = c.Queues(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"orders"}, queues)
	b.ok("check")
	out = b.ok("check", "--repair").stdout
	assert.Regexp(t, `(?m)^queues registered: +0$`, out)
}

// check reports the keys a workflow left without its flow hash, and
// --repair deletes them.
func TestCheckReportsALeftoverWorkflow(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := ctxT(t)
	rdb := b.redis()
	require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(b.prefix+":{wf:gone}:steps").FieldValue().FieldValue("a", "q").Build()).Error())

	r := b.fails(exitFailure, "1 problems found", "check")
	assert.Equal(t, []string{"leftover workflow", "gone"}, row(t, r.stdout, "leftover workflow"))
	r = b.fails(exitFailure, "1 problems found", "check", "--repair", "--json")
	var rep checkJSON
	require.NoError(t, jsonDecode(r.stdout, &rep))
	assert.Equal(t, []string{"gone"}, rep.LeftoverWorkflows)
	assert.Equal(t, []string{"gone"}, rep.Repaired.DeletedWorkflows)
	assert.Equal(t, []workflowStepJSON{}, rep.StalledSteps)
	b.ok("check")
}

// check reports a control whose stored value the scripts cannot read, and
// exits 1.
func TestCheckReportsAnUnreadableControl(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	_, err := c.Enqueue(ctx, "orders", []byte("x"))
	require.NoError(t, err)
	rdb := b.redis()
	require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(b.prefix+":{q:orders}:meta").FieldValue().FieldValue("limit", "9.2233720368547758e+18").Build()).Error())

	r := b.fails(exitFailure, "1 problems found", "check")
	assert.Equal(t, []string{"unreadable control", `queue "orders" limit = "9.2233720368547758e+18"`}, row(t, r.stdout, "unreadable control"))
	r = b.fails(exitFailure, "1 problems found", "check", "--json")
	var rep checkJSON
	require.NoError(t, jsonDecode(r.stdout, &rep))
	assert.Equal(t, []controlJSON{{Queue: "orders", Control: "limit", Value: "9.2233720368547758e+18"}}, rep.UnreadableControls)
}
