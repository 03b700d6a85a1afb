-- Record that a live worker serves a queue, before it takes a lease there:
-- reclaimers find a dead worker's queues through this set.
-- KEYS: workers, worker's queue set
-- ARGV: worker, queue name
-- Returns the worker's registry lease expiry (ms), or -1 if it has expired.
local now = now_ms()
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) <= now then
  return -1
end
redis.call('SADD', KEYS[2], ARGV[2])
return tonumber(score)
