-- Enqueue tasks at the back of a queue and wake its workers.
-- KEYS: waiting, meta
-- ARGV: channel, queue name, task...
-- Returns 1 when this call created the queue (the caller then registers it).
local n = #ARGV - 2
redis.call('LPUSH', KEYS[1], unpack(ARGV, 3))
local created = redis.call('HSETNX', KEYS[2], 'name', ARGV[2])
redis.call('PUBLISH', ARGV[1], 'w' .. n)
return created
