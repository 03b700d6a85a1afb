package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// Task kinds: enqueue takes one, and the listings show a kind column (in
// JSON a kind field) once any task listed has one; a queue without kinds
// lists as before.
func TestKindsInListings(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c := b.client()
	ctx := ctxT(t)

	b.ok("enqueue", "--kind", "email.welcome", "mail", "hello")
	_, err := c.Enqueue(ctx, "mail", []byte("plain"))
	require.NoError(t, err)
	r := b.run("enqueue", "--kind", "a,b", "mail", "x")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "invalid options")

	out := b.ok("range", "mail").stdout
	assert.Equal(t, []string{"POS", "ID", "KIND", "ATTEMPTS", "ENQUEUED", "SIZE", "PAYLOAD"}, rows(out)[0])
	assert.Equal(t, "email.welcome", rows(out)[1][2])
	assert.Equal(t, "-", rows(out)[2][2])
	ts := jsonOf[[]taskRow](b, "range", "mail")
	require.Len(t, ts, 2)
	assert.Equal(t, "email.welcome", ts[0].Kind)
	assert.Empty(t, ts[1].Kind)

	_, err = c.Enqueue(ctx, "plain", []byte("p"))
	require.NoError(t, err)
	assert.Equal(t, []string{"POS", "ID", "ATTEMPTS", "ENQUEUED", "SIZE", "PAYLOAD"}, rows(b.ok("range", "plain").stdout)[0])

	// In flight.
	w := newWorker(t, c)
	require.NoError(t, w.StartWork(ctx, "mail", worqr.Events{}))
	p, err := w.Dequeue(ctx, "mail")
	require.NoError(t, err)
	out = b.ok("processes", "mail").stdout
	assert.Equal(t, "KIND", rows(out)[0][2])
	assert.Equal(t, "email.welcome", row(t, out, p.ID())[2])
	ps := jsonOf[[]processRow](b, "processes", "mail")
	require.Len(t, ps, 1)
	assert.Equal(t, "email.welcome", ps[0].TaskKind)

	// Dead: the task's kind beside its reason.
	require.NoError(t, p.DeadLetter(ctx, errors.New("gave up")))
	out = b.ok("dead", "mail").stdout
	assert.Equal(t, []string{"ID", "KIND", "ATTEMPTS", "DIED"}, rows(out)[0][:4])
	assert.Equal(t, "email.welcome", row(t, out, p.TaskID())[1])
	ds := jsonOf[[]deadRow](b, "dead", "mail")
	require.Len(t, ds, 1)
	assert.Equal(t, "email.welcome", ds[0].Kind)
	assert.Equal(t, worqr.ReasonManual, ds[0].Reason)
}

// The help of the listings that show a KIND column says so, and enqueue's
// lists --kind.
func TestHelpNamesTheKind(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	for _, name := range []string{"processes", "peek", "range", "delayed"} {
		r := execute(t, b.bare(name, "-h"), "")
		require.Equal(t, exitOK, r.code, "worqr %s -h\n%s", name, r)
		assert.Contains(t, r.stdout, "KIND column", "worqr %s -h", name)
	}
	r := execute(t, b.bare("enqueue", "-h"), "")
	require.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "  --kind ")
}
