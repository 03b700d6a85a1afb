-- Stop a process: put its task at the back of the queue (a retry) and wake
-- the queue. A task that was cancelled, or whose queue was deleted, is
-- dropped instead: a retry must not bring it back.
--
-- With "front" a runtime gives back a process an enqueue handed it (see
-- enqueue.lua) that it could not start: the task goes back to the front
-- as it was, not counted as a start, since it never ran, and the queue is
-- woken as by an enqueue.
-- Returns -1 lease gone, 0 not owned (lost), else the code of the state it
-- had: 1 active, 2 cancelled, 3 deleted.
local procs_key, leases_key, waiting_key, meta_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local idle_key, unique_key, errors_key, high_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local low_key, progress_key, stats_key = KEYS[9], KEYS[10], KEYS[11]
local gwait_key, gready_key, grunning_key, glimits_key = KEYS[12], KEYS[13], KEYS[14], KEYS[15] -- see GROUPS in common/waiting.lua
local worker, pid, channel, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4] -- mode: "front" (or nothing)

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, grunning_key, glimits_key)
local v, refused = take_own_process(procs_key, leases_key, meta_key, progress_key, worker, pid)
if not v then
  return refused
end
local state = proc_state(v)
groups_settle(idle_key, channel)
if state == 'a' and mode == 'front' then
  local entry = proc_task(v)
  stat('q', 1)
  stats_flush(stats_key)
  push_waiting(entry, waiting_key, true)
  wake(idle_key, channel, 1)
elseif state == 'a' then
  local entry = entry_due_now(entry_ran(proc_task(v)))
  stat('q', 1)
  if STATS then stat_run(now_us() - (tonumber(pid, 16) or 0)) end
  stats_flush(stats_key)
  push_waiting(entry, waiting_key)
  publish(channel, 'w1')
else
  release_unique(unique_key, proc_task(v))
  errors_drop(errors_key, {entry_id(proc_task(v))})
  slots_freed(meta_key, waiting_key, idle_key, channel, entry_weight(proc_task(v)))
end
return STATE_CODE[state]
