package worqrprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
	"github.com/worqr/worqr/internal/testenv"
	worqrprom "github.com/worqr/worqr/prometheus"
)

// histogram finds the histogram of a family with the given labels.
func histogram(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) *dto.Histogram {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return m.GetHistogram()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return nil
}

func TestObserverCountsTasksThroughAWorker(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	obs := worqrprom.NewObserver(worqrprom.ObserverOptions{})
	reg.MustRegister(obs)
	c := clientOn(t, redisOn(t, backend(t)), obs)
	ctx := context.Background()

	w := newWorker(t, c, worqr.WorkerOptions{})
	require.NoError(t, w.Handle(ctx, "mail", func(ctx context.Context, p *worqr.Process) error {
		switch string(p.Task()) {
		case "slow":
			time.Sleep(50 * time.Millisecond)
		case "flaky":
			if p.Attempt() == 1 {
				return errors.New("smtp busy")
			}
		case "bad":
			return worqr.Permanent(errors.New("malformed"))
		}
		return nil
	}, worqr.HandleOptions{Retry: worqr.RetryPolicy{Backoff: func(int, error) time.Duration { return 0 }}}))

	_, err := c.EnqueueBatch(ctx, "mail", [][]byte{[]byte("slow"), []byte("flaky"), []byte("bad")})
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "mail", []byte("quick"))
	require.NoError(t, err)
	_, err = c.Enqueue(ctx, "", []byte("nowhere")) // refused before Redis: not observed
	require.Error(t, err)

	eventually(t, 5*time.Second, "five processes ended", func() bool {
		n := 0.0
		for _, o := range []string{"succeeded", "retried", "dead"} {
			n += counterValue(t, reg, "worqr_tasks_finished_total", map[string]string{"queue": "mail", "outcome": o})
		}
		return n == 5
	})

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP worqr_enqueue_errors_total Enqueue and EnqueueBatch calls of this program that failed.
# TYPE worqr_enqueue_errors_total counter
worqr_enqueue_errors_total{queue="mail"} 0
# HELP worqr_tasks_enqueued_total Tasks enqueued by this program (Enqueue and EnqueueBatch calls that succeeded, counted per task).
# TYPE worqr_tasks_enqueued_total counter
worqr_tasks_enqueued_total{queue="mail"} 4
# HELP worqr_tasks_started_total Processes started by this program's workers: every attempt of a task counts.
# TYPE worqr_tasks_started_total counter
worqr_tasks_started_total{kind="",queue="mail"} 5
# HELP worqr_tasks_finished_total Processes of this program's workers that ended, by outcome (succeeded, retried, dead, cancelled, deleted, lost) and, for dead, the dead letter's reason.
# TYPE worqr_tasks_finished_total counter
`+finishedLines("mail", "", map[string]int{"dead/permanent": 1, "retried": 1, "succeeded": 3})+`# HELP worqr_reclaims_total Dead workers whose tasks this program's workers returned to their queues.
# TYPE worqr_reclaims_total counter
worqr_reclaims_total 0
# HELP worqr_fences_total Times this program's workers fenced themselves: scope "worker" when a worker lost its lease, "queue" when it lost its lease on one queue.
# TYPE worqr_fences_total counter
worqr_fences_total{scope="queue"} 0
worqr_fences_total{scope="worker"} 0
`), "worqr_tasks_enqueued_total", "worqr_enqueue_errors_total", "worqr_tasks_started_total", "worqr_tasks_finished_total", "worqr_reclaims_total", "worqr_fences_total"))

	// Handler durations, by outcome: the slow task's 50 ms is in the sum.
	succeeded := histogram(t, reg, "worqr_process_duration_seconds", map[string]string{"queue": "mail", "outcome": "succeeded"})
	assert.Equal(t, uint64(3), succeeded.GetSampleCount())
	assert.GreaterOrEqual(t, succeeded.GetSampleSum(), 0.05)
	assert.Equal(t, uint64(1), histogram(t, reg, "worqr_process_duration_seconds", map[string]string{"queue": "mail", "outcome": "retried"}).GetSampleCount())
	assert.Equal(t, uint64(1), histogram(t, reg, "worqr_process_duration_seconds", map[string]string{"queue": "mail", "outcome": "dead"}).GetSampleCount())
	// Pickup latency, first attempts only: four tasks, one retried.
	pickup := histogram(t, reg, "worqr_pickup_latency_seconds", map[string]string{"queue": "mail"})
	assert.Equal(t, uint64(4), pickup.GetSampleCount())
	assert.GreaterOrEqual(t, pickup.GetSampleSum(), 0.0)
	assert.Less(t, pickup.GetSampleSum(), 20.0)

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
	require.NoError(t, w.Shutdown(ctx))
}

// The kind label: a task's kind, "" for none, and past MaxKinds the
// kinds seen later are OtherKind.
func TestObserverLabelsKindsUpToMaxKinds(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	obs := worqrprom.NewObserver(worqrprom.ObserverOptions{MaxKinds: 2})
	reg.MustRegister(obs)
	c := clientOn(t, redisOn(t, backend(t)), obs)

	// Started one at a time, so that the first two kinds seen are a and b.
	testenv.RunKinds(t, c, "jobs", "a", "b", "", "c", "other", "a")

	var want strings.Builder
	want.WriteString(`
