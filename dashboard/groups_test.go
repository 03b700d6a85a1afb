package dashboard

import (
	"errors"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

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

// The queue's page lists its groups with the most tasks waiting, and
// those held back at their limit apart; a queue without groups has no
// such section.
func TestGroupsSection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	require.NoError(t, e.c.SetGroupConcurrency(ctx, "q", "", 1, worqr.CreateQueue()))
	_, err := e.c.EnqueueBatch(ctx, "q", [][]byte{[]byte("h1"), []byte("h2")}, worqr.Group("tenant-held"))
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	ps, err := w.DequeueN(ctx, "q", 1)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	_, err = e.c.EnqueueBatch(ctx, "q", [][]byte{[]byte("b1"), []byte("b2"), []byte("b3")}, worqr.Group("tenant-<big>"))
	require.NoError(t, err)

	code, body := e.get("/queue/q")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "2 with tasks waiting or in flight, 1 ready, 1 running · default limit 1")
	top := sectionOf(body, `id="groups"`)
	big, held := strings.Index(top, "tenant-&lt;big&gt;"), strings.Index(top, "tenant-held")
	assert.True(t, big > 0 && held > big, "most waiting first: %d %d", big, held)
	assert.Contains(t, top, `<td class="n">3</td><td class="n">0</td><td class="n">1</td><td class="n">1</td><td>ready</td>`)
	heldRows := sectionOf(body, `id="groups-held"`)
	assert.Contains(t, heldRows, "tenant-held")
	assert.NotContains(t, heldRows, "big")
	assert.Contains(t, heldRows, "held back")

	_, err = e.c.Enqueue(ctx, "plain", []byte("x"))
	require.NoError(t, err)
	_, body = e.get("/queue/plain")
	assert.NotContains(t, body, `id="groups"`)
}

// The queue's page sets a group's limit, or every group's default, behind
// a confirmation that names the group and the CSRF check; a key too long
// is refused.
func TestGroupLimitAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	_, err := e.c.Enqueue(ctx, "q", []byte("x"), worqr.Group("tenant <7>"))
	require.NoError(t, err)
	_, body := e.get("/queue/q")
	assert.Contains(t, body, `value="grouplimit"`)

	tok := e.csrf()
	form := func(group, n, confirmed string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"grouplimit"}, "q": {qx("q")}, "group": {group}, "n": {n}, "back": {"queue"}, "confirmed": {confirmed}}
	}
	cookie := csrfCookie + "=" + e.jarCookie(csrfCookie)
	ask := e.raw("/action", form("tenant <7>", "3", ""), "Cookie", cookie)
	require.Equal(t, http.StatusOK, ask.code)
	body = ask.body
	assert.Contains(t, body, `group <span class="name">tenant &lt;7&gt;</span>, to 3?`, "asks first, naming the group")
	assert.Contains(t, body, `name="group" value="tenant &lt;7&gt;"`)
	r, err := e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	require.Len(t, r.TopWaiting, 1)
	assert.Zero(t, r.TopWaiting[0].Limit, "not yet")

	code, _ := e.post("/action", form("tenant <7>", "3", "yes"))
	require.Equal(t, http.StatusSeeOther, code, "back to the queue's page")
	r, err = e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 3, r.TopWaiting[0].Limit)

	assert.Contains(t, e.raw("/action", form("", "2", ""), "Cookie", cookie).body, "the default of every group, to 2?")
	code, _ = e.post("/action", form("", "2", "yes"))
	require.Equal(t, http.StatusSeeOther, code)
	r, err = e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 2, r.DefaultLimit)

	bad := form("", "2", "yes")
	bad.Set("csrf", "")
	code, _ = e.post("/action", bad)
	assert.Equal(t, http.StatusForbidden, code)
	code, _ = e.post("/action", form(strings.Repeat("g", worqr.MaxGroupLen+1), "2", "yes"))
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = e.post("/action", form("g", "-1", "yes"))
	assert.Equal(t, http.StatusBadRequest, code)
}

