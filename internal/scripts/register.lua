-- Register a new worker in the registry with a fresh lease.
-- Returns the lease expiry (ms).
local workers_key = KEYS[1]
local worker, ttl = ARGV[1], tonumber(ARGV[2]) -- ttl in ms

local expiry = now_ms() + ttl
redis.call('ZADD', workers_key, ms(expiry), worker)
return expiry
