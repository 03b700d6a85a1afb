// Command worqr inspects and manages worqr queues in Redis, for operators
// and scripts: what waits, what is delayed, in flight and dead, which
// workers are live, what each queue did per minute (stats), and the
// changes an operator makes by hand (enqueue,
// cancel a task or a workflow, delete a queue, requeue or purge dead letters, wait for an
// outcome, run the consistency check). It uses only worqr's public API.
//
//	worqr [global flags] <command> [arguments] [flags]
//
//	worqr queues                                every queue: waiting, delayed, in flight, dead
//	worqr workers                               live workers: lease left, in flight, queues, handler slots
//	worqr processes <queue>                     a queue's in-flight processes
//	worqr peek <queue>                          the task dequeued next
//	worqr range <queue> [start] [stop]          waiting tasks by position (0 is next out)
//	worqr delayed <queue> [start] [stop]        delayed tasks by due time
//	worqr workflow <id>                         a workflow's state and steps, in dependency order
//	worqr workflow cancel <id>                  cancel a running workflow
//	worqr stats <queue> [--hourly]              counts, wait and run times per minute
//	worqr enqueue <queue> <payload>|-           add a task, print its id
//	worqr cancel <queue> <id>                   cancel a task by id
//	worqr cancel --payload <queue> <payload>|-  cancel every task with this payload
//	worqr delete <queue> --yes                  delete a queue and everything in it
//	worqr dead <queue>                          list dead letters, newest first
//	worqr dead requeue <queue> <id>|--all       put dead letters back in the queue
//	worqr dead delete <queue> <id>              delete one dead letter
//	worqr dead purge <queue> --yes              delete every dead letter
//	worqr result <queue> <id>                   a retained task's outcome
//	worqr wait <queue> <id>                     wait for a retained task's outcome
//	worqr check [--repair]                      consistency check
//	worqr help [command]
//
// Global flags go before or after the command: --addr (else $WORQR_ADDR,
// else 127.0.0.1:6379; a host:port, a comma-separated list of cluster seed
// nodes, or a redis://, rediss:// or unix:// URL), --prefix (else
// $WORQR_PREFIX, else "worqr"), --json and --timeout.
//
// Output is an aligned table by default and one JSON document with
// --json. Tables show payloads escaped (control bytes and invalid UTF-8 as
// Go escapes) and cut to a preview; JSON carries them whole, as "payload"
// when they are valid UTF-8 and "payloadBase64" otherwise. Notes for
// people (an empty list, a page that has more after it) go to stderr, so
// stdout holds only the result.
//
// Exit status: 0 on success; 1 on failure, including "not found" (a task
// id with no task, no outcome retained, or none to wait for, a dead letter
// or a workflow that is not there)
// and a check that found problems; 2 on a usage error (unknown command or
// flag, missing or malformed argument, a destructive command without
// --yes).
//
// Servers whose RESP3 is incomplete (miniredis, some proxies) are reached
// over RESP2 with a URL: --addr 'redis://host:port?protocol=2'.
package main