// The queue's page sets a group's rate, or every group's default, behind
// a confirmation that names the group and the window and the CSRF check;
// a bad window is refused, and a group held back by its rate shows until
// when.
func TestGroupRateAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	_, err := e.c.EnqueueBatch(ctx, "q", [][]byte{[]byte("x"), []byte("y")}, worqr.Group("key <7>"))
	require.NoError(t, err)
	_, body := e.get("/queue/q")
	assert.Contains(t, body, `value="grouprate"`)

	tok := e.csrf()
	form := func(group, n, per, confirmed string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"grouprate"}, "q": {qx("q")}, "group": {group}, "n": {n}, "per": {per}, "back": {"queue"}, "confirmed": {confirmed}}
	}
	cookie := csrfCookie + "=" + e.jarCookie(csrfCookie)
	ask := e.raw("/action", form("key <7>", "1", "1h", ""), "Cookie", cookie)
	require.Equal(t, http.StatusOK, ask.code)
	assert.Contains(t, ask.body, `group <span class="name">key &lt;7&gt;</span>, to 1 per 1h?`, "asks first, naming the group and the window")
	assert.Contains(t, ask.body, `name="per" value="1h"`)

	code, _ := e.post("/action", form("key <7>", "1", "1h", "yes"))
	require.Equal(t, http.StatusSeeOther, code, "back to the queue's page")
	r, err := e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	require.Len(t, r.TopWaiting, 1)
	assert.Equal(t, 1, r.TopWaiting[0].Rate)
	assert.Equal(t, time.Hour, r.TopWaiting[0].Per)

	// One start uses the rate up: the group shows as held until then.
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	ps, err := w.DequeueN(ctx, "q", 5)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	_, body = e.get("/queue/q")
	assert.Contains(t, body, "rate: until ")

	code, _ = e.post("/action", form("", "10", "1m", "yes"))
	require.Equal(t, http.StatusSeeOther, code)
	r, err = e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 10, r.DefaultRate)

	bad := form("", "2", "1m", "yes")
	bad.Set("csrf", "")
	code, _ = e.post("/action", bad)
	assert.Equal(t, http.StatusForbidden, code)
	code, _ = e.post("/action", form("g", "2", "soon", "yes"))
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = e.post("/action", form("g", "2", "0s", "yes"))
	assert.Equal(t, http.StatusBadRequest, code)
}

// The group rate form under hostile input: counts past MaxLimit or not
// whole numbers, windows that are no duration, negative, past what a
// duration holds, or not whole milliseconds (what would be stored is not
// what the confirmation said) are refused, changing nothing; so are a
// foreign Host and a form without the token. Removing a rate needs no
// window. A group key of any bytes is stored and shown escaped.
func TestGroupRateActionHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	require.NoError(t, e.c.SetGroupRate(ctx, "q", "", 5, time.Minute, worqr.CreateQueue()))
	tok := e.csrf()
	form := func(group, n, per string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"grouprate"}, "q": {qx("q")}, "group": {group}, "n": {n}, "per": {per}, "back": {"queue"}, "confirmed": {"yes"}}
	}
	for _, c := range []struct{ n, per string }{
		{"9007199254740992", "1m"}, {"99999999999999999999", "1m"}, {"1e3", "1m"}, {"NaN", "1m"}, {"-1", "1m"}, {"", "1m"},
		{"2", "NaN"}, {"2", "-1m"}, {"2", "1e400s"}, {"2", "99999999999999999h"}, {"2", ""}, {"2", "1.5ms"}, {"2", "999us"},
		{"2", "2562047h47m16.854775807s"}, {"2", strings.Repeat("9", 60000) + "h"},
	} {
		code, _ := e.post("/action", form("", c.n, c.per))
		assert.Equal(t, http.StatusBadRequest, code, "%.40s per %.40s", c.n, c.per)
	}
	r, err := e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 5, r.DefaultRate, "nothing changed")
	assert.Equal(t, time.Minute, r.DefaultPer)

	cookie := csrfCookie + "=" + e.jarCookie(csrfCookie)
	for _, host := range []string{"evil.example", "evil.example:80", "127.0.0.1.nip.io"} {
		res := e.raw("/action", form("", "7", "2562047h"), "Host", host, "Cookie", cookie)
		assert.Equal(t, http.StatusForbidden, res.code, "a foreign Host: %s", host)
	}
	res := e.raw("/action", form("", "5", "1m"), "Host", "localhost:1", "Cookie", cookie)
	assert.Equal(t, http.StatusSeeOther, res.code, "another port of a loopback name: no rebinding (the token is what stops a page there)")
	bad := form("", "7", "1m")
	bad.Del("csrf")
	code, _ := e.post("/action", bad, "Origin", "http://localhost:1")
	assert.Equal(t, http.StatusForbidden, code, "another origin without the token")

	code, _ = e.post("/action", form("", "7", "2562047h"))
	assert.Equal(t, http.StatusSeeOther, code, "the longest window a duration holds, in whole ms")
	key := "\x00<b>\xff" + strings.Repeat("é", 60)
	code, _ = e.post("/action", form(key, "3", "1s"))
	require.Equal(t, http.StatusSeeOther, code)
	code, _ = e.post("/action", form(key, "0", "garbage"))
	assert.Equal(t, http.StatusSeeOther, code, "removing a rate needs no window")
	r, err = e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 7, r.DefaultRate)
	assert.Equal(t, 2562047*time.Hour, r.DefaultPer)
}