# HELP worqr_tasks_started_total Processes started by this program's workers: every attempt of a task counts.
# TYPE worqr_tasks_started_total counter
worqr_tasks_started_total{kind="",queue="jobs"} 1
worqr_tasks_started_total{kind="(other)",queue="jobs"} 2
worqr_tasks_started_total{kind="a",queue="jobs"} 2
worqr_tasks_started_total{kind="b",queue="jobs"} 1
# HELP worqr_tasks_finished_total Processes of this program's workers that ended, by outcome (succeeded, retried, dead, cancelled, deleted, lost) and, for dead, the dead letter's reason.
# TYPE worqr_tasks_finished_total counter
`)
	for _, k := range []struct {
		kind string
		n    int
	}{{"", 1}, {worqrprom.OtherKind, 2}, {"a", 2}, {"b", 1}} {
		want.WriteString(finishedLines("jobs", k.kind, map[string]int{"succeeded": k.n}))
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want.String()), "worqr_tasks_started_total", "worqr_tasks_finished_total"))
	assert.Equal(t, uint64(2), histogram(t, reg, "worqr_process_duration_seconds", map[string]string{"queue": "jobs", "kind": worqrprom.OtherKind, "outcome": "succeeded"}).GetSampleCount())
	assert.Equal(t, uint64(2), histogram(t, reg, "worqr_pickup_latency_seconds", map[string]string{"queue": "jobs", "kind": "a"}).GetSampleCount())
	assert.Equal(t, uint64(1), histogram(t, reg, "worqr_pickup_latency_seconds", map[string]string{"queue": "jobs", "kind": ""}).GetSampleCount())
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// finishedLines are the lines of worqr_tasks_finished_total of a queue
// and kind in the text format: every series made ready at zero, with the
// counts given by outcome, or "dead/<reason>".
func finishedLines(queue, kind string, counts map[string]int) string {
	var b strings.Builder
	line := func(outcome, reason string) {
		key := outcome
		if outcome == "dead" {
			key += "/" + reason
		}
		fmt.Fprintf(&b, "worqr_tasks_finished_total{kind=%q,outcome=%q,queue=%q,reason=%q} %d\n", kind, outcome, queue, reason, counts[key])
	}
	for _, o := range []string{"cancelled", "deleted", "lost", "retried", "succeeded"} {
		line(o, "")
	}
	for _, r := range []string{"decode", "exhausted", "manual", "panic", "permanent", "timeout", "unroutable"} {
		line("dead", r)
	}
	return b.String()
}

// counterValue is the sum of the counters with the given labels, 0 if
// there are none yet.
func counterValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func TestObserverCountsEnqueueErrors(t *testing.T) {
	t.Parallel()
	obs := worqrprom.NewObserver(worqrprom.ObserverOptions{ConstLabels: prometheus.Labels{"service": "billing"}})
	m := backend(t)
	c := clientOn(t, redisOn(t, m), obs)
	m.SetError("ERR injected")
	_, err := c.Enqueue(context.Background(), "invoices", []byte("x"))
	require.Error(t, err)
	m.SetError("")
	require.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(`
