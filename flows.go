package worqr

import (
	"time"
)

// FlowSweepAge is how old a workflow task's notice must be before a sweep
// carries it to its workflow (docs/workflows.md): the worker that ended the
// task carries it within milliseconds, unless it crashed or lost Redis.
const FlowSweepAge = 10 * time.Second

// FlowSweepEvery is how often a client with workers sweeps the queues
// they have served for notices left by a crash.
const FlowSweepEvery = 30 * time.Second