// A sequence held on its dead task (SetSequenceHold) shows on the queue's
// page with the dead task's id, with tasks waiting or not.
func TestGroupHeldOnDeadTaskShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	require.NoError(t, e.c.SetGroupConcurrency(ctx, "q", "", 1, worqr.CreateQueue()))
	require.NoError(t, e.c.SetSequenceHold(ctx, "q", true))
	id, err := e.c.Enqueue(ctx, "q", []byte("x"), worqr.Group("seq-<1>"))
	require.NoError(t, err)
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, p.DeadLetter(ctx, errors.New("no")))
	_, body := e.get("/queue/q")
	assert.Contains(t, body, `id="groups-dead"`, "listed with nothing waiting")
	assert.Contains(t, body, "seq-&lt;1&gt;")
	assert.Contains(t, body, "held: dead task "+id)
}

// The queue's page shows its sequence hold and turns it on and off behind
// a confirmation that says which, through the CSRF check; the Groups
// section shows while the hold is on, groups or not, to turn it off.
func TestSequenceHoldAction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	_, err := e.c.Enqueue(ctx, "q", []byte("x"), worqr.Group("g"))
	require.NoError(t, err)
	_, body := e.get("/queue/q")
	assert.Contains(t, body, `value="sequencehold"`)
	assert.Contains(t, body, `Sequence hold: <b>off</b>`)
	assert.Contains(t, body, `<option value="off" selected>`)

	tok := e.csrf()
	form := func(hold, confirmed string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"sequencehold"}, "q": {qx("q")}, "hold": {hold}, "back": {"queue"}, "confirmed": {confirmed}}
	}
	cookie := csrfCookie + "=" + e.jarCookie(csrfCookie)
	ask := e.raw("/action", form("on", ""), "Cookie", cookie)
	require.Equal(t, http.StatusOK, ask.code)
	assert.Contains(t, ask.body, holdVerbs["on"]+` <span class="name">q</span>?`, "asks first, saying what on means")
	assert.Contains(t, ask.body, `name="hold" value="on"`)
	info, err := e.c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.False(t, info.SequenceHold, "not yet")

	code, _ := e.post("/action", form("on", "yes"))
	require.Equal(t, http.StatusSeeOther, code, "back to the queue's page")
	info, err = e.c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.True(t, info.SequenceHold)

	// With no group left, the section still shows, to turn the hold off.
	w, err := e.c.NewWorker(ctx, worqr.WorkerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close(e.ctx()) })
	require.NoError(t, w.StartWork(ctx, "q", worqr.Events{}))
	p, err := w.Dequeue(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, p.Finish(ctx))
	_, body = e.get("/queue/q")
	assert.Contains(t, body, `Sequence hold: <b>on</b>`)
	assert.Contains(t, body, `<option value="on" selected>`)

	assert.Contains(t, e.raw("/action", form("off", ""), "Cookie", cookie).body, holdVerbs["off"])
	code, _ = e.post("/action", form("off", "yes"))
	require.Equal(t, http.StatusSeeOther, code)
	info, err = e.c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.False(t, info.SequenceHold)
	_, body = e.get("/queue/q")
	assert.NotContains(t, body, `id="sequence-hold"`, "no groups and no hold: no Groups section")

	ro := newEnv(t, Options{ReadOnly: true})
	require.NoError(t, ro.c.SetSequenceHold(ro.ctx(), "q", true, worqr.CreateQueue()))
	_, body = ro.get("/queue/q")
	assert.Contains(t, body, `Sequence hold: <b>on</b>`, "a read-only dashboard shows the setting")
	assert.NotContains(t, body, `value="sequencehold"`, "but no form")
}

