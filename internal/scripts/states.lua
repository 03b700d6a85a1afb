-- Report what became of a worker's processes in one queue, for a worker
-- that may have missed events (after a resubscription).
-- KEYS: procs, leases
-- ARGV: worker, pid...
-- Returns one state byte per pid: the state it has, or "l" when it is no
-- longer this worker's (lost), which is every one once the lease is gone.
local live = lease_live(KEYS[2], ARGV[1], now_ms())
local out = {}
for i = 2, #ARGV do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if live and v and proc_owner(v) == ARGV[1] then
    out[#out + 1] = proc_state(v)
  else
    out[#out + 1] = 'l'
  end
end
return out
