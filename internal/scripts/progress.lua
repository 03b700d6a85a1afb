-- Record a process's progress report: the last one per task in flight, in
-- the progress hash under its task id, as '<pid>,<percent>,<ms>:<note>'
-- (ms: when, by the Redis clock), and announce it with a progress event
-- 'p<task id>,<record>' for waiters. Only the worker that holds the
-- process, while its lease on the queue is live, and only while the
-- process is active: a cancelled one, or one of a deleted queue, is not
-- written for. Every script that ends a process removes its report.
-- KEYS: procs, leases, progress
-- ARGV: worker, pid, percent, note, channel
-- Returns -1 lease gone, 0 not owned (lost), else the code of the state it
-- has: 1 active (written), 2 cancelled, 3 deleted (not written).
local now = now_ms()
if not lease_live(KEYS[2], ARGV[1], now) then
  return -1
end
local v = redis.call('HGET', KEYS[1], ARGV[2])
if not v or proc_owner(v) ~= ARGV[1] then
  return 0
end
local state = proc_state(v)
if state ~= 'a' then
  return STATE_CODE[state]
end
local id = entry_id(proc_task(v))
local rec = ARGV[2] .. ',' .. ARGV[3] .. ',' .. ms(now) .. ':' .. ARGV[4]
redis.call('HSET', KEYS[3], id, rec)
publish(ARGV[5], 'p' .. id .. ',' .. rec)
return 1