// The sequence hold under hostile input: a form without the token, with a
// forged one, from a foreign Origin or Host, or with a hold other than on
// or off is refused, changing nothing.
func TestSequenceHoldActionHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	require.NoError(t, e.c.SetSequenceHold(ctx, "q", true, worqr.CreateQueue()))
	tok := e.csrf()
	form := func(hold string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"sequencehold"}, "q": {qx("q")}, "hold": {hold}, "back": {"queue"}, "confirmed": {"yes"}}
	}
	held := func() bool {
		info, err := e.c.QueueInfo(ctx, "q")
		require.NoError(t, err)
		return info.SequenceHold
	}

	for _, hold := range []string{"", "On", "OFF", "1", "0", "true", "false", "off ", " off", "off\x00", "<off>", strings.Repeat("off", 20000)} {
		code, _ := e.post("/action", form(hold))
		assert.Equal(t, http.StatusBadRequest, code, "hold %.40q", hold)
		code, _ = e.post("/action", url.Values{"csrf": {tok}, "op": {"sequencehold"}, "q": {qx("q")}, "hold": {hold}})
		assert.Equal(t, http.StatusBadRequest, code, "hold %.40q, unconfirmed: no confirmation asked", hold)
	}
	two := form("off")
	two.Add("hold", "on")
	code, _ := e.post("/action", two)
	require.Equal(t, http.StatusSeeOther, code, "the first value counts")
	assert.False(t, held(), "the first value, off, was set")
	require.NoError(t, e.c.SetSequenceHold(ctx, "q", true))

	bad := form("off")
	bad.Del("csrf")
	code, _ = e.post("/action", bad)
	assert.Equal(t, http.StatusForbidden, code, "no token")
	real := tok
	first := "0"
	if real[0] == '0' {
		first = "1"
	}
	bad.Set("csrf", first+real[1:])
	code, _ = e.post("/action", bad)
	assert.Equal(t, http.StatusForbidden, code, "a forged token")
	cookie := csrfCookie + "=" + e.jarCookie(csrfCookie)
	for _, host := range []string{"evil.example", "evil.example:80", "127.0.0.1.nip.io"} {
		res := e.raw("/action", form("off"), "Host", host, "Cookie", cookie)
		assert.Equal(t, http.StatusForbidden, res.code, "a foreign Host: %s", host)
	}
	for _, origin := range []string{"https://evil.example", "null"} {
		res := e.raw("/action", form("off"), "Origin", origin, "Cookie", cookie)
		assert.Equal(t, http.StatusForbidden, res.code, "a foreign Origin: %s", origin)
	}
	code, _ = e.post("/action", form("off"), "Origin", "http://localhost:1")
	assert.Equal(t, http.StatusForbidden, code, "another origin")
	assert.True(t, held(), "nothing changed")

	code, _ = e.post("/action", form("off"), "Origin", e.srv.URL)
	assert.Equal(t, http.StatusSeeOther, code, "the dashboard's own origin, with the token")
	assert.False(t, held())
	code, _ = e.post("/action", url.Values{"csrf": {tok}, "op": {"sequencehold"}, "q": {qx("nosuch")}, "hold": {"on"}, "confirmed": {"yes"}})
	assert.Equal(t, http.StatusNotFound, code, "no such queue: not created")
}

