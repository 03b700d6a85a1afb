-- Return one worker's processes in one queue to the FRONT of the queue, in
-- the order they were dequeued, then drop the worker's lease and wake the
-- queue. Only that worker's processes move: every other worker's stay put.
--
-- Used by peers to reclaim a dead worker (mode "expired": refuses while the
-- lease is still live) and by a worker giving its own work back (mode
-- "force": StopWork, Fail, Close). Processes listed after the mode are kept
-- (a worker reconciling after a lost reply keeps what it knows it holds).
-- Cancelled processes and those of a deleted queue are dropped, not requeued.
-- KEYS: waiting, procs, leases, meta, idle, errors
-- ARGV: worker, channel, mode ("expired" | "force" | "orphans"), keep pid...
-- Returns -1 if mode is "expired" and the lease is live, else tasks returned.
local worker = ARGV[1]
local mode = ARGV[3]
if mode == 'expired' and lease_live(KEYS[3], worker, now_ms()) then
  return -1
end
local keep = {}
for i = 4, #ARGV do keep[ARGV[i]] = true end

local mine = {}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local pid, v = all[i], all[i + 1]
  if proc_owner(v) == worker and not keep[pid] then
    mine[#mine + 1] = {pid = pid, v = v}
  end
end
local returned = return_to_front(KEYS[1], KEYS[2], KEYS[6], mine)
drop_meta_if_gone(KEYS[2], KEYS[4])
if mode ~= 'orphans' then
  redis.call('ZREM', KEYS[3], worker)
  redis.call('ZREM', KEYS[5], worker)
end
if returned > 0 then
  publish(ARGV[2], 'w' .. returned)
elseif mode ~= 'orphans' then
  -- The worker may have been named in a work event it never acted on: it
  -- died parked in the idle set, or stopped listening before it left it.
  -- Wake everyone if tasks wait.
  local waiting = redis.call('LLEN', KEYS[1])
  if waiting > 0 then
    publish(ARGV[2], 'w' .. waiting)
  end
end
return returned
