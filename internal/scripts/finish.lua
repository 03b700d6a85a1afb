-- Finish a process: delete it, but only if it still belongs to the worker
-- and the worker's lease on the queue is live.
-- KEYS: procs, leases, meta
-- ARGV: worker, pid
-- Returns -1 lease gone, 0 not owned (lost), else the code of the state it
-- had: 1 active, 2 cancelled, 3 deleted.
local v, refused = take_own_process(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])
if not v then
  return refused
end
return STATE_CODE[proc_state(v)]
