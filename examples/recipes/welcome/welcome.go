// Package welcome sends welcome emails from the queue "welcome".
package welcome

import (
	"context"
	"errors"
	"time"

	"github.com/worqr/worqr"
)

type Welcome struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

// Mailer sends welcomes with Deliver, the mail server's client.
type Mailer struct {
	Deliver func(ctx context.Context, to, body string) error
}

// Handle is the queue's handler.
func (m Mailer) Handle(ctx context.Context, p *worqr.Process, w Welcome) error {
	if w.Email == "" {
		return worqr.Permanent(errors.New("no address"))
	}
	if err := m.Deliver(ctx, w.Email, "Welcome, "+w.Name); err != nil {
		return err // retried under Options' policy
	}
	p.SetResult([]byte("sent to " + w.Email))
	return nil
}

// Options are the queue's: what worker.Handle, or worqr.HandleJSON, is given.
var Options = worqr.HandleOptions{
	Retry: worqr.RetryPolicy{MaxAttempts: 5, Backoff: worqr.ExponentialBackoff(time.Second, time.Minute, 0.5)},
}

// Signup enqueues a welcome.
func Signup(ctx context.Context, client *worqr.Client, email, name string) error {
	_, err := worqr.EnqueueJSON(ctx, client, "welcome", Welcome{Email: email, Name: name})
	return err
}
