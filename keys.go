package worqr

import "strings"

// keys names every Redis key and channel of one prefix.
//
// All keys of a queue share the hash tag {q:<escaped name>}, and all
// worker-level keys share the tag {r}, so every script touches one slot and
// runs unchanged on Redis Cluster. Queue names are never parsed back out of
// keys (registries hold the raw names), so any byte may appear in a name;
// only '{', '}' and '%' are escaped, because a '}' inside the tag would end
// it early.
type keys struct {
	prefix string
}

// queueKeys are the keys and the event channel of one queue.
type queueKeys struct {
	waiting string // LIST of tasks; the right end is the front (next out)
	procs   string // HASH pid -> state byte + owner id + task
	leases  string // ZSET worker id -> lease expiry (ms, Redis clock)
	meta    string // HASH name -> queue name (while it exists), seq -> last pid
	idle    string // ZSET worker id -> when its runtime found the queue empty
	channel string // pub/sub channel for work, cancel and delete events
}

var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func (k keys) queue(name string) queueKeys {
	base := k.prefix + ":{q:" + tagEscaper.Replace(name) + "}:"
	return queueKeys{
		waiting: base + "waiting",
		procs:   base + "procs",
		leases:  base + "leases",
		meta:    base + "meta",
		idle:    base + "idle",
		channel: base + "events",
	}
}

// queues is the SET of known queue names.
func (k keys) queues() string { return k.prefix + ":{r}:queues" }

// workers is the ZSET of worker ids scored by registry lease expiry.
func (k keys) workers() string { return k.prefix + ":{r}:workers" }

// workerQueues is the SET of queues a worker serves or held a lease in.
func (k keys) workerQueues(id string) string { return k.prefix + ":{r}:wq:" + id }

// forRelease are the keys of release.lua, shared by StopWork, Fail, the
// reconciliation and the reclaim of dead workers.
func (k queueKeys) forRelease() []string {
	return []string{k.waiting, k.procs, k.leases, k.meta, k.idle}
}
