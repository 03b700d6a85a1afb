-- Record a process's progress report: the last one per task in flight, in
-- the progress hash under its task id, as '<pid>,<percent>,<ms>:<note>'
-- (ms: when, by the Redis clock), and announce it with a progress event
-- 'p<task id>,<record>' for waiters. Only the worker that holds the
-- process, while its lease on the queue is live, and only while the
-- process is active: a cancelled one, or one of a deleted queue, is not
-- written for. Every script that ends a process removes its report.
-- Returns -1 lease gone, 0 not owned (lost), else the code of the state it
-- has: 1 active (written), 2 cancelled, 3 deleted (not written).
local procs_key, leases_key, progress_key = KEYS[1], KEYS[2], KEYS[3]
local worker, pid, percent, note, channel = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local now = now_ms()
if not lease_live(leases_key, worker, now) then
  return -1
end
local v = redis.call('HGET', procs_key, pid)
if not v or proc_owner(v) ~= worker then
  return 0
end
local state = proc_state(v)
if state ~= 'a' then
  return STATE_CODE[state]
end
local id = entry_id(proc_task(v))
local rec = pid .. ',' .. percent .. ',' .. ms(now) .. ':' .. note
redis.call('HSET', progress_key, id, rec)
publish(channel, 'p' .. id .. ',' .. rec)
return 1
