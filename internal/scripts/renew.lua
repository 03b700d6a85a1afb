-- Extend a live lease (in the worker registry or in one queue). An expired
-- lease is never revived: the worker must treat itself as dead.
-- KEYS: leases
-- ARGV: worker, ttl (ms)
-- Returns the new expiry (ms), or -1 when the lease is gone.
local now = now_ms()
if not lease_live(KEYS[1], ARGV[1], now) then
  return -1
end
local expiry = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], ms(expiry), ARGV[1])
return expiry
