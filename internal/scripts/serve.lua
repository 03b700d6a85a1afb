-- Record that a live worker serves a queue, before it takes a lease there:
-- reclaimers find a dead worker's queues through this set.
-- Returns the worker's registry lease expiry (ms), or -1 if it has expired.
local workers_key, worker_queues_key = KEYS[1], KEYS[2] -- the registry, the worker's queue set
local worker, queue = ARGV[1], ARGV[2] -- queue: its name

local now = now_ms()
local score = redis.call('ZSCORE', workers_key, worker)
if not score or tonumber(score) <= now then
  return -1
end
redis.call('SADD', worker_queues_key, queue)
return tonumber(score)