// The queue's page sets a group's turns, or every group's default, and a
// group's own sequence hold, behind a confirmation that names the group,
// through the CSRF check; the groups' rows show their turns and own hold.
func TestGroupTurnsAndHoldActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	_, err := e.c.Enqueue(ctx, "q", []byte("x"), worqr.Group("premium"))
	require.NoError(t, err)
	_, body := e.get("/queue/q")
	assert.Contains(t, body, `value="groupturns"`)
	assert.Contains(t, body, `id="group-sequence-hold"`)
	assert.Contains(t, body, ", turns 1</small>")

	tok := e.csrf()
	turns := func(group, n, confirmed string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"groupturns"}, "q": {qx("q")}, "group": {group}, "n": {n}, "back": {"queue"}, "confirmed": {confirmed}}
	}
	cookie := csrfCookie + "=" + e.jarCookie(csrfCookie)
	ask := e.raw("/action", turns("premium", "3", ""), "Cookie", cookie)
	require.Equal(t, http.StatusOK, ask.code)
	assert.Contains(t, ask.body, `group <span class="name">premium</span>, to 3?`)
	code, _ := e.post("/action", turns("premium", "3", "yes"))
	require.Equal(t, http.StatusSeeOther, code)
	code, _ = e.post("/action", turns("", "2", "yes"))
	require.Equal(t, http.StatusSeeOther, code)
	r, err := e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 2, r.DefaultTurns)
	require.Len(t, r.TopWaiting, 1)
	assert.Equal(t, 3, r.TopWaiting[0].Turns)

	hold := func(group, h, confirmed string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"sequencehold"}, "q": {qx("q")}, "group": {group}, "hold": {h}, "back": {"queue"}, "confirmed": {confirmed}}
	}
	ask = e.raw("/action", hold("premium", "on", ""), "Cookie", cookie)
	require.Equal(t, http.StatusOK, ask.code)
	assert.Contains(t, ask.body, html.EscapeString(groupHoldVerbs["on"])+` <span class="name">q</span>, group <span class="name">premium</span>?`)
	code, _ = e.post("/action", hold("premium", "on", "yes"))
	require.Equal(t, http.StatusSeeOther, code)
	r, err = e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, worqr.GroupHoldOn, r.TopWaiting[0].Hold)
	info, err := e.c.QueueInfo(ctx, "q")
	require.NoError(t, err)
	assert.False(t, info.SequenceHold, "the queue's own setting is untouched")
	_, body = e.get("/queue/q")
	row := sectionOf(body, `id="groups"`)
	assert.Contains(t, row, `<td class="n">3</td><td><span class="tag" title="its own sequence hold, over the queue's">hold on</span>`)
	code, _ = e.post("/action", hold("premium", "queue", "yes"))
	require.Equal(t, http.StatusSeeOther, code)
	r, err = e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, worqr.GroupHoldAsQueue, r.TopWaiting[0].Hold)
}

