-- Change a queue's controls, for the whole fleet: pause it (dequeues hand
-- out nothing; in-flight tasks finish), resume it, or set its concurrency
-- limit (the most tasks in flight across all workers; 0 removes it).
-- Resuming, or raising or removing the limit, wakes every runtime if tasks
-- wait. A rate limit (op "rate": limit starts in any per ms; 0 removes it)
-- is set the same way.
-- A queue that does not exist (its meta hash holds no name: never made, or
-- deleted) is made only when asked to (create "1"); otherwise nothing
-- changes, so a misspelt name makes no queue.
-- KEYS: meta, waiting, high, low
-- ARGV: channel, queue name, op ("pause" | "resume" | "limit" | "rate"),
--       limit, per (ms), create ("1" | "0")
-- limit and per are whole numbers in 0..2^53 - 1 (the client checks; see
-- control_value), stored as given.
-- Returns -1, changing nothing, for a queue that does not exist and create
-- "0"; else 1 while the queue is not yet confirmed in the registry (see
-- registered.lua): the caller then registers it; else 0.
if ARGV[6] ~= '1' and redis.call('HEXISTS', KEYS[1], 'name') == 0 then
  return -1
end
set_lists(KEYS[2], KEYS[3], KEYS[4])
local op = ARGV[3]
local wake = false
local value = ARGV[4]
local set = value ~= '0'
if set and not control_value(value) then
  return redis.error_reply('ERR worqr control ' .. op .. ': ' .. value .. ' is not a whole number in 0..9007199254740991')
end
if op == 'pause' then
  redis.call('HSET', KEYS[1], 'paused', 1)
elseif op == 'resume' then
  wake = redis.call('HDEL', KEYS[1], 'paused') == 1
elseif op == 'rate' then
  if set then
    redis.call('HSET', KEYS[1], 'rate', value, 'per', ARGV[5])
  else
    redis.call('HDEL', KEYS[1], 'rate', 'per')
  end
  wake = true
else
  local old = control_value(redis.call('HGET', KEYS[1], 'limit'))
  if set then
    redis.call('HSET', KEYS[1], 'limit', value)
  else
    redis.call('HDEL', KEYS[1], 'limit')
  end
  wake = old ~= nil and (not set or tonumber(value) > old)
end
if wake then
  local waiting = waiting_len(KEYS[2])
  if waiting > 0 then
    publish(ARGV[1], 'w' .. waiting)
  end
end
name_queue(KEYS[1], ARGV[2])
return 1 - redis.call('HEXISTS', KEYS[1], 'registered')
