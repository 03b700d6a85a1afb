package checker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr/internal/reclaim"
	"github.com/worqr/worqr/internal/store"
)

func newEnv(t *testing.T) (*Env, *miniredis.Miniredis) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	return &Env{
		Store: store.New(rdb, "checktest", false, false),
		Fail:  func(op, _ string, err error) error { return errors.Join(errors.New(op), err) },
		Valid: func(queue string) bool { return queue != "" },
		Reclaim: func(context.Context, string) (reclaim.Reclaimed, error) {
			return reclaim.Reclaimed{}, errors.New("no dead worker expected")
		},
		StepQueue: func(spec string) (string, bool) { return spec, true }, // a step's spec is its queue's name
		EnqueueSteps: func(context.Context, string, []store.ReadyStep) error {
			return errors.New("no stalled step expected")
		},
		StepTask: func(string, store.ReadyStep) (store.EnqueueOne, error) {
			return store.EnqueueOne{}, errors.New("no vanished step expected")
		},
	}, m
}

// A healthy queue is checked and found fine; a registry entry with no
// queue behind it is stale, and a repair removes it; a key worqr did not
// write is reported and left alone.
func TestCheckFindsAndRepairsAStaleQueue(t *testing.T) {
	env, m := newEnv(t)
	ctx := context.Background()
	_, err := env.Store.Enqueue(ctx, "q", [][]byte{[]byte("x")}, store.EnqueueArgs{})
	require.NoError(t, err)
	require.NoError(t, env.Store.RegisterQueue(ctx, "q"))
	require.NoError(t, env.Store.RegisterQueue(ctx, "ghost"))
	require.NoError(t, m.Set("checktest:junk", "not worqr's"))

	rep, err := Run(ctx, env, false)
	require.NoError(t, err)
	assert.Equal(t, 2, rep.QueuesChecked)
	assert.Equal(t, []string{"ghost"}, rep.StaleQueues)
	assert.Equal(t, []string{"checktest:junk"}, rep.UnknownKeys)
	assert.Empty(t, rep.OrphanedProcesses)
	assert.Empty(t, rep.UnregisteredQueues)
	assert.Zero(t, rep.Repaired, "no repair without asking")

	rep, err = Run(ctx, env, true)
	require.NoError(t, err)
	assert.Equal(t, []string{"ghost"}, rep.Repaired.RemovedQueues)
	names, err := env.Store.RegisteredQueueNames(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"q"}, names)
	assert.True(t, m.Exists("checktest:junk"), "an unknown key is never touched")

	rep, err = Run(ctx, env, false)
	require.NoError(t, err)
	assert.Empty(t, rep.StaleQueues, "repaired")
}

// A check that cannot reach Redis by its deadline fails with the
// client's error.
func TestCheckFailsWithTheClientsError(t *testing.T) {
	env, m := newEnv(t)
	m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, env, false)
	require.ErrorContains(t, err, "consistency check")
}