// The group turns and a group's sequence hold under hostile input: counts
// past MaxLimit or not whole numbers, hold values other than on, off and
// queue (queue without a group), group keys too long, a form without the
// token or with a forged one, a foreign Host or Origin: each is refused,
// changing nothing. A group key of any bytes is stored and shown escaped.
func TestGroupTurnsActionHostile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	require.NoError(t, e.c.SetGroupTurns(ctx, "q", "", 4, worqr.CreateQueue()))
	tok := e.csrf()
	turns := func(group, n string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"groupturns"}, "q": {qx("q")}, "group": {group}, "n": {n}, "back": {"queue"}, "confirmed": {"yes"}}
	}
	hold := func(group, h string) url.Values {
		return url.Values{"csrf": {tok}, "op": {"sequencehold"}, "q": {qx("q")}, "group": {group}, "hold": {h}, "back": {"queue"}, "confirmed": {"yes"}}
	}
	for _, n := range []string{"9007199254740992", "99999999999999999999", "1e3", "NaN", "-1", "", "3.5", " 3", "0x10", strings.Repeat("9", 60000)} {
		code, _ := e.post("/action", turns("", n))
		assert.Equal(t, http.StatusBadRequest, code, "turns %.40q", n)
		code, _ = e.post("/action", turns("g", n))
		assert.Equal(t, http.StatusBadRequest, code, "a group's turns %.40q", n)
	}
	code, _ := e.post("/action", turns(strings.Repeat("k", worqr.MaxGroupLen+1), "2"))
	assert.Equal(t, http.StatusBadRequest, code, "a group key too long")
	for _, h := range []string{"", "On", "QUEUE", "1", "2", "as queue", "queue\x00", "<on>", strings.Repeat("on", 20000)} {
		code, _ := e.post("/action", hold("g", h))
		assert.Equal(t, http.StatusBadRequest, code, "a group's hold %.40q", h)
	}
	code, _ = e.post("/action", hold("", "queue"))
	assert.Equal(t, http.StatusBadRequest, code, "queue is a group's setting only")
	code, _ = e.post("/action", hold(strings.Repeat("k", worqr.MaxGroupLen+1), "on"))
	assert.Equal(t, http.StatusBadRequest, code, "a group key too long")

	bad := turns("", "9")
	bad.Del("csrf")
	code, _ = e.post("/action", bad)
	assert.Equal(t, http.StatusForbidden, code, "no token")
	first := "0"
	if tok[0] == '0' {
		first = "1"
	}
	bad.Set("csrf", first+tok[1:])
	code, _ = e.post("/action", bad)
	assert.Equal(t, http.StatusForbidden, code, "a forged token")
	cookie := csrfCookie + "=" + e.jarCookie(csrfCookie)
	for _, host := range []string{"evil.example", "evil.example:80", "127.0.0.1.nip.io"} {
		res := e.raw("/action", turns("", "9"), "Host", host, "Cookie", cookie)
		assert.Equal(t, http.StatusForbidden, res.code, "a foreign Host: %s", host)
		res = e.raw("/action", hold("g", "on"), "Host", host, "Cookie", cookie)
		assert.Equal(t, http.StatusForbidden, res.code, "a foreign Host: %s", host)
	}
	for _, origin := range []string{"https://evil.example", "null", "http://localhost:1"} {
		res := e.raw("/action", turns("", "9"), "Origin", origin, "Cookie", cookie)
		assert.Equal(t, http.StatusForbidden, res.code, "a foreign Origin: %s", origin)
	}
	r, err := e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	assert.Equal(t, 4, r.DefaultTurns, "nothing changed")

	key := "\x00<b>\xff" + strings.Repeat("é", 60)
	code, _ = e.post("/action", turns(key, "3"))
	require.Equal(t, http.StatusSeeOther, code)
	code, _ = e.post("/action", hold(key, "off"))
	require.Equal(t, http.StatusSeeOther, code)
	_, err = e.c.Enqueue(ctx, "q", []byte("x"), worqr.Group(key))
	require.NoError(t, err)
	r, err = e.c.Groups(ctx, "q", 10)
	require.NoError(t, err)
	require.Len(t, r.TopWaiting, 1)
	assert.Equal(t, key, r.TopWaiting[0].Key)
	assert.Equal(t, 3, r.TopWaiting[0].Turns)
	assert.Equal(t, worqr.GroupHoldOff, r.TopWaiting[0].Hold)
	_, body := e.get("/queue/q")
	assert.NotContains(t, body, "<b>\xff", "the key is shown escaped")
	code, _ = e.post("/action", url.Values{"csrf": {tok}, "op": {"groupturns"}, "q": {qx("nosuch")}, "n": {"2"}, "confirmed": {"yes"}})
	assert.Equal(t, http.StatusNotFound, code, "no such queue: not created")
}

// The groups heading shows the queue's turn size when it is not 1, read
// only: no form sets it.
func TestGroupTurnSizeShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	ctx := e.ctx()
	_, err := e.c.Enqueue(ctx, "q", []byte("x"), worqr.Group("g"))
	require.NoError(t, err)
	_, body := e.get("/queue/q")
	assert.NotContains(t, body, "turn size")
	require.NoError(t, e.c.SetGroupTurnSize(ctx, "q", 8))
	_, body = e.get("/queue/q")
	assert.Contains(t, body, ", turns 1, turn size 8</small>")
}
