-- Give a worker a lease on a queue. The lease never outlives the registry
-- lease it was derived from (ARGV[2], read in the registry's slot), so a
-- worker that died between the two calls cannot leave a lease behind that
-- the reclaimers have already given up on.
-- KEYS: leases, meta
-- ARGV: worker, registry expiry (ms), queue name
-- Returns -1 if the registry lease has already expired, else 1 while the
-- queue is not yet confirmed in the registry (see registered.lua).
local now = now_ms()
local expiry = tonumber(ARGV[2])
if expiry <= now then
  return -1
end
redis.call('ZADD', KEYS[1], ms(expiry), ARGV[1])
name_queue(KEYS[2], ARGV[3])
return 1 - redis.call('HEXISTS', KEYS[2], 'registered')
