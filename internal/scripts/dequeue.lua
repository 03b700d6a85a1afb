-- Move up to ARGV[2] tasks from the front of the queue into processes owned
-- by the worker, but only while the worker's lease on this queue is live
-- (a fenced or reclaimed worker must never take work).
-- KEYS: waiting, procs, leases, meta
-- ARGV: worker, count
-- Returns -1 when the lease is not live, else {pid, task, pid, task, ...}.
local now = now_ms()
if not lease_live(KEYS[3], ARGV[1], now) then
  return -1
end
-- Process ids count up from the Redis clock in microseconds when the
-- counter is created, so a queue deleted and made again never reuses an
-- id: no Redis dequeues more than one task per microsecond.
if redis.call('HEXISTS', KEYS[4], 'seq') == 0 then
  redis.call('HSET', KEYS[4], 'seq', ms(now_us()))
end
local out = {}
for _ = 1, tonumber(ARGV[2]) do
  local task = redis.call('RPOP', KEYS[1])
  if not task then break end
  local pid = string.format('%x', redis.call('HINCRBY', KEYS[4], 'seq', 1))
  redis.call('HSET', KEYS[2], pid, 'a' .. ARGV[1] .. task)
  out[#out + 1] = pid
  out[#out + 1] = task
end
return out
