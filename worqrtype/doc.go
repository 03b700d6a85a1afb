// Package worqrtype holds worqr's plain data types: what a Client returns
// when it inspects tasks, processes, workers, queues, groups, stats,
// workflows and the consistency check, the results of its cancels and
// batch enqueues, the members of an aggregated task, the snapshot of a
// worker's handler slots, and the events its observers and its Tracer are
// told. Both the root package, which names each type again (worqr.TaskInfo
// is worqrtype.TaskInfo), and worqr's engine build them, so neither
// converts to the other's types.
//
// The package imports only the standard library. Names its docs use
// without a package (Client, Process, Group, Retain, PayloadPrefix,
// SetConcurrency, ...) are package worqr's.
package worqrtype
