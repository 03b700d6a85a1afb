package worqr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/worqr/worqr/internal/enqueue"
)

// ErrUnroutable is the error of a task that a Router has no handler for:
// its kind has none (or it has no kind, and the Router no handler for
// tasks without one). The task goes to the dead letters at once, reason
// ReasonUnroutable, with an error that names the task's kind: no retry
// would find a handler the worker does not have.
var ErrUnroutable = errors.New("no handler for the task's kind")

// Router serves a queue with one handler per task kind (see the Kind
// enqueue option): its Serve method is the Handler to give Worker.Handle,
// and calls the handler registered for each task's Process.Kind, wrapped
// in the middleware registered with it. A task whose kind has no handler
// fails with ErrUnroutable. The zero value is an empty Router, ready to
// use; handlers may be registered while it serves.
//
//	r := &worqr.Router{}
//	r.Handle("email.welcome", sendWelcome)
//	worqr.RouteJSON(r, sendReceipt) // a Kinded type's kind
//	w.Handle(ctx, "mail", r.Serve, worqr.HandleOptions{})
type Router struct {
	mu     sync.Mutex                         // serialises registrations
	routes atomic.Pointer[map[string]Handler] // read by Serve without a lock; replaced whole
}

// Handle registers h for the tasks of this kind, wrapped in mw, the first
// outermost (inside the worker's and the queue's middleware, which wrap
// Serve). The kind "" registers h for the tasks that have no kind. An
// invalid kind (see Kind), a nil h, or a kind already registered is an
// error wrapping ErrInvalidOptions, and registers nothing.
func (r *Router) Handle(kind string, h Handler, mw ...Middleware) error {
	if err := enqueue.CheckKind(kind); err != nil {
		return fmt.Errorf("worqr: route: %w", err)
	}
	if h == nil {
		return fmt.Errorf("worqr: route %q: nil handler: %w", kind, ErrInvalidOptions)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.routes.Load()
	var routes map[string]Handler
	if old != nil {
		if _, ok := (*old)[kind]; ok {
			return fmt.Errorf("worqr: route %q: kind already has a handler: %w", kind, ErrInvalidOptions)
		}
		routes = make(map[string]Handler, len(*old)+1)
		for k, v := range *old {
			routes[k] = v
		}
	} else {
		routes = make(map[string]Handler, 1)
	}
	routes[kind] = chain(h, mw)
	r.routes.Store(&routes)
	return nil
}

// Kinds lists the kinds the Router has handlers for, "" for the tasks
// that have none if it has that handler, in no particular order.
func (r *Router) Kinds() []string {
	routes := r.routes.Load()
	if routes == nil {
		return nil
	}
	kinds := make([]string, 0, len(*routes))
	for k := range *routes {
		kinds = append(kinds, k)
	}
	return kinds
}

// Serve runs a task with the handler registered for its kind: it is the
// Router's Handler. A task whose kind has no handler is not run: Serve
// returns a Permanent error with reason ReasonUnroutable that wraps
// ErrUnroutable and names the kind, so the task goes to the dead letters
// at once.
func (r *Router) Serve(ctx context.Context, p *Process) error {
	if routes := r.routes.Load(); routes != nil {
		if h, ok := (*routes)[p.Kind()]; ok {
			return h(ctx, p)
		}
	}
	kind := "none"
	if p.Kind() != "" {
		kind = fmt.Sprintf("%q", p.Kind())
	}
	return WithReason(ReasonUnroutable, Permanent(fmt.Errorf("%w: %s", ErrUnroutable, kind)))
}

// RouteJSON registers h with r, as Router.Handle does, for the tasks of
// T's kind (see Kinded), their payloads decoded from JSON as HandleJSON
// does: EnqueueJSON of a T enqueues such a task.
func RouteJSON[T Kinded](r *Router, h TypedHandler[T], mw ...Middleware) error {
	return Route(r, JSON[T]{}, h, mw...)
}

// Route registers h with r, as Router.Handle does, for the tasks of T's
// kind (see Kinded), their payloads decoded with codec (JSON when nil) as
// Typed does.
func Route[T Kinded](r *Router, codec Codec[T], h TypedHandler[T], mw ...Middleware) error {
	kind, _ := enqueue.TypeKind[T]()
	if kind == "" {
		return fmt.Errorf("worqr: route %s: its Kind is empty: %w", enqueue.TypeName[T](), ErrInvalidOptions)
	}
	if h == nil {
		return fmt.Errorf("worqr: route %q: nil handler: %w", kind, ErrInvalidOptions)
	}
	return r.Handle(kind, Typed(codec, h), mw...)
}
