-- Enqueue tasks at the back of a queue and wake its workers.
-- KEYS: waiting, meta
-- ARGV: channel, queue name, task...
-- Returns 1 while the queue is not yet confirmed in the registry (see
-- registered.lua): the caller then registers it.
local n = #ARGV - 2
redis.call('LPUSH', KEYS[1], unpack(ARGV, 3))
redis.call('HSETNX', KEYS[2], 'name', ARGV[2])
publish(ARGV[1], 'w' .. n)
return 1 - redis.call('HEXISTS', KEYS[2], 'registered')
