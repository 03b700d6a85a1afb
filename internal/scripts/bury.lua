-- Move a process's task to the queue's dead letters, with when, which
-- worker and the kind of failure in its header and the error, and its
-- whole attempt history, in the errors hash (see attempt_buried); then
-- trim the dead letters to their bounds (oldest first), with their
-- errors. Only the worker that holds the process, while its lease on
-- the queue is live. A cancelled task, or one of a deleted queue, is
-- dropped instead.
-- A task that asked for it keeps its outcome too (see retain), and the
-- attempt is noted last in its history. A sequence's task
-- may hold its group (see sequence_died).
-- Returns -1 lease gone, 0 not owned (lost), else the code of the state it
-- had: 1 active, 2 cancelled, 3 deleted.
local procs_key, leases_key, meta_key, dead_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local errors_key, results_key, retained_key, waiting_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local idle_key, unique_key, high_key, low_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local progress_key, stats_key = KEYS[13], KEYS[14]
local worker, pid, kind, err = ARGV[1], ARGV[2], ARGV[3], ARGV[4] -- err: '' for none
local dead_max, dead_age = tonumber(ARGV[5]), tonumber(ARGV[6]) -- the dead letters' bounds (age in ms)
local channel = ARGV[7]
local gwait_key, gready_key, grunning_key, glimits_key = KEYS[15], KEYS[16], KEYS[17], KEYS[18] -- see GROUPS in common/waiting.lua
local flows_key = KEYS[19] -- workflow tasks' notices (see flow_notice)

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, grunning_key, glimits_key)
local v, refused = take_own_process(procs_key, leases_key, meta_key, progress_key, worker, pid)
if not v then
  return refused
end
local state = proc_state(v)
local entry = proc_task(v)
local id = entry_id(entry)
if state == 'a' then
  -- Before groups_settle, which would give its group a turn.
  sequence_died(meta_key, entry)
end
release_unique(unique_key, entry)
slots_freed(meta_key, waiting_key, idle_key, channel, entry_weight(entry))
groups_settle(idle_key, channel)
if state ~= 'a' then
  errors_drop(errors_key, {id})
  return STATE_CODE[state]
end
local now = now_ms()
retain(results_key, retained_key, channel, entry, 'dead', pid, 1, err, kind)
flow_notice(flows_key, entry, 'dead')
local h, payload = entry_split(entry)
h = attempt_buried(errors_key, id, h, now, worker, err)
h = header_set(h, 'a', (tonumber(header_get(h, 'a') or '0') or 0) + 1) -- see entry_ran
h = header_set(header_set(header_set(h, 'D', ms(now)), 'W', worker), 'K', kind)
redis.call('ZADD', dead_key, ms(now), h .. ':' .. payload)
-- A sequence whose dead letter the bounds trimmed goes on: nobody polls.
local released = trim_dead(dead_key, errors_key, dead_max, now - dead_age, meta_key)
if released > 0 then wake(idle_key, channel, released) end
stat('d', 1, entry)
if STATS then stat_run(now_us() - (tonumber(pid, 16) or 0)) end
stats_flush(stats_key)
return 1
