-- Report what became of a worker's processes in one queue, for a worker
-- that may have missed events (after a resubscription).
-- Returns one state byte per pid: the state it has, or "l" when it is no
-- longer this worker's (lost), which is every one once the lease is gone.
local procs_key, leases_key = KEYS[1], KEYS[2]
local worker = ARGV[1] -- then ARGV[2...]: the pids

local live = lease_live(leases_key, worker, now_ms())
local out = {}
for i = 2, #ARGV do -- the pids
  local v = redis.call('HGET', procs_key, ARGV[i])
  if live and v and proc_owner(v) == worker then
    out[#out + 1] = proc_state(v)
  else
    out[#out + 1] = 'l'
  end
end
return out
