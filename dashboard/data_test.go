package dashboard

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// postBody submits an action form and returns the status and the page.
func (e *env) postBody(form url.Values) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url("/action"), strings.NewReader(form.Encode()))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := e.http.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return res.StatusCode, string(b)
}

// The limit form refuses a limit the scripts cannot hold exactly, with a
// message that says why, and changes nothing.
func TestLimitFormRefusesALimitTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	_, err := e.c.Enqueue(ctx, "jobs", []byte("x"))
	require.NoError(t, err)
	require.NoError(t, e.c.SetConcurrency(ctx, "jobs", 5))
	tok := e.csrf()
	for _, n := range []string{"9223372036854775807", "9007199254740992"} {
		code, body := e.postBody(url.Values{"csrf": {tok}, "op": {"limit"}, "q": {qx("jobs")}, "n": {n}, "confirmed": {"yes"}})
		assert.Equal(t, http.StatusBadRequest, code, n)
		assert.Contains(t, body, "limit "+n+" not in 0..9007199254740991", n)
	}
	info, err := e.c.QueueInfo(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, 5, info.Concurrency)
	_, body := e.get("/queue?q=" + qx("jobs"))
	assert.Contains(t, body, `max="9007199254740991"`)
}

// Pause, resume and limit on a queue that does not exist say so and make
// no queue.
func TestControlActionsOnAQueueThatDoesNotExist(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	tok := e.csrf()
	for _, op := range []string{"pause", "resume", "limit"} {
		code, body := e.postBody(url.Values{"csrf": {tok}, "op": {op}, "q": {qx("nonexistent2")}, "n": {"3"}, "confirmed": {"yes"}})
		assert.Equal(t, http.StatusNotFound, code, op)
		assert.Contains(t, body, "no such queue", op)
	}
	qs, err := e.c.Queues(e.ctx())
	require.NoError(t, err)
	assert.Empty(t, qs)
	assert.ErrorIs(t, e.c.Pause(e.ctx(), "nonexistent2"), worqr.ErrNoQueue)
}
