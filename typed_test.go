package worqr

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/worqr/worqr/internal/engine"
)

type signup struct {
	Email string   `json:"email"`
	Tags  []string `json:"tags,omitempty"`
}

// A value enqueued as JSON reaches a JSON handler as the same value.
func TestEnqueueJSONHandleJSON(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	got := make(chan signup, 1)
	require.NoError(t, HandleJSON(ctx, w, "signups", func(_ context.Context, p *Process, v signup) error {
		got <- v
		return nil
	}, HandleOptions{}))
	want := signup{Email: "ada@example.com", Tags: []string{"beta"}}
	id, err := EnqueueJSON(ctx, c, "signups", want)
	require.NoError(t, err)
	assert.NotEmpty(t, id)
	assert.Equal(t, want, recv(t, got, 10*time.Second, "the typed handler's value"))
}

// A payload that does not decode goes to the dead letters on its first
// attempt, reason decode, with an error naming the type; the handler is
// never called, and the error reaches middleware wrapping ErrDecode.
func TestUndecodablePayloadIsDeadLettered(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	seen := make(chan error, 1)
	spy := func(next Handler) Handler {
		return func(ctx context.Context, p *Process) error {
			err := next(ctx, p)
			seen <- err
			return err
		}
	}
	called := make(chan signup, 1)
	require.NoError(t, HandleJSON(ctx, w, "signups", func(_ context.Context, _ *Process, v signup) error {
		called <- v
		return nil
	}, HandleOptions{Middleware: []Middleware{spy}}))

	id, err := c.Enqueue(ctx, "signups", []byte("not json"), Retain(time.Minute))
	require.NoError(t, err)
	out, err := c.Wait(ctx, "signups", id)
	require.NoError(t, err)
	assert.Equal(t, OutcomeDead, out.Status)
	assert.Equal(t, ReasonDecode, out.Reason)
	assert.Equal(t, 1, out.Attempts)
	assert.Contains(t, out.Error, "does not decode into worqr.signup")

	herr := recv(t, seen, 10*time.Second, "the handler's error")
	assert.ErrorIs(t, herr, ErrDecode)
	assert.True(t, IsPermanent(herr))
	assert.Empty(t, called, "the typed handler ran on a payload that did not decode")

	dead, err := c.DeadLetters(ctx, "signups", 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, id, dead[0].ID)
	assert.Equal(t, ReasonDecode, dead[0].Reason)
	assert.Equal(t, "not json", string(dead[0].Payload))
}

// upper is a codec of its own: a string stored in upper case, with a
// number after a colon.
type upper struct{}

type note struct {
	Text string
	N    int
}

func (upper) Marshal(v note) ([]byte, error) {
	if v.Text == "" {
		return nil, errors.New("empty note")
	}
	return []byte(strings.ToUpper(v.Text) + ":" + strconv.Itoa(v.N)), nil
}

func (upper) Unmarshal(data []byte, v *note) error {
	text, n, ok := strings.Cut(string(data), ":")
	if !ok {
		return errors.New("no colon")
	}
	num, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	*v = note{Text: text, N: num}
	return nil
}

// A codec of one's own encodes at enqueue and decodes in Typed; its
// encoding errors come back wrapped and enqueue nothing.
func TestCodecOfOnesOwn(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	got := make(chan note, 1)
	require.NoError(t, w.Handle(ctx, "notes", Typed[note](upper{}, func(_ context.Context, _ *Process, v note) error {
		got <- v
		return nil
	}), HandleOptions{}))

	_, err := EnqueueWith[note](ctx, c, upper{}, "notes", note{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "empty note")
	assert.Contains(t, err.Error(), "worqr.note")
	_, err = EnqueueWith[note](ctx, c, upper{}, "notes", note{Text: "hi", N: 3})
	require.NoError(t, err)
	assert.Equal(t, note{Text: "HI", N: 3}, recv(t, got, 10*time.Second, "the decoded note"))
	n, err := c.QueueLen(ctx, "notes")
	require.NoError(t, err)
	assert.Zero(t, n, "the note that did not encode was enqueued")
}

// Encoding and decoding without Redis: a nil codec is JSON, a value JSON
// cannot encode is an error, a nil handler is refused by Handle.
func TestTypedWithoutRedis(t *testing.T) {
	t.Parallel()
	var got signup
	h := Typed(nil, func(_ context.Context, _ *Process, v signup) error { got = v; return nil })
	require.NoError(t, h(context.Background(), NewDetachedProcess([]byte(`{"email":"g@h","extra":1}`), DetachedOptions{})))
	assert.Equal(t, signup{Email: "g@h"}, got, "unknown fields are ignored")

	err := h(context.Background(), NewDetachedProcess([]byte(`{"email":7}`), DetachedOptions{}))
	assert.ErrorIs(t, err, ErrDecode)
	assert.Equal(t, ReasonDecode, engine.Reason(err, ReasonPermanent))
	assert.Contains(t, err.Error(), "worqr.signup")

	_, err = JSON[chan int]{}.Marshal(make(chan int))
	assert.Error(t, err)
	assert.Nil(t, Typed[signup](nil, nil))
}

func TestHandleJSONNilHandler(t *testing.T) {
	t.Parallel()
	_, c, ctx := setup(t)
	w := newWorker(t, c, WorkerOptions{})
	assert.ErrorIs(t, HandleJSON[signup](ctx, w, "q", nil, HandleOptions{}), ErrInvalidOptions)
}

// A detached process answers its accessors from its options (or their
// defaults), keeps its result, and refuses everything that needs Redis.
func TestDetachedProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := NewDetachedProcess([]byte("payload"), DetachedOptions{})
	assert.Equal(t, "payload", string(p.Task()))
	assert.Equal(t, "detached", p.Queue())
	assert.Equal(t, 1, p.Attempt())
	assert.NotEmpty(t, p.TaskID())
	assert.Equal(t, p.TaskID(), p.ID())
	assert.WithinDuration(t, time.Now(), p.EnqueuedAt(), time.Minute)
	assert.Empty(t, p.LastError())
	assert.Nil(t, p.Result())
	p.SetResult([]byte("r"))
	assert.Equal(t, "r", string(p.Result()))
	for name, err := range map[string]error{
		"finish":      p.Finish(ctx),
		"requeue":     p.Requeue(ctx),
		"retry":       p.Retry(ctx, time.Second, errors.New("x")),
		"dead-letter": p.DeadLetter(ctx, errors.New("x")),
		"status":      p.Status(ctx),
	} {
		assert.ErrorIs(t, err, ErrDetached, name)
	}
	assert.Nil(t, p.Err())
	select {
	case <-p.Done():
		t.Fatal("a detached process's Done is closed")
	default:
	}

	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	p = NewDetachedProcess(nil, DetachedOptions{Queue: "q", TaskID: "abc", Attempt: 3, LastError: "boom", EnqueuedAt: at})
	assert.Equal(t, "q", p.Queue())
	assert.Equal(t, "abc", p.TaskID())
	assert.Equal(t, 3, p.Attempt())
	assert.Equal(t, "boom", p.LastError())
	assert.Equal(t, at, p.EnqueuedAt())
}
