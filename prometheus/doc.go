// Package worqrprom exposes worqr's metrics to Prometheus, outside the
// core package so that programs that do not use Prometheus do not import
// it.
//
// It has two parts. An Observer, passed as worqr.Options.Observer,
// counts what the process's own Client and Workers do (enqueues, starts,
// ends by outcome, reclaims, fences) with histograms of the time processes
// run and of the time tasks wait before their first start. A Collector
// reads, on each scrape, the sizes of the queues from Redis (waiting,
// delayed, in flight, dead letters) and the number of live workers: the
// same for every program, so one program (or a sidecar) should register
// it. A SlotCollector reports the handler slots of the program's own
// pools, busy and free (their saturation), from the workers' counts: every
// program that runs workers registers one.
//
// Names follow Prometheus's conventions: the worqr_ prefix, _total on
// counters, base units (_seconds), and the labels queue, kind (the task's
// kind, bounded by ObserverOptions.MaxKinds), outcome (a worqr.Outcome),
// reason (why a task died, bounded by ObserverOptions.MaxReasons), state,
// scope and pool. Queue names may be any bytes, label values must be
// UTF-8: bytes that are not become U+FFFD in the queue label.
package worqrprom
