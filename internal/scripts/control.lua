-- Change a queue's controls, for the whole fleet: pause it (dequeues hand
-- out nothing; in-flight tasks finish), resume it, or set its concurrency
-- limit (the most tasks in flight across all workers; 0 removes it).
-- Resuming, or raising or removing the limit, wakes every runtime if tasks
-- wait. A queue controlled before it has tasks exists from then on.
-- A rate limit (op "rate": limit starts in any per ms; 0 removes it) is
-- set the same way.
-- KEYS: meta, waiting, high, low
-- ARGV: channel, queue name, op ("pause" | "resume" | "limit" | "rate"),
--       limit, per (ms)
-- Returns 1 while the queue is not yet confirmed in the registry (see
-- registered.lua): the caller then registers it.
set_lists(KEYS[2], KEYS[3], KEYS[4])
local op = ARGV[3]
local wake = false
if op == 'pause' then
  redis.call('HSET', KEYS[1], 'paused', 1)
elseif op == 'resume' then
  wake = redis.call('HDEL', KEYS[1], 'paused') == 1
elseif op == 'rate' then
  local rate = tonumber(ARGV[4])
  if rate > 0 then
    redis.call('HSET', KEYS[1], 'rate', rate, 'per', ARGV[5])
  else
    redis.call('HDEL', KEYS[1], 'rate', 'per')
  end
  wake = true
else
  local old = tonumber(redis.call('HGET', KEYS[1], 'limit') or nil)
  local limit = tonumber(ARGV[4])
  if limit > 0 then
    redis.call('HSET', KEYS[1], 'limit', limit)
  else
    redis.call('HDEL', KEYS[1], 'limit')
  end
  wake = old ~= nil and (limit <= 0 or limit > old)
end
if wake then
  local waiting = waiting_len(KEYS[2])
  if waiting > 0 then
    publish(ARGV[1], 'w' .. waiting)
  end
end
name_queue(KEYS[1], ARGV[2])
return 1 - redis.call('HEXISTS', KEYS[1], 'registered')
