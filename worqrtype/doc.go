// Package worqrtype holds the plain data types of worqr's read side: what
// a Client returns when it inspects tasks, processes, workers, queues,
// groups, stats, workflows and the consistency check, and what observers
// are told of a process's end. Both the root package, which names each
// type again (worqr.TaskInfo is worqrtype.TaskInfo), and worqr's engine
// build them, so neither converts to the other's types.
//
// The package imports only the standard library. Names its docs use
// without a package (Client, Process, Group, Retain, PayloadPrefix,
// SetConcurrency, ...) are package worqr's.
package worqrtype