# HELP worqr_enqueue_errors_total Enqueue and EnqueueBatch calls of this program that failed.
# TYPE worqr_enqueue_errors_total counter
worqr_enqueue_errors_total{queue="invoices",service="billing"} 1
# HELP worqr_tasks_enqueued_total Tasks enqueued by this program (Enqueue and EnqueueBatch calls that succeeded, counted per task).
# TYPE worqr_tasks_enqueued_total counter
worqr_tasks_enqueued_total{queue="invoices",service="billing"} 0
`), "worqr_enqueue_errors_total", "worqr_tasks_enqueued_total"))
}

// The queue label keeps MaxQueues queues apart and labels the rest
// OtherQueue, in every metric of the Observer.
func TestObserverBoundsTheQueueLabel(t *testing.T) {
	t.Parallel()
	obs := worqrprom.NewObserver(worqrprom.ObserverOptions{MaxQueues: 2})
	m := backend(t)
	c := clientOn(t, redisOn(t, m), obs)
	ctx := context.Background()
	for _, q := range []string{"tenant-1", "tenant-2", "tenant-3", "tenant-4", "tenant-1"} {
		_, err := c.Enqueue(ctx, q, []byte("x"))
		require.NoError(t, err)
	}
	w := newWorker(t, c, worqr.WorkerOptions{})
	done := make(chan struct{}, 5)
	for _, q := range []string{"tenant-1", "tenant-2", "tenant-3", "tenant-4"} {
		require.NoError(t, w.Handle(ctx, q, func(context.Context, *worqr.Process) error { done <- struct{}{}; return nil }, worqr.HandleOptions{}))
	}
	for range 5 {
		<-done
	}
	require.NoError(t, w.Shutdown(ctx))
	require.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(`
# HELP worqr_tasks_enqueued_total Tasks enqueued by this program (Enqueue and EnqueueBatch calls that succeeded, counted per task).
# TYPE worqr_tasks_enqueued_total counter
worqr_tasks_enqueued_total{queue="(other)"} 2
worqr_tasks_enqueued_total{queue="tenant-1"} 2
worqr_tasks_enqueued_total{queue="tenant-2"} 1
# HELP worqr_tasks_started_total Processes started by this program's workers: every attempt of a task counts.
# TYPE worqr_tasks_started_total counter
worqr_tasks_started_total{kind="",queue="(other)"} 2
worqr_tasks_started_total{kind="",queue="tenant-1"} 2
worqr_tasks_started_total{kind="",queue="tenant-2"} 1
`), "worqr_tasks_enqueued_total", "worqr_tasks_started_total"))
}

// A worker cut off from Redis fences itself; a peer reclaims its task.
func TestObserverCountsFencesAndReclaims(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	obs := worqrprom.NewObserver(worqrprom.ObserverOptions{})
	reg.MustRegister(obs)
	m := backend(t)
	ctx := context.Background()
	fast := worqr.WorkerOptions{TTL: time.Second, RenewInterval: 250 * time.Millisecond}

	// The doomed worker has a Redis connection of its own, to cut.
	doomedRedis := redisOn(t, m)
	doomed := newWorker(t, clientOn(t, doomedRedis, obs), fast)
	c := clientOn(t, redisOn(t, m), obs)
	require.NoError(t, doomed.StartWork(ctx, "reports", worqr.Events{}))
	_, err := c.Enqueue(ctx, "reports", []byte("monthly"))
	require.NoError(t, err)
	_, err = doomed.Dequeue(ctx, "reports")
	require.NoError(t, err)

	peer := newWorker(t, c, fast)
	done := make(chan struct{})
	require.NoError(t, peer.Handle(ctx, "reports", func(ctx context.Context, p *worqr.Process) error {
		close(done)
		return nil
	}, worqr.HandleOptions{}))
	doomedRedis.Close()

	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the peer never ran the reclaimed task")
	}
	eventually(t, 5*time.Second, "the fence and the reclaim counted", func() bool {
		return counterValue(t, reg, "worqr_fences_total", map[string]string{"scope": "worker"}) == 1 &&
			counterValue(t, reg, "worqr_reclaims_total", nil) == 1 &&
			counterValue(t, reg, "worqr_tasks_finished_total", map[string]string{"outcome": "succeeded"}) == 1 &&
			// The fenced worker's process ends as lost on its own goroutine.
			counterValue(t, reg, "worqr_tasks_finished_total", map[string]string{"queue": "reports", "outcome": "lost"}) == 1
	})
	assert.Equal(t, 1.0, counterValue(t, reg, "worqr_tasks_reclaimed_total", nil))
	assert.Equal(t, 2.0, counterValue(t, reg, "worqr_tasks_started_total", map[string]string{"queue": "reports"}))
	// The second start is attempt 2: no second pickup latency.
	assert.Equal(t, uint64(1), histogram(t, reg, "worqr_pickup_latency_seconds", map[string]string{"queue": "reports"}).GetSampleCount())
}

// Queue names are any bytes; label values must be UTF-8, or Prometheus
// panics: invalid bytes become U+FFFD.
func TestQueueNamesThatAreNotUTF8(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	obs := worqrprom.NewObserver(worqrprom.ObserverOptions{})
	c := clientOn(t, redisOn(t, backend(t)), obs)
	reg.MustRegister(obs, worqrprom.NewCollector(c, worqrprom.CollectorOptions{}))
	ctx := context.Background()
	const queue = "jobs-\xff\xfe"
	w := newWorker(t, c, worqr.WorkerOptions{})
	require.NoError(t, w.Handle(ctx, queue, func(ctx context.Context, p *worqr.Process) error { return nil }, worqr.HandleOptions{}))
	_, err := c.Enqueue(ctx, queue, []byte("x"))
	require.NoError(t, err)
	eventually(t, 5*time.Second, "the task finished", func() bool {
		return counterValue(t, reg, "worqr_tasks_finished_total", map[string]string{"queue": "jobs-\uFFFD", "outcome": "succeeded"}) == 1
	})
	want := strings.ReplaceAll(`
