-- Extend a live lease (in the worker registry or in one queue). An expired
-- lease is never revived: the worker must treat itself as dead.
-- Returns the new expiry (ms), or -1 when the lease is gone.
local leases_key = KEYS[1] -- the worker registry, or one queue's leases
local worker, ttl = ARGV[1], tonumber(ARGV[2]) -- ttl in ms

local now = now_ms()
if not lease_live(leases_key, worker, now) then
  return -1
end
local expiry = now + ttl
redis.call('ZADD', leases_key, ms(expiry), worker)
return expiry
