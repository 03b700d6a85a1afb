package worqr

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/testsignal"
)

// aclCommands are the commands a worqr client needs, exactly as the
// security page (docs/security.md) lists them: the connection handshake (HELLO,
// PING and, where rueidis looks for a cluster, CLUSTER SLOTS and SHARDS),
// the scripts and what they call, the reads done outside scripts, pub/sub,
// and SCAN for Client.Check. (rueidis also sends CLIENT SETINFO, which
// Redis 7.0 does not know; it ignores a refusal, so the list leaves it out
// to work on every Redis 7.)
const aclCommands = "+hello +ping +cluster|slots +cluster|shards " +
	"+evalsha +eval +time " +
	"+lpush +rpush +rpop +lrem +lset +llen +lrange +lindex +ltrim " +
	"+hset +hsetnx +hget +hmget +hdel +hexists +hgetall +hincrby +hlen +hkeys +hscan " +
	"+zadd +zrem +zscore +zmscore +zcard +zrank +zrange +zrangebyscore +zrangebylex +zremrangebyscore +zremrangebylex +zcount +zlexcount +zrandmember +zpopmin +zscan " +
	"+sadd +srem +smembers +sismember +exists +del +pexpire +pttl +persist " +
	"+publish +subscribe +unsubscribe +spublish +ssubscribe +sunsubscribe +scan"

// aclUser creates a Redis user that may touch only the prefix's keys and
// channels, with only aclCommands, and deletes it when the test ends. It
// returns a URL that logs in as that user.
func aclUser(t *testing.T, b *backend) string {
	t.Helper()
	admin := b.redis()
	ctx := ctxT(t)
	user, pass := b.prefix+"-user", uuid.NewString()
	rules := []string{"reset", "on", ">" + pass, "~" + b.prefix + ":*", "&" + b.prefix + ":*", "-@all"}
	rules = append(rules, strings.Fields(aclCommands)...)
	for _, node := range nodes(admin) { // ACL users are per node, on a cluster too
		require.NoError(t, node.Do(ctx, node.B().AclSetuser().Username(user).Rule(rules...).Build()).Error())
	}
	t.Cleanup(func() {
		for _, node := range nodes(admin) {
			_ = node.Do(context.Background(), node.B().AclDeluser().Username(user).Build()).Error()
		}
	})
	return (&url.URL{Scheme: "redis", User: url.UserPassword(user, pass), Host: b.addr, Path: "/0"}).String()
}

// deniedFor lists what Redis refused a user since the test began, from
// ACL LOG.
func deniedFor(t *testing.T, b *backend, user string) []string {
	t.Helper()
	var entries []rueidis.RedisMessage
	for _, node := range nodes(b.redis()) {
		es, err := node.Do(context.Background(), node.B().AclLog().Count(1000).Build()).ToArray()
		require.NoError(t, err)
		entries = append(entries, es...)
	}
	var out []string
	for _, e := range entries {
		m, err := e.AsMap()
		require.NoError(t, err)
		str := func(k string) string {
			v := m[k]
			s, _ := v.ToString()
			return s
		}
		if str("username") != user {
			continue
		}
		reason, object := str("reason"), str("object")
		if object == "client|setinfo" {
			continue // optional: rueidis ignores the refusal
		}
		out = append(out, reason+" "+object)
	}
	return out
}

