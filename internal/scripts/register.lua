-- Register a new worker in the registry with a fresh lease, and what it
-- says of itself for inspection: its program's operating-system process id
-- and host, and its start (the Redis clock, ms), as "pid\nstart\nhost"
-- (the host last: it may hold anything).
-- Returns the lease expiry (ms).
local workers_key, info_key = KEYS[1], KEYS[2] -- the registry, the workers' info
local worker, ttl, pid, host = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] -- ttl in ms

local now = now_ms()
local expiry = now + ttl
redis.call('ZADD', workers_key, ms(expiry), worker)
redis.call('HSET', info_key, worker, pid .. '\n' .. ms(now) .. '\n' .. host)
return expiry
