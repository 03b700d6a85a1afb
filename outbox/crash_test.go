package worqroutbox

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envPostgresCrash is a shell command that crashes the test's Postgres
// (an immediate stop, which writes nothing more to disk) and starts it
// again, for the tests that need one. That Postgres must commit
// synchronously (WORQR_POSTGRES_DURABLE=1 .ci/postgres start), and a long
// wal_writer_delay makes a commit that did not wait for its WAL lost
// every time; .ci/run gives the test a server of its own so.
const envPostgresCrash = "WORQR_TEST_POSTGRES_CRASH"

// A move that committed stays committed through a Postgres crash: its
// rows do not come back to be moved a second time. A row that came back
// would be enqueued again once its key no longer held: here a task with
// its own key (Unique, held while the task lives) that was cancelled after
// the move; the same with the relay's own key for an outage longer than
// DedupeWindow.
func TestMovedRowsStayGoneAfterAPostgresCrash(t *testing.T) {
	crash := os.Getenv(envPostgresCrash)
	if crash == "" {
		t.Skipf("%s is not set: this test crashes and restarts the Postgres of %s", envPostgresCrash, envPostgres)
	}
	e := newEnv(t, "")
	// The move keeps the session's synchronous_commit: on a server that
	// turns it off, its delete is lost to a crash however the relay is.
	var sync string
	require.NoError(t, e.pool.QueryRow(e.ctx, "SHOW synchronous_commit").Scan(&sync))
	if sync == "off" {
		t.Fatalf("the server's synchronous_commit is off: start it durable (WORQR_POSTGRES_DURABLE=1 .ci/postgres start)")
	}
	r := e.relay(nil, RelayOptions{})
	e.start(r)
	e.inTx(false, func(tx pgx.Tx) {
		_, err := e.ob.Enqueue(e.ctx, tx, "q", []byte("once"), Unique("once"))
		require.NoError(t, err)
	})
	for e.rows() > 0 {
		select {
		case <-r.idle.C():
		case <-time.After(10 * time.Second):
			t.Fatal("the relay did not move the row within 10s of its commit")
		}
	}
	r.Stop()
	require.Equal(t, []string{"once"}, e.payloads("q"))
	res, err := e.client.Cancel(e.ctx, "q", []byte("once"))
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Removed)

	out, err := exec.Command("sh", "-c", crash).CombinedOutput()
	require.NoError(t, err, "crash and restart Postgres: %s", out)
	e.pool.Reset()
	assert.Zero(t, e.rows(), "the move's delete was committed before the crash")

	again := e.relay(nil, RelayOptions{})
	e.start(again)
	assert.Empty(t, e.payloads("q"), "the row became a second task")
}
