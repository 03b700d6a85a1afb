package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// RegisterWorker enters a new worker id in the registry with a lease of
// ttl.
func (s *Store) RegisterWorker(ctx context.Context, id string, ttl time.Duration) error {
	res, err := s.run(ctx, OpRegisterWorker, "", s.scripts.Register, []string{s.keys.Workers()}, []string{id, ms(ttl)})
	if err != nil {
		return err
	}
	return res.Error()
}

// RenewWorker extends a worker's registry lease to ttl from now, by the
// Redis clock; ErrLeaseGone if it has expired (it is never revived).
func (s *Store) RenewWorker(ctx context.Context, id string, ttl time.Duration) error {
	return s.renew(ctx, OpRenew, "", s.keys.Workers(), id, ttl)
}

// RenewQueueLease extends a worker's lease on a queue; ErrLeaseGone if it
// has expired.
func (s *Store) RenewQueueLease(ctx context.Context, queue, id string, ttl time.Duration) error {
	return s.renew(ctx, OpRenewQueue, queue, s.keys.Queue(queue).Leases, id, ttl)
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
	k := s.keys.Queue(queue)
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
	res, err := s.run(ctx, OpDeregister, "", s.scripts.Deregister, []string{s.keys.Workers(), s.keys.WorkerQueues(id), s.keys.Reclaiming()}, []string{id, mode})
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

// WorkerLease is a live worker and how long its lease has left.
type WorkerLease struct {
	ID       string
	LeftMsec int64
}

// LiveWorkers lists the workers whose registry lease is live.
func (s *Store) LiveWorkers(ctx context.Context) ([]WorkerLease, error) {
	res, err := s.run(ctx, OpRead, "", s.scripts.Live, []string{s.keys.Workers()}, nil)
	if err != nil {
		return nil, err
	}
	vals, err := res.AsStrSlice()
	if err != nil {
		return nil, err
	}
	out := make([]WorkerLease, 0, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		left, _ := strconv.ParseInt(vals[i+1], 10, 64)
		out = append(out, WorkerLease{ID: vals[i], LeftMsec: left})
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
