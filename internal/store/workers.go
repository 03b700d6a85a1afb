package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// RegisterWorker enters a new worker id in the registry with a lease of
// ttl, with this program's operating-system process id and host name for
// inspection (LiveWorkers).
func (s *Store) RegisterWorker(ctx context.Context, id string, ttl time.Duration) error {
	host, _ := os.Hostname() // "" if unknown: shown as such
	res, err := s.run(ctx, OpRegisterWorker, "", s.scripts.Register, []string{s.keys.Workers(), s.keys.WorkerInfo()},
		[]string{id, ms(ttl), strconv.Itoa(os.Getpid()), host})
	if err != nil {
		return err
	}
	return res.Error()
}

// Keepalive is one worker's renewal (see keepalive.lua).
type Keepalive struct {
	Worker string
	// Queues are the queues whose leases the same call renews: only on a
	// single Redis (see JointRenewals); on a Cluster each queue's lease is
	// renewed apart (RenewQueueLease).
	Queues []string
}

// KeptAlive is what a renewal did and learned.
type KeptAlive struct {
	// Gone is set when the worker's registry lease had expired: nothing
	// was renewed, and the worker must treat itself as dead.
	Gone bool
	// QueueGone tells, for each of Keepalive.Queues, whether the worker's
	// lease there was gone (and so not renewed).
	QueueGone []bool
	// Next is how long until the next live peer's lease runs out, by the
	// Redis clock; 0 when no other worker holds a live lease.
	Next time.Duration
	// Dead is set when a worker whose lease expired waits, unclaimed, for
	// a reclaimer (for the first worker of a call only).
	Dead bool
	// Workers is how many workers the registry holds whose lease is
	// live, after the renewals.
	Workers int64
}

// MaxWorkersPerKeepalive bounds the workers one Keepalive call renews, so
// that the script holds Redis up for well under a millisecond.
const MaxWorkersPerKeepalive = 100

