-- Stop a process: put its task at the back of the queue (a retry) and wake
-- the queue. A task that was cancelled, or whose queue was deleted, is
-- dropped instead: a retry must not bring it back.
--
-- With "front" a runtime gives back a process an enqueue handed it (see
-- enqueue.lua) that it could not start: the task goes back to the front
-- as it was, not counted as a start, since it never ran, and the queue is
-- woken as by an enqueue.
-- KEYS: procs, leases, waiting, meta, idle, unique, errors, high, low, progress,
--       stats
-- ARGV: worker, pid, channel, "front" (or nothing)
-- Returns -1 lease gone, 0 not owned (lost), else the code of the state it
-- had: 1 active, 2 cancelled, 3 deleted.
set_lists(KEYS[3], KEYS[8], KEYS[9])
local v, refused = take_own_process(KEYS[1], KEYS[2], KEYS[4], KEYS[10], ARGV[1], ARGV[2])
if not v then
  return refused
end
local state = proc_state(v)
if state == 'a' and ARGV[4] == 'front' then
  local entry = proc_task(v)
  stat('q', 1)
  stats_flush(KEYS[11])
  redis.call('RPUSH', list_of(entry, KEYS[3]), entry)
  wake(KEYS[5], ARGV[3], 1)
elseif state == 'a' then
  local entry = entry_due_now(entry_ran(proc_task(v)))
  stat('q', 1)
  if STATS then stat_run(now_us() - (tonumber(ARGV[2], 16) or 0)) end
  stats_flush(KEYS[11])
  redis.call('LPUSH', list_of(entry, KEYS[3]), entry)
  publish(ARGV[3], 'w1')
else
  release_unique(KEYS[6], proc_task(v))
  redis.call('HDEL', KEYS[7], entry_id(proc_task(v)))
  slots_freed(KEYS[4], KEYS[3], KEYS[5], ARGV[3], entry_weight(proc_task(v)))
end
return STATE_CODE[state]
