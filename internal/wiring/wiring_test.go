package wiring_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/errs"
	"github.com/worqr/worqr/internal/testenv"
	"github.com/worqr/worqr/internal/wiring"
)

func newClient(t *testing.T) *wiring.Client {
	t.Helper()
	rdb := testenv.RedisOn(t, testenv.Backend(t))
	c, err := wiring.New(context.Background(), wiring.Config{
		Redis: rdb, Prefix: "t", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxTaskSize: 1 << 20,
		TTL: 3 * time.Second, RenewInterval: 1500 * time.Millisecond, MaxAttempts: 10,
		ProgressInterval: 100 * time.Millisecond, CancelWait: time.Second, SweepEvery: 30 * time.Second, SweepAge: 10 * time.Second,
	})
	require.NoError(t, err)
	return c
}

// Every call checks its context, its queue's name and that the client is
// open; Close closes the client once.
func TestValidateRefusesWhatNoCallCanDo(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	require.NoError(t, c.Validate(ctx, "op", "q"))
	require.ErrorIs(t, c.Validate(ctx, "op", ""), errs.ErrInvalidQueueName)
	require.ErrorIs(t, c.Validate(ctx, "op", strings.Repeat("q", 1025)), errs.ErrInvalidQueueName)
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, c.ValidateCtx(done, "op"), context.Canceled)

	require.NoError(t, c.Close(ctx))
	require.ErrorIs(t, c.ValidateCtx(ctx, "op"), errs.ErrClientClosed)
	require.ErrorIs(t, c.Validate(ctx, "op", "q"), errs.ErrClientClosed)
	require.NoError(t, c.Close(ctx), "a second Close does nothing")
}