# HELP worqr_tasks_enqueued_total Tasks enqueued by this program (Enqueue and EnqueueBatch calls that succeeded, counted per task).
# TYPE worqr_tasks_enqueued_total counter
worqr_tasks_enqueued_total{queue="jobs-\uFFFD"} 1
# HELP worqr_queue_tasks Tasks of a queue by state: waiting (ready to run), delayed (scheduled, or waiting out a retry backoff), in_flight (held by a worker), dead (dead letters).
# TYPE worqr_queue_tasks gauge
worqr_queue_tasks{queue="jobs-\uFFFD",state="dead"} 0
worqr_queue_tasks{queue="jobs-\uFFFD",state="delayed"} 0
worqr_queue_tasks{queue="jobs-\uFFFD",state="in_flight"} 0
worqr_queue_tasks{queue="jobs-\uFFFD",state="waiting"} 0
`, `\uFFFD`, "\uFFFD")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "worqr_tasks_enqueued_total", "worqr_queue_tasks"))
}

// The reason label of dead outcomes: the built-in reasons as themselves,
// the application's own up to MaxReasons, then OtherReason; "" for the
// other outcomes. Poison pills, which die in a reclaim, have a counter of
// their own.
func TestObserverLabelsDeadReasonsUpToMaxReasons(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	obs := worqrprom.NewObserver(worqrprom.ObserverOptions{MaxReasons: 2})
	reg.MustRegister(obs)
	ctx := context.Background()
	finish := func(outcome worqr.Outcome, reason string) {
		obs.ObserveFinish(ctx, worqr.FinishEvent{Queue: "mail", Outcome: outcome, Reason: reason, Duration: time.Millisecond})
	}
	finish(worqr.OutcomeSucceeded, "")
	finish(worqr.OutcomeRetried, "")
	finish(worqr.OutcomeDead, worqr.ReasonPermanent)
	finish(worqr.OutcomeDead, worqr.ReasonPermanent)
	finish(worqr.OutcomeDead, "smtp-5xx")
	finish(worqr.OutcomeDead, "bad-input")
	finish(worqr.OutcomeDead, "quota") // past the bound
	finish(worqr.OutcomeDead, "over")  // past the bound
	finish(worqr.OutcomeDead, "smtp-5xx")
	finish(worqr.OutcomeDead, worqr.ReasonTimeout) // built in: past the bound too
	finish(worqr.OutcomeDead, worqr.ReasonExhausted)
	obs.ObserveReclaim(ctx, worqr.ReclaimEvent{DeadWorker: "w", Tasks: 1, Poison: 2})

	want := finishedLines("mail", "", map[string]int{"succeeded": 1, "retried": 1, "dead/permanent": 2, "dead/timeout": 1, "dead/exhausted": 1})
	want += `worqr_tasks_finished_total{kind="",outcome="dead",queue="mail",reason="(other)"} 2
worqr_tasks_finished_total{kind="",outcome="dead",queue="mail",reason="bad-input"} 1
worqr_tasks_finished_total{kind="",outcome="dead",queue="mail",reason="smtp-5xx"} 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP worqr_tasks_finished_total Processes of this program's workers that ended, by outcome (succeeded, retried, dead, cancelled, deleted, lost) and, for dead, the dead letter's reason.
# TYPE worqr_tasks_finished_total counter
`+want+`# HELP worqr_tasks_poisoned_total Tasks of dead workers that this program's workers sent to the dead letters, reason "poison", instead of their queues (see worqr.Options.PoisonLimit).
# TYPE worqr_tasks_poisoned_total counter
worqr_tasks_poisoned_total 2
`), "worqr_tasks_finished_total", "worqr_tasks_poisoned_total"))
	// The duration histogram is not split by reason.
	assert.Equal(t, uint64(9), histogram(t, reg, "worqr_process_duration_seconds", map[string]string{"queue": "mail", "outcome": "dead"}).GetSampleCount())
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
}
