package worqr_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/worqr/worqr"
)

// Take tasks in batches of up to 100 (or what came within 50ms) and write
// each batch in one go: a row that cannot be written fails alone, here for
// good (to the dead letters), and the rest of its batch is finished.
func ExampleWorker_HandleBatch() {
	client, stop := embedded()
	defer stop()
	ctx := context.Background()
	worker, _ := client.NewWorker(ctx, worqr.WorkerOptions{})

	done := make(chan struct{})
	err := worker.HandleBatch(ctx, "rows", func(ctx context.Context, batch []*worqr.Process) error {
		var rows []string
		failed := worqr.BatchErrors{}
		for _, p := range batch {
			if !strings.HasPrefix(string(p.Task()), "row:") {
				failed[p] = worqr.Permanent(errors.New("not a row"))
				continue
			}
			rows = append(rows, string(p.Task()))
		}
		slices.Sort(rows)
		fmt.Printf("inserted %d rows in one write: %v\n", len(rows), rows) // a bulk insert
		close(done)
		return failed // nil entries and absent processes are finished
	}, worqr.BatchOptions{Size: 100, MaxWait: 50 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	_, _ = client.EnqueueBatch(ctx, "rows", [][]byte{[]byte("row:1"), []byte("garbage"), []byte("row:2")})
	<-done
	if err := worker.Shutdown(ctx); err != nil {
		panic(err)
	}
	dead, _ := client.DeadLetterCount(ctx, "rows")
	fmt.Println("dead letters:", dead)
	// Output:
	// inserted 2 rows in one write: [row:1 row:2]
	// dead letters: 1
}