// Keepalive extends workers' registry leases, and their leases on the
// queues they list, to ttl from now by the Redis clock, and reads what
// their reclaimers need from the registry: one script for them all. An
// expired lease is never revived.
func (s *Store) Keepalive(ctx context.Context, ttl time.Duration, ks []Keepalive) ([]KeptAlive, error) {
	keys := []string{s.keys.Workers(), s.keys.Reclaiming()}
	args := make([]string, 1, 1+2*len(ks))
	args[0] = ms(ttl)
	for _, k := range ks {
		for _, q := range k.Queues {
			keys = append(keys, s.keys.Queue(q).Leases)
		}
		args = append(args, k.Worker, strconv.Itoa(len(k.Queues)))
	}
	res, err := s.run(ctx, OpRenew, "", s.scripts.Keepalive, keys, args)
	if err != nil {
		return nil, err
	}
	vals, err := res.ToArray()
	if err != nil {
		return nil, err
	}
	const head = 6 // now, dead, first, its expiry, the second's, the registry's live workers
	if want := head + len(keys) - 2 + len(ks); len(vals) != want {
		return nil, fmt.Errorf("keepalive.lua returned %d values, not %d", len(vals), want)
	}
	first, err := vals[2].ToString()
	errs := []error{err}
	ints := make([]int64, len(vals))
	for i, v := range vals {
		if i != 2 {
			ints[i], err = v.AsInt64()
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	now, dead, flags := ints[0], ints[1] > 0, ints[head:]
	out := make([]KeptAlive, len(ks))
	for i, k := range ks {
		next := ints[3]
		if first == k.Worker {
			next = ints[4]
		}
		// One reclaimer is enough to send to a dead worker.
		o := KeptAlive{Gone: flags[0] < 0, Dead: dead && i == 0, Workers: ints[5], QueueGone: make([]bool, len(k.Queues))}
		if next > now {
			o.Next = time.Duration(next-now) * time.Millisecond
		}
		for j := range k.Queues {
			o.QueueGone[j] = flags[1+j] < 0
		}
		flags = flags[1+len(k.Queues):]
		out[i] = o
	}
	return out, nil
}

// RenewQueueLease extends a worker's lease on a queue; ErrLeaseGone if it
// has expired.
func (s *Store) RenewQueueLease(ctx context.Context, queue, id string, ttl time.Duration) error {
	return s.renew(ctx, OpRenewQueue, queue, s.queueKeys(queue).Leases, id, ttl)
}

func (s *Store) renew(ctx context.Context, op Op, queue, key, id string, ttl time.Duration) error {
	res, err := s.run(ctx, op, queue, s.scripts.Renew, []string{key}, []string{id, ms(ttl)})
	if err != nil {
		return err
	}
	expiry, err := res.AsInt64()
	if err != nil {
		return err
	}
	if expiry < 0 {
		return ErrLeaseGone
	}
	return nil
}

// JoinQueue records in the registry that a live worker serves a queue,
// then gives it a lease on the queue that expires with its registry lease
// (a worker that dies in between leaves nothing the reclaimers would miss).
// ErrLeaseGone if the registry lease has expired. It reports whether the
// queue is not yet confirmed in the queue registry.
func (s *Store) JoinQueue(ctx context.Context, queue, id string) (unregistered bool, err error) {
	res, err := s.run(ctx, OpServe, queue, s.scripts.Serve, []string{s.keys.Workers(), s.keys.WorkerQueues(id)}, []string{id, queue})
	if err != nil {
		return false, err
	}
	expiry, err := res.AsInt64()
	if err != nil {
		return false, err
	}
	if expiry < 0 {
		return false, ErrLeaseGone
	}
	k := s.queueKeys(queue)
	res, err = s.run(ctx, OpJoin, queue, s.scripts.Join, []string{k.Leases, k.Meta}, []string{id, strconv.FormatInt(expiry, 10), queue})
	if err != nil {
		return false, err
	}
	n, err := res.AsInt64()
	switch {
	case err != nil:
		return false, err
	case n < 0:
		return false, ErrLeaseGone
	}
	return n == 1, nil
}

// LeaveQueue drops a queue from a worker's queue set, once the worker has
// given back its work there and its lease.
func (s *Store) LeaveQueue(ctx context.Context, id, queue string) error {
	if err := s.enter(ctx, OpLeaveQueue, queue); err != nil {
		return err
	}
	return s.rdb.Do(ctx, s.b().Srem().Key(s.keys.WorkerQueues(id)).Member(queue).Build().Pin()).Error()
}

// Deregister removes a worker from the registry. With expired set (a
// reclaimer) it is refused while the lease is live, and reports false.
func (s *Store) Deregister(ctx context.Context, id string, expired bool) (bool, error) {
	mode := "force"
	if expired {
		mode = "expired"
	}
	res, err := s.run(ctx, OpDeregister, "", s.scripts.Deregister, []string{s.keys.Workers(), s.keys.WorkerQueues(id), s.keys.Reclaiming(), s.keys.WorkerInfo(), s.keys.WorkerSlots()}, []string{id, mode})
	if err != nil {
		return false, err
	}
	n, err := res.AsInt64()
	return n == 1, err
}

// Expired is what a reclaimer learns from the registry in one call.
type Expired struct {
	// Dead lists the workers whose lease expired, now claimed by the
	// caller for the claim it asked for.
	Dead []string
	// Next is how long until the next live peer's lease runs out, by the
	// Redis clock; 0 when no other worker holds a live lease.
	Next time.Duration
}

// ExpiredWorkers claims up to limit workers whose registry lease expired
// and that no peer has claimed (see expired.lua), for claim, and tells
// when the next lease of a worker other than self runs out.
func (s *Store) ExpiredWorkers(ctx context.Context, limit int, self string, claim time.Duration) (Expired, error) {
	res, err := s.run(ctx, OpExpired, "", s.scripts.Expired, []string{s.keys.Workers(), s.keys.Reclaiming()}, []string{strconv.Itoa(limit), self, ms(claim)})
	if err != nil {
		return Expired{}, err
	}
	vals, err := res.ToArray()
	if err != nil {
		return Expired{}, err
	}
	if len(vals) < 2 {
		return Expired{}, fmt.Errorf("expired.lua returned %d values", len(vals))
	}
	now, err1 := vals[0].AsInt64()
	next, err2 := vals[1].AsInt64()
	if err := errors.Join(err1, err2); err != nil {
		return Expired{}, err
	}
	out := Expired{Dead: make([]string, 0, len(vals)-2)}
	if next > now {
		out.Next = time.Duration(next-now) * time.Millisecond
	}
	for _, v := range vals[2:] {
		id, err := v.ToString()
		if err != nil {
			return Expired{}, err
		}
		out.Dead = append(out.Dead, id)
	}
	return out, nil
}

// WorkerLease is a live worker, how long its lease has left, and what it
// said of itself when it registered: its program's operating-system
// process id, its host and its start by the Redis clock (zero values for
// a worker registered without them).
type WorkerLease struct {
	ID        string
	LeftMsec  int64
	PID       int
	Host      string
	StartedMs int64
	// Slots are its handlers' slots per queue, as it last recorded them
	// (SetWorkerSlots); none for a worker that handles no queue, or of a
	// release that did not record them.
	Slots []QueueSlots
}

// QueueSlots is how many handler slots a worker has in a queue: a
// Handle's concurrency, or the size of the HandleQueues pool that serves
// the queue (shared with the pool's other queues).
type QueueSlots struct {
	Queue string
	Slots int
}

// encodeWorkerSlots is a worker's slots record (see records.go): per
// queue '<slots>,<name length>:<name>', one after the other.
func encodeWorkerSlots(qs []QueueSlots) string {
	var b strings.Builder
	for _, q := range qs {
		fmt.Fprintf(&b, "%d,%d:%s", q.Slots, len(q.Queue), q.Queue)
	}
	return b.String()
}

// decodeWorkerSlots reads a slots record; what it cannot read (a record
// of another layout) ends the list there.
func decodeWorkerSlots(rec string) []QueueSlots {
	var out []QueueSlots
	for rec != "" {
		n, rest, ok1 := strings.Cut(rec, ",")
		size, rest, ok2 := strings.Cut(rest, ":")
		slots, err1 := strconv.Atoi(n)
		l, err2 := strconv.Atoi(size)
		if !ok1 || !ok2 || err1 != nil || err2 != nil || l < 0 || l > len(rest) {
			break
		}
		out = append(out, QueueSlots{Queue: rest[:l], Slots: slots})
		rec = rest[l:]
	}
	return out
}

// SetWorkerSlots records a live worker's handler slots, every queue it
// handles in one record (none: removed); ErrLeaseGone, writing nothing,
// if its registry lease has expired.
func (s *Store) SetWorkerSlots(ctx context.Context, id string, qs []QueueSlots) error {
	res, err := s.run(ctx, OpWorkerSlots, "", s.scripts.WorkerSlots, []string{s.keys.Workers(), s.keys.WorkerSlots()}, []string{id, encodeWorkerSlots(qs)})
	if err != nil {
		return err
	}
	n, err := res.AsInt64()
	switch {
	case err != nil:
		return err
	case n < 0:
		return ErrLeaseGone
	}
	return nil
}

// LiveWorkers lists the workers whose registry lease is live.
func (s *Store) LiveWorkers(ctx context.Context) ([]WorkerLease, error) {
	res, err := s.run(ctx, OpRead, "", s.scripts.Live, []string{s.keys.Workers(), s.keys.WorkerInfo(), s.keys.WorkerSlots()}, nil)
	if err != nil {
		return nil, err
	}
	vals, err := res.AsStrSlice()
	if err != nil {
		return nil, err
	}
	out := make([]WorkerLease, 0, len(vals)/4)
	for i := 0; i+3 < len(vals); i += 4 {
		left, _ := strconv.ParseInt(vals[i+1], 10, 64)
		l := WorkerLease{ID: vals[i], LeftMsec: left}
		if f := strings.SplitN(vals[i+2], "\n", 3); len(f) == 3 {
			l.PID, _ = strconv.Atoi(f[0])
			l.StartedMs, _ = strconv.ParseInt(f[1], 10, 64)
			l.Host = f[2]
		}
		l.Slots = decodeWorkerSlots(vals[i+3])
		out = append(out, l)
	}
	return out, nil
}

// WorkerQueues lists the queues in a worker's queue set.
func (s *Store) WorkerQueues(ctx context.Context, id string) ([]string, error) {
	if err := s.enter(ctx, OpRead, ""); err != nil {
		return nil, err
	}
	return s.rdb.Do(ctx, s.b().Smembers().Key(s.keys.WorkerQueues(id)).Build().Pin()).AsStrSlice()
}
