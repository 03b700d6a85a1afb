-- Finish a process: delete it, but only if it still belongs to the worker
-- and the worker's lease on the queue is live.
-- KEYS: procs, leases, meta
-- ARGV: worker, pid
-- Returns -1 lease gone, 0 not owned (lost), else the code of the state it
-- had: 1 active, 2 cancelled, 3 deleted.
local now = now_ms()
if not lease_live(KEYS[2], ARGV[1], now) then
  return -1
end
local v = redis.call('HGET', KEYS[1], ARGV[2])
if not v or proc_owner(v) ~= ARGV[1] then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[2])
drop_meta_if_gone(KEYS[1], KEYS[3])
return STATE_CODE[proc_state(v)]
