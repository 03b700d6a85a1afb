-- Give a worker a lease on a queue. The lease never outlives the registry
-- lease it was derived from (expiry, read in the registry's slot), so a
-- worker that died between the two calls cannot leave a lease behind that
-- the reclaimers have already given up on.
-- Returns -1 if the registry lease has already expired, else 1 while the
-- queue is not yet confirmed in the registry (see registered.lua).
local leases_key, meta_key = KEYS[1], KEYS[2]
local worker, queue = ARGV[1], ARGV[3] -- queue: its name
local expiry = tonumber(ARGV[2]) -- the worker's registry lease's (ms)

local now = now_ms()
if expiry <= now then
  return -1
end
redis.call('ZADD', leases_key, ms(expiry), worker)
name_queue(meta_key, queue)
return 1 - redis.call('HEXISTS', meta_key, 'registered')
