package dashboard

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

// Tasks waiting in groups are listed on their queue's page, after the
// tasks without a group, with their group; a grouped task's page finds it
// waiting and names its group.
func TestGroupedTasksShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	id, err := e.c.Enqueue(e.ctx(), "q", []byte("grouped-payload"), worqr.Group("tenant-7"))
	require.NoError(t, err)
	plain, err := e.c.Enqueue(e.ctx(), "q", []byte("plain-payload"))
	require.NoError(t, err)

	code, body := e.get("/queue/q")
	require.Equal(t, http.StatusOK, code)
	waiting := sectionOf(body, `id="waiting"`)
	assert.Contains(t, waiting, "grouped-payload")
	assert.Contains(t, waiting, "group tenant-7")
	require.Contains(t, waiting, plain)
	assert.Less(t, strings.Index(waiting, plain), strings.Index(waiting, id), "the task without a group first")

	code, body = e.get("/task/q/" + id)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "<dt>Waiting</dt>")
	assert.Contains(t, body, "tenant-7")
}
