-- Enqueue tasks at the back of a queue and wake its workers.
-- KEYS: waiting, meta
-- ARGV: channel, queue name, task...
-- Returns 1 while the queue is not yet confirmed in the registry (see
-- registered.lua): the caller then registers it.
local n = #ARGV - 2
redis.call('LPUSH', KEYS[1], unpack(ARGV, 3))
redis.call('PUBLISH', ARGV[1], 'w' .. n)
-- A confirmed queue has its name (delete.lua removes both together), so
-- the usual enqueue stops here.
if redis.call('HEXISTS', KEYS[2], 'registered') == 1 then
  return 0
end
redis.call('HSETNX', KEYS[2], 'name', ARGV[2])
return 1
