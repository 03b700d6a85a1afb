package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/worqr/worqr/internal/errs"
)

// Fail wraps an error from Redis of the call op on queue (empty for
// none). Errors that are not replies from the server (connection
// refused, reset, client closing) also wrap ErrUnavailable; context
// errors stay as they are.
func Fail(op, queue string, err error) error {
	where := op
	if queue != "" {
		where = fmt.Sprintf("%s %q", op, queue)
	}
	if err == nil {
		return fmt.Errorf("worqr: %s: unexpected reply", where)
	}
	re, isReply := redisReply(err)
	if isReply && strings.Contains(re.Error(), "only (P)SUBSCRIBE") {
		// A server that refuses commands on a connection with a
		// subscription: miniredis, given a rueidis client speaking RESP3.
		return fmt.Errorf("worqr: %s: %w: this server (miniredis?) refuses commands on a connection with a subscription; "+
			"give worqr its address as Options.Addr, or a rueidis client with AlwaysRESP2, DisableCache and ForceSingleClient, "+
			"or use the package github.com/worqr/worqr/embedded: %w", where, errs.ErrInvalidOptions, err)
	}
	if isReply && !transientReply(re.Error()) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("worqr: %s: %w", where, err)
	}
	return fmt.Errorf("worqr: %s: %w: %w", where, errs.ErrUnavailable, err)
}

// redisReply is the server's error reply that err is or wraps (the store
// names the script that failed around its reply), if any.
func redisReply(err error) (*rueidis.RedisError, bool) {
	var re *rueidis.RedisError
	if errors.As(err, &re) && re != rueidis.Nil {
		return re, true
	}
	return nil, false
}

// transientReply reports whether an error reply is one of a server that
// did not run the command and will again soon: loading its data after a
// restart, busy with a long script, a replica cut off from its master or
// being promoted, a cluster between states. These are outages like a
// closed connection (ErrUnavailable), so a caller retries: a handler's
// outcome written as Redis reloads is written once it has (found by the
// chaos run: it was given up, and the process stayed held).
func transientReply(msg string) bool {
	code, _, _ := strings.Cut(msg, " ")
	switch code {
	case "LOADING", "BUSY", "MASTERDOWN", "READONLY", "TRYAGAIN", "CLUSTERDOWN":
		return true
	}
	return false
}
