package worqrtest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/worqrtest"
)

// Resize is a typed task.
type Resize struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

// resize is the handler under test.
func resize(ctx context.Context, p *worqr.Process, r Resize) error {
	if r.Width <= 0 {
		return worqr.Permanent(errors.New("width must be positive"))
	}
	p.SetResult(fmt.Appendf(nil, "%s@%dw", r.Image, r.Width))
	return nil
}

// Run a typed handler on a value, with no worker and no Redis.
func ExampleRunJSON() {
	ctx := context.Background()
	result, err := worqrtest.RunJSON(ctx, resize, Resize{Image: "cat.png", Width: 200}, worqrtest.RunOptions{})
	fmt.Printf("%s %v\n", result, err)

	_, err = worqrtest.RunJSON(ctx, resize, Resize{Image: "cat.png"}, worqrtest.RunOptions{})
	fmt.Println(worqr.IsPermanent(err), err)
	// Output:
	// cat.png@200w <nil>
	// true permanent: width must be positive
}
