package welcome

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/worqrtest"
)

func TestHandle(t *testing.T) {
	t.Parallel()
	m := Mailer{Deliver: func(context.Context, string, string) error { return nil }}
	result, err := worqrtest.RunJSON(t.Context(), m.Handle, Welcome{Email: "ada@example.com", Name: "Ada"}, worqrtest.RunOptions{})
	if err != nil || string(result) != "sent to ada@example.com" {
		t.Fatalf("got %q, %v", result, err)
	}
}

// The mail server fails twice: the third attempt sends it, in milliseconds
// rather than the policy's seconds.
func TestHandleRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	m := Mailer{Deliver: func(context.Context, string, string) error {
		if calls.Add(1) <= 2 {
			return errors.New("421 try again later")
		}
		return nil
	}}
	res, err := worqrtest.RunPolicyJSON(t.Context(), m.Handle, Welcome{Email: "ada@example.com"}, worqrtest.PolicyOptions{Handle: Options})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 3 || res.Outcome.Status != worqr.OutcomeSucceeded {
		t.Fatalf("got %+v", res)
	}
}

// No address: dead at once, never retried.
func TestHandleNoAddress(t *testing.T) {
	t.Parallel()
	m := Mailer{Deliver: func(context.Context, string, string) error { return nil }}
	res, err := worqrtest.RunPolicyJSON(t.Context(), m.Handle, Welcome{Name: "Ada"}, worqrtest.PolicyOptions{Handle: Options})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Attempts) != 1 || res.Outcome.Status != worqr.OutcomeDead || res.Outcome.Reason != worqr.ReasonPermanent {
		t.Fatalf("got %+v", res)
	}
}

func TestSignup(t *testing.T) {
	t.Parallel()
	client := worqrtest.NewClient(t, worqrtest.Options{})
	if err := Signup(t.Context(), client, "ada@example.com", "Ada"); err != nil {
		t.Fatal(err)
	}
	worqrtest.RequireEnqueuedJSON(t, client, "welcome", Welcome{Email: "ada@example.com", Name: "Ada"})
}
