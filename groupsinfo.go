package worqr

import (
	"context"
	"fmt"

	"github.com/worqr/worqr/internal/inspect"
	"github.com/worqr/worqr/worqrtype"
)

// MaxGroupsRead bounds the groups one Groups call reads: that many of the
// groups whose turn may come (the next served first), and that many of
// those with tasks in flight.
const MaxGroupsRead = 1000

// What Groups reads of a queue's groups is worqrtype's.
type (
	// GroupInfo is one group of a queue, for operators (see
	// worqrtype.GroupInfo).
	GroupInfo = worqrtype.GroupInfo
	// GroupsReport is what Groups read of a queue's groups (see
	// worqrtype.GroupsReport).
	GroupsReport = worqrtype.GroupsReport
)

// Groups reads a queue's groups for operators, in one script call: the
// top n groups by tasks waiting and by slots running, and the groups held
// back by their concurrency limit or rate limit, with the counts of groups ready and
// running (QueueInfo counts them too). It reads the groups with tasks in
// flight and the next MaxGroupsRead groups to be served, MaxGroupsRead of
// each at most, counting each one's waiting tasks in O(log N): its cost
// does not grow with the number of groups past that bound
// (GroupsReport.Partial says when it was reached). n must be in
// 1..MaxGroupsRead (ErrInvalidOptions).
func (c *Client) Groups(ctx context.Context, queue string, n int) (GroupsReport, error) {
	const op = "groups"
	if err := c.core.Validate(ctx, op, queue); err != nil {
		return GroupsReport{}, err
	}
	if n < 1 || n > MaxGroupsRead {
		return GroupsReport{}, fmt.Errorf("worqr: %s %q: n %d not in 1..%d: %w", op, queue, n, MaxGroupsRead, ErrInvalidOptions)
	}
	st, err := c.core.Store.GroupsRead(ctx, queue, MaxGroupsRead)
	if err != nil {
		return GroupsReport{}, c.core.Fail(op, queue, err)
	}
	return inspect.Groups(queue, st, n), nil
}
