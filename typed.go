package worqr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/worqr/worqr/internal/enqueue"
)

// Codec turns values of type T into task payloads and back, for typed
// enqueues and handlers (EnqueueWith, Typed). JSON is the default; a
// protobuf or msgpack codec is a type with these two methods.
type Codec[T any] interface {
	// Marshal encodes v as a payload.
	Marshal(v T) ([]byte, error)
	// Unmarshal decodes a payload into v.
	Unmarshal(data []byte, v *T) error
}

// JSON is the Codec of encoding/json: unknown fields are ignored and
// missing ones keep their zero value, so producers and workers of two
// versions of T can run side by side.
type JSON[T any] struct{}

// Marshal encodes v with json.Marshal.
func (JSON[T]) Marshal(v T) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data with json.Unmarshal.
func (JSON[T]) Unmarshal(data []byte, v *T) error { return json.Unmarshal(data, v) }

// ErrDecode is the error of a typed handler whose task's payload does not
// decode into its type (see Typed): the task goes to the dead letters at
// once, reason ReasonDecode.
var ErrDecode = errors.New("payload does not decode")

// Kinded is a task type that names its kind, so that producers and
// workers share one definition of it: EnqueueJSON and EnqueueWith give
// the tasks of such a type its kind (the Kind enqueue option), and
// RouteJSON and Route register a Router's handler under it. Kind is
// called on a zero T (on a new value, if T is a pointer type) and must
// return the same valid kind (see Kind) for every value of the type:
//
//	type Welcome struct{ Email string }
//
//	func (Welcome) Kind() string { return "email.welcome" }
type Kinded interface {
	// Kind is the kind of the type's tasks, such as "email.welcome".
	Kind() string
}

// EnqueueJSON enqueues v encoded as JSON, as Enqueue does with a payload,
// and returns the task's id. HandleJSON[T] handles such tasks, and a
// Router's RouteJSON[T] if T is Kinded: the task then gets T's kind.
func EnqueueJSON[T any](ctx context.Context, c *Client, queue string, v T, opts ...EnqueueOption) (string, error) {
	return EnqueueWith(ctx, c, JSON[T]{}, queue, v, opts...)
}

// EnqueueWith enqueues v encoded with codec (JSON when nil), as Enqueue
// does with a payload, and returns the task's id. If T is Kinded, the task
// gets T's kind (a Kind option among opts overrides it). An encoding
// error is returned wrapped; nothing is enqueued then.
func EnqueueWith[T any](ctx context.Context, c *Client, codec Codec[T], queue string, v T, opts ...EnqueueOption) (string, error) {
	if codec == nil {
		codec = JSON[T]{}
	}
	data, err := codec.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("worqr: enqueue %q: encode %s: %w", queue, enqueue.TypeName[T](), err)
	}
	if kind, ok := enqueue.TypeKind[T](); ok {
		opts = append([]EnqueueOption{Kind(kind)}, opts...)
	}
	return c.Enqueue(ctx, queue, data, opts...)
}

// TypedHandler runs one task whose payload decoded to v. Its outcomes are
// a Handler's.
type TypedHandler[T any] func(ctx context.Context, p *Process, v T) error

// Typed returns a Handler that decodes each task's payload into a T with
// codec (JSON when nil) and calls h with it. A payload that does not
// decode is not retried (it never will): h is not called, and the task
// goes to the dead letters at once, reason ReasonDecode, with an error that
// wraps ErrDecode and names T. Serve a queue with it with Worker.Handle.
// A nil h gives a nil Handler.
func Typed[T any](codec Codec[T], h TypedHandler[T]) Handler {
	if h == nil {
		return nil
	}
	if codec == nil {
		codec = JSON[T]{}
	}
	return func(ctx context.Context, p *Process) error {
		var v T
		if err := codec.Unmarshal(p.Task(), &v); err != nil {
			return WithReason(ReasonDecode, Permanent(fmt.Errorf("%w into %s: %w", ErrDecode, enqueue.TypeName[T](), err)))
		}
		return h(ctx, p, v)
	}
}

// HandleJSON serves a queue, as Worker.Handle does, with a handler of
// values of type T decoded from JSON payloads (see Typed, EnqueueJSON).
func HandleJSON[T any](ctx context.Context, w *Worker, queue string, h TypedHandler[T], opts HandleOptions) error {
	return w.Handle(ctx, queue, Typed(JSON[T]{}, h), opts)
}
