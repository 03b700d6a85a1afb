-- Register a new worker in the registry with a fresh lease.
-- KEYS: workers
-- ARGV: worker, ttl (ms)
-- Returns the lease expiry (ms).
local expiry = now_ms() + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], ms(expiry), ARGV[1])
return expiry
