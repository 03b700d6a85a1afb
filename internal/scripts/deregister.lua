-- Remove a worker from the registry. A reclaimer (mode "expired") calls this
-- only after every queue in the worker's set was released, and it refuses
-- while the lease is live; the worker itself uses mode "force".
-- A removed worker's reclaim claim (see expired.lua), its info (see
-- register.lua) and its handler slots (see worker_slots.lua) go with it.
-- Returns 1 when removed, -1 when refused.
local workers_key, worker_queues_key, reclaiming_key, info_key, slots_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local worker, mode = ARGV[1], ARGV[2] -- mode: expired | force

if mode == 'expired' and lease_live(workers_key, worker, now_ms()) then
  return -1
end
redis.call('ZREM', workers_key, worker)
redis.call('ZREM', reclaiming_key, worker)
redis.call('DEL', worker_queues_key)
redis.call('HDEL', info_key, worker)
redis.call('HDEL', slots_key, worker)
return 1