// restrictedClient is a client logged in as aclUser's restricted user
// (named user) through addr, a URL in Options.Addr, on a backend of its
// own; the test is skipped on miniredis, which has no ACL users.
func restrictedClient(t *testing.T) (b *backend, c *Client, addr, user string, ctx context.Context) {
	t.Helper()
	b = newBackend(t)
	if !b.real {
		t.Skip("ACL users need real Redis")
	}
	addr = aclUser(t, b)
	c, err := New(Options{Addr: addr, Prefix: b.prefix, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return b, c, addr, b.prefix + "-user", ctxT(t)
}

// The core flows run as a user that may only touch the prefix's keys and
// channels and run aclCommands, logged in through a URL in Options.Addr.
// Redis must refuse nothing, and must refuse that user everything outside
// the prefix.
func TestCoreFlowsAsARestrictedACLUser(t *testing.T) {
	t.Parallel()
	b, c, u, user, ctx := restrictedClient(t)

	// Enqueue, inspect, handle.
	handled := make(chan string, 5)
	cancelled := make(chan error, 1)
	c.core.Signals.Looked.Init(t) // the reclaim below (the look's of w's reclaimer)
	w := newWorker(t, c, lasting)
	require.NoError(t, w.Handle(ctx, "h", func(hctx context.Context, p *Process) error {
		if string(p.Task()) == "held" {
			<-hctx.Done()
			cancelled <- context.Cause(hctx)
			return nil
		}
		handled <- string(p.Task())
		return nil
	}, HandleOptions{}))
	enqueueNumbered(t, c, "h", 5)
	require.NoError(t, second(c.Enqueue(ctx, "h", []byte("held"))))
	for range 5 {
		recv(t, handled, testsignal.Wait, "tasks handled")
	}
	qs, err := c.Queues(ctx)
	require.NoError(t, err)
	assert.Contains(t, qs, "h")
	eventually(t, 5*time.Second, "the held task is in flight", func() bool {
		procs, err := c.Processes(ctx, "h")
		require.NoError(t, err)
		return len(procs) == 1
	})
	procs, err := c.Processes(ctx, "h", PayloadPrefix(2))
	require.NoError(t, err)
	require.Len(t, procs, 1)
	found, err := c.FindTask(ctx, "h", procs[0].TaskID, PayloadPrefix(2))
	require.NoError(t, err)
	assert.NotNil(t, found.Process)
	_, err = c.Workers(ctx)
	require.NoError(t, err)
	_, err = c.WorkerQueues(ctx, w.ID())
	require.NoError(t, err)

	// Cancel reaches the handler.
	_, err = c.Cancel(ctx, "h", []byte("held"))
	require.NoError(t, err)
	assert.ErrorIs(t, recv(t, cancelled, 5*time.Second, "cancel reaches the handler"), ErrTaskCancelled)
	// Cancel waiting tasks, by payload and by id.
	ids, err := c.EnqueueBatch(ctx, "c", [][]byte{[]byte("a"), []byte("b")})
	require.NoError(t, err)
	res, err := c.Cancel(ctx, "c", []byte("a"))
	require.NoError(t, err)
	assert.Equal(t, CancelResult{Removed: 1}, res)
	res, err = c.CancelTask(ctx, "c", ids[1])
	require.NoError(t, err)
	assert.Equal(t, CancelResult{Removed: 1}, res)

	// Delays, retries with a backoff, dead letters, inspection.
	ran := make(chan string, 10)
	require.NoError(t, w.Handle(ctx, "l", func(_ context.Context, p *Process) error {
		ran <- string(p.Task())
		switch {
		case string(p.Task()) == "dead":
			return Permanent(errors.New("no"))
		case p.Attempt() == 1:
			return errors.New("once")
		}
		return nil
	}, HandleOptions{Retry: RetryPolicy{Backoff: func(int, error) time.Duration { return 50 * time.Millisecond }}}))
	require.NoError(t, second(c.EnqueueBatch(ctx, "l", [][]byte{[]byte("later"), []byte("dead")}, In(50*time.Millisecond))))
	n, err := c.DelayedLen(ctx, "l")
	require.NoError(t, err)
	assert.EqualValues(t, 2, n)
	_, err = c.Delayed(ctx, "l", 0, -1)
	require.NoError(t, err)
	_, err = c.Delayed(ctx, "l", 0, -1, PayloadPrefix(2))
	require.NoError(t, err)
	for range 3 { // later twice (a retry), dead once
		recv(t, ran, 5*time.Second, "delayed tasks ran")
	}
	eventually(t, 5*time.Second, "one dead letter", func() bool {
		n, err := c.core.Redis.Do(ctx, c.core.Redis.B().Zcard().Key(c.core.Store.Keys().Queue("l").Dead).Build()).AsInt64()
		return err == nil && n == 1
	})
	// A retry at once of a plain task (retry_plain.lua).
	again := make(chan int, 2)
	require.NoError(t, w.Handle(ctx, "r", func(_ context.Context, p *Process) error {
		again <- p.Attempt()
		if p.Attempt() == 1 {
			return errors.New("once")
		}
		return nil
	}, HandleOptions{Retry: RetryPolicy{Backoff: func(int, error) time.Duration { return 0 }}}))
	require.NoError(t, second(c.Enqueue(ctx, "r", []byte("again"))))
	for want := 1; want <= 2; want++ {
		assert.Equal(t, want, recv(t, again, 5*time.Second, "a retry at once ran"))
	}
	// A retained outcome, waited for.
	kept, err := c.Enqueue(ctx, "l", []byte("kept"), Retain(time.Minute))
	require.NoError(t, err)
	o, err := c.Wait(ctx, "l", kept)
	require.NoError(t, err)
	assert.Equal(t, OutcomeSucceeded, o.Status)
	_, err = c.TaskResult(ctx, "l", kept)
	require.NoError(t, err)
	kepts, err := c.Outcomes(ctx, "l", 0, 10, PayloadPrefix(2))
	require.NoError(t, err)
	assert.NotEmpty(t, kepts)
	one, err := c.FindOutcome(ctx, "l", kept, PayloadPrefix(2))
	require.NoError(t, err)
	assert.Equal(t, kept, one.ID)
	_, err = c.Schedules(ctx, "l")
	require.NoError(t, err)

	// The dashboard's: run a delayed task now, cancel waiting ones in bulk.
	later, err := c.Enqueue(ctx, "n", []byte("later"), In(time.Hour), Kind("k"))
	require.NoError(t, err)
	moved, err := c.RunNow(ctx, "n", later)
	require.NoError(t, err)
	assert.True(t, moved)
	removed, _, err := c.CancelWaiting(ctx, "n", WaitingSelection{Kind: "k"})
	require.NoError(t, err)
	assert.EqualValues(t, 1, removed)

	// Groups: a limit, rates, a sequence's delayed retry, the groups read.
	require.NoError(t, c.SetGroupConcurrency(ctx, "g", "", 1, CreateQueue()))
	require.NoError(t, c.SetGroupRate(ctx, "g", "", 2, time.Hour))
	require.NoError(t, c.SetGroupRate(ctx, "g", "b", 5, time.Hour))
	require.NoError(t, second(c.EnqueueBatch(ctx, "g", [][]byte{[]byte("a1"), []byte("a2"), []byte("a3")}, Group("a"))))
	require.NoError(t, w.StartWork(ctx, "g", Events{}))
	gp := dequeueAll(t, w, "g", 1)
	require.NoError(t, gp[0].Retry(ctx, time.Hour, errors.New("later")))
	_, err = w.Dequeue(ctx, "g")
	require.ErrorIs(t, err, ErrRateLimited, "the sequence waits for its retried task")
	_, err = c.Groups(ctx, "g", 10)
	require.NoError(t, err)
	_, err = c.QueueInfo(ctx, "g")
	require.NoError(t, err)
	require.NoError(t, w.StopWork(ctx, "g"))
	_, err = c.DeleteQueue(ctx, "g")
	require.NoError(t, err)

	// By hand: dequeue, stop, finish, peek, range.
	require.NoError(t, w.StartWork(ctx, "m", Events{}))
	enqueueNumbered(t, c, "m", 3)
	ps := dequeueAll(t, w, "m", 2)
	require.NoError(t, ps[0].Status(ctx))
	require.NoError(t, ps[0].Requeue(ctx))
	require.NoError(t, ps[1].Finish(ctx))
	head, err := c.Peek(ctx, "m")
	require.NoError(t, err)
	assert.Equal(t, "t0002", string(head))
	assert.Equal(t, []string{"t0002", "t0000"}, waiting(t, c, "m"))

	// A crashed worker is reclaimed by its peer: Redis's own clock runs
	// its lease out, as no test can move a real server's.
	dead := newWorker(t, c, fast)
	require.NoError(t, dead.StartWork(ctx, "m", Events{}))
	dequeueAll(t, dead, "m", 1)
	crash(dead)
	reclaimed(t, 1, c)
	assert.Len(t, waiting(t, c, "m"), 2, "reclaimed")
	tasks, err := c.Tasks(ctx, "m", 0, -1, PayloadPrefix(1))
	require.NoError(t, err)
	require.Len(t, tasks, 2)
	found, err = c.FindTask(ctx, "m", tasks[1].ID)
	require.NoError(t, err)
	assert.EqualValues(t, 1, found.Position)

	// Dead letters: listed, counted, requeued, deleted, purged.
	exerciseDeadLetters(t, c, "d")

	// The consistency check and its repair.
	require.NoError(t, b.redis().Do(ctx, b.redis().B().Sadd().Key(c.core.Store.Keys().Queues()).Member("ghost").Build()).Error())
	rep := check(t, c, true)
	assert.Equal(t, []string{"ghost"}, rep.Repaired.RemovedQueues)

	// Delete, stop work, close.
	_, err = c.DeleteQueue(ctx, "m")
	require.NoError(t, err)
	require.NoError(t, w.StopWork(ctx, "m"))
	require.NoError(t, w.Shutdown(ctx))
	requireClean(t, c)

	assert.Empty(t, deniedFor(t, b, user), "Redis refused the user something worqr needs")

	// The user reaches nothing outside its prefix.
	other, err := New(Options{Addr: u, Prefix: b.prefix + "x", Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	_, err = other.Enqueue(ctx, "h", []byte("x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NOPERM")
	assert.False(t, errors.Is(err, ErrUnavailable), "a refusal is not an outage: %v", err)
}

// Wrong credentials are refused at New, with an error that says so and is
// not mistaken for an outage.
func TestWrongCredentials(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	if !b.real {
		t.Skip("ACL users need real Redis")
	}
	u, err := url.Parse(aclUser(t, b))
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), "wrong")
	_, err = New(Options{Addr: u.String(), Prefix: b.prefix})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrInvalidOptions)
	assert.False(t, errors.Is(err, ErrUnavailable), "%v", err)
	assert.Contains(t, err.Error(), "WRONGPASS")
}

// The security page lists exactly aclCommands, in its ACL SETUSER line.
func TestDocsListTheACLCommands(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("docs", "security.md"))
	require.NoError(t, err)
	line := regexp.MustCompile(`(?m)^ACL SETUSER .*$`).Find(page)
	require.NotNil(t, line, "docs/security.md has an ACL SETUSER example")
	var cmds []string
	for _, f := range strings.Fields(string(line)) {
		if strings.HasPrefix(f, "+") {
			cmds = append(cmds, f)
		}
	}
	assert.Equal(t, strings.Fields(aclCommands), cmds)
}

// Workflows, the consistency check of their keys (one ended, one
// running, one without its steps' order), and a grouped task
// found by id run as the restricted user of
// TestCoreFlowsAsARestrictedACLUser: Redis must refuse nothing. The
// workflow's id is given, so that its keys are not in its queues' slots
// (whose steps the release marks with scripts of their own).
func TestWorkflowsAsARestrictedACLUser(t *testing.T) {
	t.Parallel()
	b, c, _, user, ctx := restrictedClient(t)

	w := newWorker(t, c, fast)
	log := &stepLog{}
	for _, q := range []string{"wa", "wb"} {
		require.NoError(t, w.Handle(ctx, q, flowHandler(t, log), HandleOptions{Concurrency: 2}))
	}
	const id = "acl-flow"
	require.False(t, c.core.Store.Keys().WorkflowHome(id, "wa") || c.core.Store.Keys().WorkflowHome(id, "wb"))
	_, err := c.EnqueueWorkflow(ctx, []Step{
		{Name: "a", Queue: "wa", Task: []byte("a")},
		{Name: "b", Queue: "wb", Task: []byte("b"), After: []string{"a"}},
	}, WorkflowOptions{ID: id})
	require.NoError(t, err)
	info, err := c.WaitWorkflow(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, WorkflowSucceeded, info.State)
	// One running (its queue unhandled) as well, whose steps the check
	// reads.
	_, err = c.EnqueueWorkflow(ctx, []Step{{Name: "c", Queue: "wc", Task: []byte("c")}}, WorkflowOptions{ID: "acl-open"})
	require.NoError(t, err)
	check(t, c, true)
	// And one made before its steps' order was kept, whose steps the
	// check reads whole.
	admin := b.redis()
	require.NoError(t, admin.Do(ctx, admin.B().Del().Key(c.core.Store.Keys().Workflow("acl-open").Order).Build()).Error())
	check(t, c, false)

	ids, err := c.EnqueueBatch(ctx, "gw", [][]byte{[]byte("g1"), []byte("g2")}, Group("x"))
	require.NoError(t, err)
	found, err := c.FindTask(ctx, "gw", ids[1])
	require.NoError(t, err)
	require.NotNil(t, found.Waiting, "waiting in its group")
	assert.Equal(t, ids[1], found.Waiting.ID)

	require.NoError(t, w.Shutdown(ctx))
	assert.Empty(t, deniedFor(t, b, user), "Redis refused the user something worqr needs")
}
